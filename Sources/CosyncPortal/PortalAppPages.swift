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

    // The settings, keys, lifecycle and e-mail template pages: PortalSettingsPages.swift.

    // Users, a user, pending signups and invites: PortalUserPages.swift.

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
