import CosyncAuth
import Foundation
import HTTPTypes
import Hummingbird

/// The apps list and the pages of one app.
extension PortalRoutes {
    // MARK: apps

    /// A search text as the admin API takes one (at most 200 code points); empty is none.
    static func searchText(_ query: [String: String]?) throws -> String? {
        guard let raw = query?["q"]?.trimmingCharacters(in: .whitespaces), !raw.isEmpty else { return nil }
        guard raw.unicodeScalars.count <= 200 else { throw Stop.badRequest }
        return raw
    }

    /// `GET /portal`: the apps the account has a role on (an operator: all), newest first.
    func appsPage(_ request: Request) async -> Response {
        await signedIn(request) { visitor in
            let query = PortalForm.queryParameters(request)
            guard query != nil else { throw Stop.badRequest }
            let q = try Self.searchText(query)
            let cursor = query?["cursor"].flatMap { $0.isEmpty ? nil : $0 }
            let found = try await services.portal.visibleApps(of: visitor.session, query: q, limit: Self.pageSize, cursor: cursor)
            let apps: [[String: Any]] = found.apps.map { app in
                [
                    "appId": app.appId, "name": app.state.name, "product": app.product.rawValue, "status": app.state.status.rawValue,
                    "created": Self.date(app.createdAt),
                ]
            }
            var values: [String: Any] = ["apps": apps, "q": q ?? "", "isOperator": visitor.session.account.isOperator]
            if let next = found.nextCursor {
                values["nextURL"] = "/portal?" + (q.map { "q=" + PortalForm.encode($0) + "&" } ?? "") + "cursor=" + PortalForm.encode(next)
            }
            var page = makePage(visitor, heading: PortalText.text(.appsTitle), template: "apps", values: values)
            page.appsCurrent = true
            return PortalPages.render(page)
        }
    }

    func newAppPage(_ request: Request) async -> Response {
        await signedIn(request) { visitor in
            guard visitor.session.account.isOperator else { throw Stop.forbidden }
            return newAppForm(visitor, name: "", product: "cosyncAuth")
        }
    }

    func newAppForm(_ visitor: Visitor, name: String, product: String, error: String? = nil, status: HTTPResponse.Status = .ok) -> Response {
        var page = makePage(
            visitor, heading: PortalText.text(.newAppTitle), template: "newApp",
            values: [
                "csrf": csrf.token(bound: visitor.cookie, purpose: "create-app"), "name": name, "cosyncAuth": product != "appKey",
                "appKey": product == "appKey",
            ],
            status: status)
        page.error = error
        return PortalPages.render(page)
    }

    /// `POST /portal/apps/new` (operators): creates the app as the admin API does, then its keys page
    /// shows the app token and secret once.
    func createApp(_ request: Request) async -> Response {
        await signedInPost(request, purpose: "create-app") { visitor, form in
            guard visitor.session.account.isOperator else { throw Stop.forbidden }
            let name = form["name"] ?? "", product = form["product"] ?? "cosyncAuth"
            var input: [String: JSONValue] = [:]
            if form["name"] != nil { input["name"] = .string(name) }
            if form["product"] != nil { input["product"] = .string(product) }
            do {
                let created = try await services.apps.create(input, actor: visitor.actor)
                var fields = ["kind": "created", "appId": created.app.appId, "secret": created.appSecret]
                if let token = created.app.appToken { fields["token"] = token }
                return try showOnce(visitor, fields, on: "/portal/apps/\(created.app.appId)/keys")
            } catch {
                guard let (text, status) = Self.formError(error) else { throw error }
                return newAppForm(visitor, name: name, product: product, error: text, status: status)
            }
        }
    }

    /// To `location`, with `fields` (a new app token or secret) sealed for this session alone, for
    /// `PortalSealer.showOnceLifetime` (see `PortalSealer`).
    func showOnce(_ visitor: Visitor, _ fields: [String: String], on location: String) throws -> Response {
        var bound = fields
        bound["sid"] = visitor.session.id.uuidString.lowercased()
        let lifetime = PortalSealer.showOnceLifetime
        guard let sealed = sealer.seal(bound, lifetime: TimeInterval(lifetime)) else { throw Stop.badRequest }
        return PortalPages.redirect(location, cookies: [cookies.set(cookies.onceName, sealed, maxAge: lifetime)])
    }

    // MARK: one app

    func appPage(
        _ visitor: Visitor, app: App, current: String, heading: PortalText.Key, template: String, values: [String: Any],
        error: String? = nil, notice: String? = nil, status: HTTPResponse.Status = .ok
    ) -> Response {
        var all = values
        all["appId"] = app.appId
        var page = makePage(visitor, heading: PortalText.text(heading), template: template, values: all, status: status)
        page.app = (app.appId, app.name, current)
        page.error = error
        page.notice = notice
        return PortalPages.render(page)
    }

    /// `GET /portal/apps/{appId}`.
    func overview(_ request: Request, appId: String) async -> Response {
        await signedIn(request) { visitor in
            let (app, role) = try await access(visitor, appId: appId)
            let members = try await services.portal.members(appId: app.appId)
            var values: [String: Any] = [
                "product": app.product.rawValue, "status": app.status.rawValue, "created": Self.date(app.createdAt), "role": role.rawValue,
                "signupFlow": app.settings.signupFlow.rawValue, "metadataCount": String(app.settings.metaData.count),
                "membersCount": String(members.count),
            ]
            // The charts, the webhook backlog and the outbox: PortalObservePages.swift.
            values.merge(try await overviewCharts(app: app)) { current, _ in current }
            return appPage(visitor, app: app, current: "overview", heading: .overviewTitle, template: "overview", values: values)
        }
    }

    static func metadataJSON(_ fields: [MetaDataField]) -> String {
        let encoder = JSONCoding.encoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes, .prettyPrinted]
        return (try? encoder.encode(fields)).map { String(decoding: $0, as: UTF8.self) } ?? "[]"
    }

    func settingsForm(
        _ visitor: Visitor, app: App, role: PortalRole, signupFlow: String? = nil, metadata: String? = nil, error: String? = nil,
        notice: String? = nil, status: HTTPResponse.Status = .ok
    ) -> Response {
        let flow = signupFlow ?? app.settings.signupFlow.rawValue
        let labels: [AppSettings.SignupFlow: PortalText.Key] = [.none: .signupFlowNone, .code: .signupFlowCode, .link: .signupFlowLink]
        let flows: [[String: Any]] = [AppSettings.SignupFlow.none, .code, .link].map { value in
            ["value": value.rawValue, "label": PortalText.text(labels[value] ?? .signupFlowNone), "selected": value.rawValue == flow]
        }
        return appPage(
            visitor, app: app, current: "settings", heading: .settingsTitle, template: "settings",
            values: [
                "canEdit": role != .viewer, "csrf": csrf.token(bound: visitor.cookie, purpose: "settings:" + app.appId), "flows": flows,
                "signupFlow": flow, "metadata": metadata ?? Self.metadataJSON(app.settings.metaData),
            ],
            error: error, notice: notice, status: status)
    }

    func settingsPage(_ request: Request, appId: String) async -> Response {
        await signedIn(request) { visitor in
            let (app, role) = try await access(visitor, appId: appId)
            return settingsForm(visitor, app: app, role: role)
        }
    }

    /// `POST /portal/apps/{appId}/settings`: a PATCH of `signupFlow` and `metaData` through the admin
    /// service; its validation messages show in the form.
    func saveSettings(_ request: Request, appId: String) async -> Response {
        await signedInPost(request, purpose: "settings:" + appId) { visitor, form in
            let (app, role) = try await access(visitor, appId: appId)
            guard role != .viewer else { throw Stop.forbidden }
            var patch: [String: JSONValue] = [:]
            if let flow = form["signupFlow"] { patch["signupFlow"] = .string(flow) }
            if let text = form["metadataFields"] {
                let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
                if trimmed.isEmpty {
                    patch["metaData"] = .array([])
                } else if let value = try? JSONDecoder().decode(JSONValue.self, from: Data(trimmed.utf8)) {
                    patch["metaData"] = value
                } else {
                    return settingsForm(
                        visitor, app: app, role: role, signupFlow: form["signupFlow"], metadata: text, error: PortalText.text(.metadataNotJSON),
                        status: .badRequest)
                }
            }
            do {
                _ = try await services.apps.update(appId: app.appId, patch: patch, actor: visitor.actor)
                let (saved, _) = try await access(visitor, appId: appId)
                return settingsForm(visitor, app: saved, role: role, notice: PortalText.text(.settingsSaved))
            } catch {
                guard let (text, status) = Self.formError(error) else { throw error }
                return settingsForm(
                    visitor, app: app, role: role, signupFlow: form["signupFlow"], metadata: form["metadataFields"], error: text, status: status)
            }
        }
    }

    // MARK: keys

    func keysForm(
        _ visitor: Visitor, app: App, role: PortalRole, shown: [String: String]? = nil, grace: String = "0", error: String? = nil,
        status: HTTPResponse.Status = .ok
    ) async throws -> Response {
        let view = try await services.apps.view(app: app)
        var values: [String: Any] = [
            "canEdit": role == .owner, "csrf": csrf.token(bound: visitor.cookie, purpose: "rotate-token:" + app.appId),
            "rawPublicKey": view.rawPublicKey ?? "", "grace": grace,
        ]
        var notice: String?
        if let shown {
            if let token = shown["token"] { values["appToken"] = token }
            if let secret = shown["secret"] { values["appSecret"] = secret }
            if shown["kind"] == "rotated" { notice = PortalText.text(.tokenRotated) }
        }
        return appPage(visitor, app: app, current: "keys", heading: .keysTitle, template: "keys", values: values, error: error, notice: notice, status: status)
    }

    /// `GET /portal/apps/{appId}/keys`: after a creation or a rotation, the new token once (the
    /// hand-over cookie): only to the session that made it, with the owner role (an operator's too),
    /// for this app. Any hand-over cookie this page receives is cleared here, shown or not (an
    /// enrolment's excepted: it belongs to a browser not signed in yet).
    func keysPage(_ request: Request, appId: String) async -> Response {
        await signedIn(request) { visitor in
            let (app, role) = try await access(visitor, appId: appId)
            var shown: [String: String]?
            var clear: [String] = []
            if let raw = PortalCookies.value(request, cookies.onceName) {
                let fields = sealer.open(raw)
                if fields?["kind"] != "enrol" { clear = [cookies.clear(cookies.onceName)] }
                if let fields, fields["kind"] == "created" || fields["kind"] == "rotated", fields["appId"] == app.appId,
                    fields["sid"] == visitor.session.id.uuidString.lowercased(), role == .owner
                {
                    shown = fields
                }
            }
            var response = try await keysForm(visitor, app: app, role: role, shown: shown)
            for cookie in clear { response.headers.append(HTTPField(name: .setCookie, value: cookie)) }
            return response
        }
    }

    /// `POST /portal/apps/{appId}/keys/rotate-token` (owners, operators): needs a fresh sign-in; the grace period is checked
    /// as the admin API checks `gracePeriodSeconds`.
    func rotateToken(_ request: Request, appId: String) async -> Response {
        await signedInPost(request, purpose: "rotate-token:" + appId) { visitor, form in
            let (app, role) = try await access(visitor, appId: appId)
            // The app token gives the whole admin API of the app: owners (and operators) only.
            guard role == .owner else { throw Stop.forbidden }
            guard visitor.isFresh else { throw Stop.reauth(next: "/portal/apps/\(app.appId)/keys") }
            let raw = (form["graceSeconds"] ?? "").trimmingCharacters(in: .whitespaces)
            let grace = raw.isEmpty ? 0 : Int(raw)
            guard let grace, (0...2_592_000).contains(grace) else {
                return try await keysForm(visitor, app: app, role: role, grace: raw, error: PortalText.text(.graceInvalid), status: .badRequest)
            }
            let rotation = try await services.apps.rotateAppToken(app: app, graceSeconds: grace, actor: visitor.actor)
            return try showOnce(visitor, ["kind": "rotated", "appId": app.appId, "token": rotation.appToken], on: "/portal/apps/\(app.appId)/keys")
        }
    }

    // MARK: users

    /// `GET /portal/apps/{appId}/users?q=`: by handle or user name, as the admin API's list.
    func usersPage(_ request: Request, appId: String) async -> Response {
        await signedIn(request) { visitor in
            let (app, _) = try await access(visitor, appId: appId)
            let query = PortalForm.queryParameters(request)
            guard query != nil else { throw Stop.badRequest }
            let q = try Self.searchText(query)
            let cursor = query?["cursor"].flatMap { $0.isEmpty ? nil : $0 }
            let found = try await services.users.list(app: app, query: q, limit: Self.pageSize, cursor: cursor)
            let users: [[String: Any]] = found.users.map { user in
                [
                    "id": user.id.uuidString.lowercased(), "handle": user.handle, "userName": user.userName ?? "", "status": user.status.rawValue,
                    "lastLogin": Self.date(user.lastLogin),
                ]
            }
            var values: [String: Any] = ["users": users, "q": q ?? ""]
            if let next = found.nextCursor {
                values["nextURL"] = "/portal/apps/\(app.appId)/users?" + (q.map { "q=" + PortalForm.encode($0) + "&" } ?? "") + "cursor="
                    + PortalForm.encode(next)
            }
            return appPage(visitor, app: app, current: "users", heading: .usersTitle, template: "users", values: values)
        }
    }

    static func revokePurpose(appId: String, userId: String, sessionId: String) -> String {
        "revoke:\(appId):\(userId.lowercased()):\(sessionId.lowercased())"
    }

    /// `GET /portal/apps/{appId}/users/{userId}`: the user and their sessions.
    func userPage(_ request: Request, appId: String, userId: String) async -> Response {
        await signedIn(request) { visitor in
            let (app, role) = try await access(visitor, appId: appId)
            let user = try await services.users.get(app: app, userId: userId)
            let sessions = try await services.users.sessions(app: app, userId: userId)
            let id = user.id.uuidString.lowercased()
            let rows: [[String: Any]] = sessions.map { session in
                let sessionId = session.id.uuidString.lowercased()
                return [
                    "id": sessionId, "method": session.provenBy.rawValue, "created": Self.date(session.createdAt),
                    "lastSeen": Self.date(session.lastSeenAt), "address": session.clientAddress ?? "",
                    "csrf": csrf.token(bound: visitor.cookie, purpose: Self.revokePurpose(appId: app.appId, userId: id, sessionId: sessionId)),
                ]
            }
            let revoked = PortalForm.queryParameters(request)?["revoked"] == "1"
            var page = makePage(
                visitor, heading: PortalText.text(.userTitle, ["handle": user.handle]), template: "user",
                values: ["appId": app.appId, "userId": id, "status": user.status.rawValue, "sessions": rows, "canEdit": role != .viewer])
            page.app = (app.appId, app.name, "users")
            if revoked { page.notice = PortalText.text(.sessionRevoked) }
            return PortalPages.render(page)
        }
    }

    /// `POST /portal/apps/{appId}/users/{userId}/sessions/{sessionId}/revoke`: ends one session.
    func revokeSession(_ request: Request, appId: String, userId: String, sessionId: String) async -> Response {
        await signedInPost(request, purpose: Self.revokePurpose(appId: appId, userId: userId, sessionId: sessionId)) { visitor, _ in
            let (app, role) = try await access(visitor, appId: appId)
            guard role != .viewer else { throw Stop.forbidden }
            try await services.users.endSession(app: app, userId: userId, sessionId: sessionId, actor: visitor.actor)
            return PortalPages.redirect("/portal/apps/\(app.appId)/users/\(PortalForm.encode(userId.lowercased()))?revoked=1")
        }
    }

    // MARK: members

    func membersForm(
        _ visitor: Visitor, app: App, role: PortalRole, email: String = "", invitedRole: PortalRole = .editor, inviteLink: String? = nil,
        invitedEmail: String? = nil, error: String? = nil, status: HTTPResponse.Status = .ok
    ) async throws -> Response {
        let members = try await services.portal.members(appId: app.appId)
        let labels: [PortalRole: PortalText.Key] = [.owner: .roleOwner, .editor: .roleEditor, .viewer: .roleViewer]
        var values: [String: Any] = [
            "members": members.map { ["email": $0.email, "role": PortalText.text(labels[$0.role] ?? .roleViewer)] as [String: Any] },
            "canInvite": role == .owner, "csrf": csrf.token(bound: visitor.cookie, purpose: "invite:" + app.appId), "email": email,
            "roles": PortalRole.allCases.map { ["value": $0.rawValue, "label": PortalText.text(labels[$0] ?? .roleViewer), "selected": $0 == invitedRole] as [String: Any] },
        ]
        if let inviteLink {
            values["inviteLink"] = inviteLink
            values["inviteSent"] = PortalText.text(.inviteSent, ["email": invitedEmail ?? ""])
        } else if let invitedEmail {
            values["inviteSent"] = PortalText.text(.inviteEmailed, ["email": invitedEmail])
        }
        return appPage(visitor, app: app, current: "members", heading: .membersTitle, template: "members", values: values, error: error, status: status)
    }

    func membersPage(_ request: Request, appId: String) async -> Response {
        await signedIn(request) { visitor in
            let (app, role) = try await access(visitor, appId: appId)
            return try await membersForm(visitor, app: app, role: role)
        }
    }

    /// `POST /portal/apps/{appId}/members` (owners, operators): invites by e-mail; to an operator the
    /// page then shows the invitation link too.
    func invite(_ request: Request, appId: String) async -> Response {
        await signedInPost(request, purpose: "invite:" + appId) { visitor, form in
            let (app, role) = try await access(visitor, appId: appId)
            guard role == .owner else { throw Stop.forbidden }
            let email = (form["email"] ?? "").trimmingCharacters(in: .whitespaces)
            let invitedRole = PortalRole(rawValue: form["role"] ?? "") ?? .viewer
            guard !email.isEmpty else {
                return try await membersForm(visitor, app: app, role: role, invitedRole: invitedRole, error: PortalText.text(.emailRequired), status: .badRequest)
            }
            guard let chosen = PortalRole(rawValue: form["role"] ?? "") else { throw Stop.badRequest }
            do {
                let code = try await services.portal.invite(email: email, isOperator: false, appId: app.appId, role: chosen, by: visitor.session)
                // The link is the invitee's credential: an owner is told the e-mail went out; only an
                // operator sees the link (to pass on when mail does not arrive).
                let link = visitor.session.account.isOperator ? services.portal.inviteLink(code: code) : nil
                return try await membersForm(visitor, app: app, role: role, inviteLink: link, invitedEmail: email)
            } catch {
                guard let (text, status) = Self.formError(error) else { throw error }
                return try await membersForm(visitor, app: app, role: role, email: email, invitedRole: chosen, error: text, status: status)
            }
        }
    }
}
