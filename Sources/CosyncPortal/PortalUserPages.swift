import CosyncAuth
import Foundation
import HTTPTypes
import Hummingbird

/// The users of one app (issue 23, "Users" and "Pending signups and invites"): the search (handle,
/// user name or user id), a user's page (sessions, identities, passkeys) with its actions, and the
/// app's pending signups and end-user invitations.
///
/// | Path | Page / action | Role |
/// |---|---|---|
/// | GET `/portal/apps/{appId}/users?q=&cursor=` | search | any |
/// | GET `/portal/apps/{appId}/users/{userId}` | the user | any (viewers: no forms) |
/// | POST `…/users/{userId}/suspend`, `…/activate` | `services.users.update` (status) | editor |
/// | POST `…/users/{userId}/password` (`newPassword`) | `services.users.setPassword` | editor |
/// | POST `…/users/{userId}/sign-out-everywhere` | `services.users.endAllSessions` | editor |
/// | POST `…/users/{userId}/sessions/{sessionId}/revoke` | `services.users.endSession` | editor |
/// | POST `…/users/{userId}/identities/{identityId}/detach` | `services.users.detachIdentity` (never deletes the account) | editor |
/// | POST `…/users/{userId}/delete` (`confirm=yes`) | `services.users.delete`, after a fresh sign-in | owner |
/// | GET `/portal/apps/{appId}/pending?signupsCursor=&invitesCursor=` | pending signups and invites | any |
/// | POST `…/pending/invite` (`handle`, `locale`, `metaData`) | `services.flows.adminInvite` (a new invite, or the same code again) | editor |
/// | POST `…/pending/{signups|invites}/{id}/cancel` | `services.records.deletePending` | editor |
///
/// Every action is the admin API's, through the same core service, audited as `portal:<email>`; the
/// service's refusals show in `form-error`. Deleting a user is the owners' (and operators') and needs
/// a fresh sign-in, as the destructive actions do.
extension PortalRoutes {
    func registerUserPages(on router: Router<Context>) {
        router.get("portal/apps/:appId/users") { request, context in await usersPage(request, appId: context.parameters.get("appId") ?? "") }
        router.get("portal/apps/:appId/users/:userId") { request, context in
            await userPage(request, appId: context.parameters.get("appId") ?? "", userId: context.parameters.get("userId") ?? "")
        }
        router.post("portal/apps/:appId/users/:userId/sessions/:sessionId/revoke") { request, context in
            await revokeSession(
                request, appId: context.parameters.get("appId") ?? "", userId: context.parameters.get("userId") ?? "",
                sessionId: context.parameters.get("sessionId") ?? "")
        }
        router.post("portal/apps/:appId/users/:userId/suspend") { request, context in await userAction(request, .suspend, context) }
        router.post("portal/apps/:appId/users/:userId/activate") { request, context in await userAction(request, .activate, context) }
        router.post("portal/apps/:appId/users/:userId/password") { request, context in await userAction(request, .setPassword, context) }
        router.post("portal/apps/:appId/users/:userId/sign-out-everywhere") { request, context in
            await userAction(request, .signOutEverywhere, context)
        }
        router.post("portal/apps/:appId/users/:userId/delete") { request, context in await userAction(request, .delete, context) }
        router.post("portal/apps/:appId/users/:userId/identities/:identityId/detach") { request, context in
            await detachIdentity(
                request, appId: context.parameters.get("appId") ?? "", userId: context.parameters.get("userId") ?? "",
                identityId: context.parameters.get("identityId") ?? "")
        }
        router.get("portal/apps/:appId/pending") { request, context in await pendingPage(request, appId: context.parameters.get("appId") ?? "") }
        router.post("portal/apps/:appId/pending/invite") { request, context in
            await inviteEndUser(request, appId: context.parameters.get("appId") ?? "")
        }
        router.post("portal/apps/:appId/pending/:kind/:id/cancel") { request, context in
            await cancelPending(
                request, appId: context.parameters.get("appId") ?? "", kind: context.parameters.get("kind") ?? "",
                id: context.parameters.get("id") ?? "")
        }
    }

    // MARK: search

    /// `GET /portal/apps/{appId}/users?q=`: by handle or user-name prefix, or an exact user id (the
    /// admin API's list), a page at a time.
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
            let notice = query?["deleted"] == "1" ? PortalText.text(.usersDeleted) : nil
            return appPage(visitor, app: app, current: "users", heading: .usersTitle, template: "users.search", values: values, notice: notice)
        }
    }

    // MARK: one user

    enum UserAction: String {
        case suspend, activate, setPassword = "password", signOutEverywhere = "sign-out-everywhere", delete
    }

    static func userPurpose(_ action: String, appId: String, userId: String) -> String {
        "user-\(action):\(appId):\(userId.lowercased())"
    }

    static func revokePurpose(appId: String, userId: String, sessionId: String) -> String {
        "revoke:\(appId):\(userId.lowercased()):\(sessionId.lowercased())"
    }

    static func userPath(appId: String, userId: String) -> String {
        "/portal/apps/\(appId)/users/\(PortalForm.encode(userId.lowercased()))"
    }

    /// What the user page says after an action (`?done=`).
    static var doneNotices: [String: PortalText.Key] {
        [
            "revoked": .sessionRevoked, "suspended": .usersSuspendedNotice, "activated": .usersActivatedNotice, "password": .usersPasswordSet,
            "signed-out": .usersSignedOutEverywhere, "detached": .usersIdentityDetached,
        ]
    }

    /// `GET /portal/apps/{appId}/users/{userId}`: the user, their sessions, identities and passkeys.
    func userPage(_ request: Request, appId: String, userId: String) async -> Response {
        await signedIn(request) { visitor in
            let (app, role) = try await access(visitor, appId: appId)
            let query = PortalForm.queryParameters(request)
            // `revoked=1` is what the first slice's revoke answered with; `done=` names the action.
            let done = query?["done"] ?? (query?["revoked"] == "1" ? "revoked" : nil)
            let notice = done.flatMap { Self.doneNotices[$0] }.map { PortalText.text($0) }
            return try await userView(visitor, app: app, role: role, userId: userId, notice: notice)
        }
    }

    func userView(
        _ visitor: Visitor, app: App, role: PortalRole, userId: String, error: String? = nil, notice: String? = nil,
        status: HTTPResponse.Status = .ok
    ) async throws -> Response {
        let user = try await services.users.get(app: app, userId: userId)
        let sessions = try await services.users.sessions(app: app, userId: userId)
        let identities = try await services.users.identities(app: app, userId: userId)
        let passkeys = try await services.users.passkeys(app: app, userId: userId)
        let id = user.id.uuidString.lowercased()
        let sessionRows: [[String: Any]] = sessions.map { session in
            let sessionId = session.id.uuidString.lowercased()
            return [
                "id": sessionId, "method": session.provenBy.rawValue, "created": Self.date(session.createdAt),
                "lastSeen": Self.date(session.lastSeenAt), "address": session.clientAddress ?? "",
                "csrf": csrf.token(bound: visitor.cookie, purpose: Self.revokePurpose(appId: app.appId, userId: id, sessionId: sessionId)),
            ]
        }
        let identityRows: [[String: Any]] = identities.map { identity in
            let identityId = identity.id.uuidString.lowercased()
            return [
                "id": identityId, "kind": identity.kind.rawValue, "subject": identity.subject, "email": identity.email ?? "",
                "created": Self.date(identity.createdAt), "lastUsed": Self.date(identity.lastUsedAt),
                "label": PortalText.text(.usersDetachLabel, ["kind": identity.kind.rawValue]),
                "csrf": csrf.token(bound: visitor.cookie, purpose: Self.userPurpose("detach-" + identityId, appId: app.appId, userId: id)),
            ]
        }
        let yes = PortalText.text(.usersYes), no = PortalText.text(.usersNo)
        let passkeyRows: [[String: Any]] = passkeys.map { passkey in
            [
                "name": passkey.name, "platform": passkey.platform, "created": Self.date(passkey.createdAt), "lastUsed": Self.date(passkey.lastUsedAt),
                "backedUp": passkey.backupState ? yes : no, "cloneSuspected": passkey.cloneSuspected ? yes : no,
            ]
        }
        let token = { (action: UserAction) in csrf.token(bound: visitor.cookie, purpose: Self.userPurpose(action.rawValue, appId: app.appId, userId: id)) }
        let values: [String: Any] = [
            "userId": id, "handle": user.handle, "userName": user.userName ?? "", "status": user.status.rawValue, "locale": user.locale,
            "created": Self.date(user.createdAt), "lastLogin": Self.date(user.lastLogin),
            "sessions": sessionRows, "identities": identityRows, "passkeys": passkeyRows,
            "showPasskeys": app.product == .appKey || !passkeys.isEmpty,
            "canEdit": role != .viewer, "canDelete": role == .owner, "isActive": user.status == .active,
            "suspendCSRF": token(.suspend), "activateCSRF": token(.activate), "passwordCSRF": token(.setPassword),
            "signOutCSRF": token(.signOutEverywhere), "deleteCSRF": token(.delete),
        ]
        var page = makePage(visitor, heading: PortalText.text(.userTitle, ["handle": user.handle]), template: "users.user", values: values, status: status)
        page.values["appId"] = app.appId
        page.app = (app.appId, app.name, "users")
        page.error = error
        page.notice = notice
        return PortalPages.render(page)
    }

    func userAction(_ request: Request, _ action: UserAction, _ context: Context) async -> Response {
        await userAction(request, action, appId: context.parameters.get("appId") ?? "", userId: context.parameters.get("userId") ?? "")
    }

    /// `POST /portal/apps/{appId}/users/{userId}/{suspend|activate|password|sign-out-everywhere|delete}`.
    func userAction(_ request: Request, _ action: UserAction, appId: String, userId: String) async -> Response {
        await signedInPost(request, purpose: Self.userPurpose(action.rawValue, appId: appId, userId: userId)) { visitor, form in
            let (app, role) = try await access(visitor, appId: appId)
            guard role != .viewer else { throw Stop.forbidden }
            let userPath = Self.userPath(appId: app.appId, userId: userId)
            do {
                switch action {
                case .suspend, .activate:
                    let status = action == .suspend ? UserStatus.suspended : .active
                    _ = try await services.users.update(app: app, userId: userId, patch: ["status": .string(status.rawValue)], actor: visitor.actor)
                    return PortalPages.redirect(userPath + (action == .suspend ? "?done=suspended" : "?done=activated"))
                case .setPassword:
                    guard let password = form["newPassword"], !password.isEmpty else {
                        return try await userView(
                            visitor, app: app, role: role, userId: userId, error: PortalText.text(.usersPasswordRequired), status: .badRequest)
                    }
                    try await services.users.setPassword(app: app, userId: userId, input: ["password": .string(password)], actor: visitor.actor)
                    return PortalPages.redirect(userPath + "?done=password")
                case .signOutEverywhere:
                    _ = try await services.users.endAllSessions(app: app, userId: userId, actor: visitor.actor)
                    return PortalPages.redirect(userPath + "?done=signed-out")
                case .delete:
                    // Deleting is the owners' (and operators'), after a fresh sign-in.
                    guard role == .owner else { throw Stop.forbidden }
                    guard visitor.isFresh else { throw Stop.reauth(next: userPath) }
                    guard form["confirm"] == "yes" else {
                        return try await userView(
                            visitor, app: app, role: role, userId: userId, error: PortalText.text(.usersDeleteConfirmRequired), status: .badRequest)
                    }
                    try await services.users.delete(app: app, userId: userId, actor: visitor.actor)
                    return PortalPages.redirect("/portal/apps/\(app.appId)/users?deleted=1")
                }
            } catch {
                guard let (text, status) = Self.formError(error) else { throw error }
                return try await userView(visitor, app: app, role: role, userId: userId, error: text, status: status)
            }
        }
    }

    /// `POST /portal/apps/{appId}/users/{userId}/sessions/{sessionId}/revoke`: ends one session.
    func revokeSession(_ request: Request, appId: String, userId: String, sessionId: String) async -> Response {
        await signedInPost(request, purpose: Self.revokePurpose(appId: appId, userId: userId, sessionId: sessionId)) { visitor, _ in
            let (app, role) = try await access(visitor, appId: appId)
            guard role != .viewer else { throw Stop.forbidden }
            try await services.users.endSession(app: app, userId: userId, sessionId: sessionId, actor: visitor.actor)
            return PortalPages.redirect(Self.userPath(appId: app.appId, userId: userId) + "?done=revoked")
        }
    }

    /// `POST /portal/apps/{appId}/users/{userId}/identities/{identityId}/detach`: the admin API's detach
    /// without `deleteAccount` (the last way to sign in is refused with the service's message).
    func detachIdentity(_ request: Request, appId: String, userId: String, identityId: String) async -> Response {
        let purpose = Self.userPurpose("detach-" + identityId.lowercased(), appId: appId, userId: userId)
        return await signedInPost(request, purpose: purpose) { visitor, _ in
            let (app, role) = try await access(visitor, appId: appId)
            guard role != .viewer else { throw Stop.forbidden }
            do {
                _ = try await services.users.detachIdentity(app: app, userId: userId, identityId: identityId, deleteAccount: false, actor: visitor.actor)
                return PortalPages.redirect(Self.userPath(appId: app.appId, userId: userId) + "?done=detached")
            } catch {
                guard let (text, status) = Self.formError(error) else { throw error }
                return try await userView(visitor, app: app, role: role, userId: userId, error: text, status: status)
            }
        }
    }

    // MARK: pending signups and invites

    static func cancelPurpose(kind: String, appId: String, id: String) -> String { "pending-cancel:\(kind):\(appId):\(id.lowercased())" }

    func pendingPage(_ request: Request, appId: String) async -> Response {
        await signedIn(request) { visitor in
            let (app, role) = try await access(visitor, appId: appId)
            let query = PortalForm.queryParameters(request)
            guard let query else { throw Stop.badRequest }
            let notice: String? =
                switch query["done"] {
                case "cancelled": PortalText.text(.pendingCancelled)
                case "invited": PortalText.text(.pendingInvited, ["handle": query["handle"] ?? ""])
                default: nil
                }
            return try await pendingView(
                visitor, app: app, role: role, signupsCursor: query["signupsCursor"], invitesCursor: query["invitesCursor"], notice: notice)
        }
    }

    func pendingView(
        _ visitor: Visitor, app: App, role: PortalRole, signupsCursor: String? = nil, invitesCursor: String? = nil, handle: String = "",
        locale: String? = nil, metaData: String = "", error: String? = nil, notice: String? = nil, status: HTTPResponse.Status = .ok
    ) async throws -> Response {
        let signupsCursor = signupsCursor.flatMap { $0.isEmpty ? nil : $0 }, invitesCursor = invitesCursor.flatMap { $0.isEmpty ? nil : $0 }
        let signups = try await services.records.pending(.signups, app: app, limit: Self.pageSize, cursor: signupsCursor)
        let invites = try await services.records.pending(.invites, app: app, limit: Self.pageSize, cursor: invitesCursor)
        let inviteCSRF = csrf.token(bound: visitor.cookie, purpose: "pending-invite:" + app.appId)
        func rows(_ kind: AppRecordStore.Kind, _ items: [AppRecordStore.PendingRecord]) -> [[String: Any]] {
            items.map { item in
                let id = item.id.uuidString.lowercased()
                var row: [String: Any] = [
                    "id": id, "kind": kind.rawValue, "handle": item.handle, "status": item.status, "locale": item.locale,
                    "sender": item.senderHandle ?? "", "created": Self.date(item.createdAt), "expires": Self.date(item.expiresAt),
                    "cancelLabel": PortalText.text(.pendingCancelLabel, ["handle": item.handle]),
                    "csrf": csrf.token(bound: visitor.cookie, purpose: Self.cancelPurpose(kind: kind.rawValue, appId: app.appId, id: id)),
                ]
                // An invite the admin API sent (sender superuser) is sent again by inviting the same handle.
                if kind == .invites, item.senderHandle == "superuser", item.status == "pending" {
                    let metaData = (try? JSONCoding.encoder().encode(item.metaData)).map { String(decoding: $0, as: UTF8.self) } ?? ""
                    row["resend"] = [
                        "csrf": inviteCSRF, "label": PortalText.text(.pendingResendLabel, ["handle": item.handle]),
                        "metaData": metaData == "{}" ? "" : metaData,
                    ]
                }
                return row
            }
        }
        func link(signups: String?, invites: String?) -> String {
            var parts: [String] = []
            if let signups { parts.append("signupsCursor=" + PortalForm.encode(signups)) }
            if let invites { parts.append("invitesCursor=" + PortalForm.encode(invites)) }
            return "/portal/apps/\(app.appId)/pending?" + parts.joined(separator: "&")
        }
        let chosen = locale ?? app.settings.locales.first ?? Locales.defaultLocale
        var values: [String: Any] = [
            "signups": rows(.signups, signups.items), "invites": rows(.invites, invites.items), "canEdit": role != .viewer,
            "inviteCSRF": inviteCSRF, "handle": handle, "metaData": metaData, "hasInviteFields": !app.settings.metaDataInvite.isEmpty,
            "locales": app.settings.locales.map { ["value": $0, "selected": $0 == chosen] as [String: Any] },
        ]
        if let next = signups.nextCursor { values["signupsNext"] = link(signups: next, invites: invitesCursor) }
        if let next = invites.nextCursor { values["invitesNext"] = link(signups: signupsCursor, invites: next) }
        return appPage(
            visitor, app: app, current: "pending", heading: .pendingTitle, template: "users.pending", values: values, error: error, notice: notice,
            status: status)
    }

    /// `POST /portal/apps/{appId}/pending/invite`: the admin API's invite (`handle`, `locale`, `metaData`).
    func inviteEndUser(_ request: Request, appId: String) async -> Response {
        await signedInPost(request, purpose: "pending-invite:" + appId) { visitor, form in
            let (app, role) = try await access(visitor, appId: appId)
            guard role != .viewer else { throw Stop.forbidden }
            let handle = (form["handle"] ?? "").trimmingCharacters(in: .whitespaces)
            let metaText = (form["metaData"] ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
            func refuse(_ text: String, _ status: HTTPResponse.Status) async throws -> Response {
                try await pendingView(
                    visitor, app: app, role: role, handle: handle, locale: form["locale"], metaData: form["metaData"] ?? "", error: text, status: status)
            }
            var input: [String: JSONValue] = ["handle": .string(handle)]
            if let locale = form["locale"], !locale.isEmpty { input["locale"] = .string(locale) }
            if !metaText.isEmpty {
                guard let value = try? JSONDecoder().decode(JSONValue.self, from: Data(metaText.utf8)) else {
                    return try await refuse(PortalText.text(.pendingMetaDataNotJSON), .badRequest)
                }
                input["metaData"] = value
            }
            do {
                let invited = try await services.flows.adminInvite(app: app, input: input, actor: visitor.actor)
                return PortalPages.redirect("/portal/apps/\(app.appId)/pending?done=invited&handle=" + PortalForm.encode(invited))
            } catch EndUserError.rateLimited {
                return try await refuse(PortalText.text(.pendingRateLimited), .tooManyRequests)
            } catch {
                guard let (text, status) = Self.formError(error) else { throw error }
                return try await refuse(text, status)
            }
        }
    }

    /// `POST /portal/apps/{appId}/pending/{signups|invites}/{id}/cancel`: deletes the pending record.
    func cancelPending(_ request: Request, appId: String, kind: String, id: String) async -> Response {
        await signedInPost(request, purpose: Self.cancelPurpose(kind: kind, appId: appId, id: id)) { visitor, _ in
            guard let which = AppRecordStore.Kind(rawValue: kind) else { throw Stop.notFound }
            let (app, role) = try await access(visitor, appId: appId)
            guard role != .viewer else { throw Stop.forbidden }
            try await services.records.deletePending(which, app: app, id: id, actor: visitor.actor)
            return PortalPages.redirect("/portal/apps/\(app.appId)/pending?done=cancelled")
        }
    }
}

/// The users slice's templates (names prefixed `users.`).
extension PortalPages {
    static let userTemplates: [String: String] = [
        "users.search": """
            <form method="get" action="/portal/apps/{{appId}}/users" role="search" class="search">
            <label for="q">{{t.userSearchLabel}}</label>
            <input id="q" name="q" type="search" value="{{q}}" maxlength="200">
            <button type="submit">{{t.searchButton}}</button>
            </form>
            <p><a id="pending-link" href="/portal/apps/{{appId}}/pending">{{t.usersPendingLink}}</a></p>
            <table id="users">
            <caption>{{t.usersCaption}}</caption>
            <thead><tr><th scope="col">{{t.handleColumn}}</th><th scope="col">{{t.userNameColumn}}</th><th scope="col">{{t.userStatusColumn}}</th><th scope="col">{{t.lastLoginColumn}}</th></tr></thead>
            <tbody>
            {{#users}}<tr><td><a class="user-link" href="/portal/apps/{{appId}}/users/{{id}}">{{handle}}</a></td><td>{{userName}}</td><td>{{status}}</td><td>{{lastLogin}}</td></tr>
            {{/users}}
            </tbody>
            </table>
            {{^users}}<p>{{t.noUsers}}</p>{{/users}}
            {{#nextURL}}<p><a id="next-page" href="{{nextURL}}">{{t.nextPage}}</a></p>{{/nextURL}}
            """,
        "users.user": """
            <dl class="facts">
            <div><dt>{{t.userIdLabel}}</dt><dd><code id="user-id">{{userId}}</code></dd></div>
            <div><dt>{{t.handleColumn}}</dt><dd id="user-handle">{{handle}}</dd></div>
            <div><dt>{{t.userNameColumn}}</dt><dd>{{userName}}</dd></div>
            <div><dt>{{t.userStatusLabel}}</dt><dd id="user-status">{{status}}</dd></div>
            <div><dt>{{t.usersLocaleLabel}}</dt><dd>{{locale}}</dd></div>
            <div><dt>{{t.createdLabel}}</dt><dd>{{created}}</dd></div>
            <div><dt>{{t.lastLoginColumn}}</dt><dd>{{lastLogin}}</dd></div>
            </dl>
            {{#canEdit}}
            <section class="card wide" aria-labelledby="user-actions-heading">
            <h2 id="user-actions-heading">{{t.usersActionsHeading}}</h2>
            {{#isActive}}
            <form id="user-suspend" method="post" action="/portal/apps/{{appId}}/users/{{userId}}/suspend" class="action">
            <input type="hidden" name="csrf" value="{{suspendCSRF}}">
            <p id="suspend-help" class="help">{{t.usersSuspendHelp}}</p>
            <button type="submit" class="secondary" aria-describedby="suspend-help">{{t.usersSuspendButton}}</button>
            </form>
            {{/isActive}}
            {{^isActive}}
            <form id="user-activate" method="post" action="/portal/apps/{{appId}}/users/{{userId}}/activate" class="action">
            <input type="hidden" name="csrf" value="{{activateCSRF}}">
            <p id="activate-help" class="help">{{t.usersActivateHelp}}</p>
            <button type="submit" class="secondary" aria-describedby="activate-help">{{t.usersActivateButton}}</button>
            </form>
            {{/isActive}}
            <form id="user-sign-out-everywhere" method="post" action="/portal/apps/{{appId}}/users/{{userId}}/sign-out-everywhere" class="action">
            <input type="hidden" name="csrf" value="{{signOutCSRF}}">
            <p id="sign-out-everywhere-help" class="help">{{t.usersSignOutEverywhereHelp}}</p>
            <button type="submit" class="secondary" aria-describedby="sign-out-everywhere-help">{{t.usersSignOutEverywhereButton}}</button>
            </form>
            <form id="user-set-password" method="post" action="/portal/apps/{{appId}}/users/{{userId}}/password" class="action">
            <input type="hidden" name="csrf" value="{{passwordCSRF}}">
            <div class="field">
            <label for="newPassword">{{t.usersNewPasswordLabel}}</label>
            <input id="newPassword" name="newPassword" type="password" autocomplete="new-password" required maxlength="1024" aria-describedby="new-password-help{{#error}} form-error{{/error}}">
            <p id="new-password-help" class="help">{{t.usersNewPasswordHelp}}</p>
            </div>
            <button type="submit">{{t.usersSetPasswordButton}}</button>
            </form>
            </section>
            {{/canEdit}}
            <h2 id="sessions-heading">{{t.sessionsHeading}}</h2>
            <table id="sessions">
            <caption>{{t.sessionsCaption}}</caption>
            <thead><tr><th scope="col">{{t.sessionMethodColumn}}</th><th scope="col">{{t.sessionCreatedColumn}}</th><th scope="col">{{t.sessionLastSeenColumn}}</th><th scope="col">{{t.sessionAddressColumn}}</th>{{#canEdit}}<th scope="col">{{t.sessionActionColumn}}</th>{{/canEdit}}</tr></thead>
            <tbody>
            {{#sessions}}<tr id="session-{{id}}"><td>{{method}}</td><td>{{created}}</td><td>{{lastSeen}}</td><td>{{address}}</td>{{#canEdit}}<td><form class="revoke-session" method="post" action="/portal/apps/{{appId}}/users/{{userId}}/sessions/{{id}}/revoke"><input type="hidden" name="csrf" value="{{csrf}}"><button type="submit" class="secondary">{{t.revokeButton}}</button></form></td>{{/canEdit}}</tr>
            {{/sessions}}
            </tbody>
            </table>
            {{^sessions}}<p>{{t.noSessions}}</p>{{/sessions}}
            <h2 id="identities-heading">{{t.usersIdentitiesHeading}}</h2>
            <table id="identities">
            <caption>{{t.usersIdentitiesCaption}}</caption>
            <thead><tr><th scope="col">{{t.usersIdentityKindColumn}}</th><th scope="col">{{t.usersIdentitySubjectColumn}}</th><th scope="col">{{t.usersIdentityEmailColumn}}</th><th scope="col">{{t.usersIdentityCreatedColumn}}</th><th scope="col">{{t.usersIdentityLastUsedColumn}}</th>{{#canEdit}}<th scope="col">{{t.sessionActionColumn}}</th>{{/canEdit}}</tr></thead>
            <tbody>
            {{#identities}}<tr id="identity-{{id}}"><td>{{kind}}</td><td><code class="wrap">{{subject}}</code></td><td>{{email}}</td><td>{{created}}</td><td>{{lastUsed}}</td>{{#canEdit}}<td><form class="detach-identity" method="post" action="/portal/apps/{{appId}}/users/{{userId}}/identities/{{id}}/detach"><input type="hidden" name="csrf" value="{{csrf}}"><button type="submit" class="secondary" aria-label="{{label}}">{{t.usersDetachButton}}</button></form></td>{{/canEdit}}</tr>
            {{/identities}}
            </tbody>
            </table>
            {{^identities}}<p>{{t.usersNoIdentities}}</p>{{/identities}}
            {{#showPasskeys}}
            <h2 id="passkeys-heading">{{t.usersPasskeysHeading}}</h2>
            <table id="passkeys">
            <caption>{{t.usersPasskeysCaption}}</caption>
            <thead><tr><th scope="col">{{t.usersPasskeyNameColumn}}</th><th scope="col">{{t.usersPasskeyPlatformColumn}}</th><th scope="col">{{t.usersIdentityCreatedColumn}}</th><th scope="col">{{t.usersIdentityLastUsedColumn}}</th><th scope="col">{{t.usersPasskeyBackedUpColumn}}</th><th scope="col">{{t.usersPasskeyCloneColumn}}</th></tr></thead>
            <tbody>
            {{#passkeys}}<tr><td>{{name}}</td><td>{{platform}}</td><td>{{created}}</td><td>{{lastUsed}}</td><td>{{backedUp}}</td><td>{{cloneSuspected}}</td></tr>
            {{/passkeys}}
            </tbody>
            </table>
            {{^passkeys}}<p>{{t.usersNoPasskeys}}</p>{{/passkeys}}
            {{/showPasskeys}}
            {{#canDelete}}
            <section class="card wide danger-zone" aria-labelledby="delete-heading">
            <h2 id="delete-heading">{{t.usersDeleteHeading}}</h2>
            <form id="user-delete" method="post" action="/portal/apps/{{appId}}/users/{{userId}}/delete">
            <input type="hidden" name="csrf" value="{{deleteCSRF}}">
            <p id="delete-help" class="help">{{t.usersDeleteHelp}}</p>
            <div class="field check">
            <input id="user-delete-confirm" name="confirm" type="checkbox" value="yes" required aria-describedby="delete-help">
            <label for="user-delete-confirm">{{t.usersDeleteConfirmLabel}}</label>
            </div>
            <button type="submit" class="danger">{{t.usersDeleteButton}}</button>
            </form>
            </section>
            {{/canDelete}}
            """,
        "users.pending": """
            <p>{{t.pendingHelp}}</p>
            {{#canEdit}}
            <section class="card wide" aria-labelledby="invite-user-heading">
            <h2 id="invite-user-heading">{{t.pendingInviteHeading}}</h2>
            <form id="invite-user" method="post" action="/portal/apps/{{appId}}/pending/invite">
            <input type="hidden" name="csrf" value="{{inviteCSRF}}">
            <div class="field">
            <label for="inviteHandle">{{t.pendingInviteHandleLabel}}</label>
            <input id="inviteHandle" name="handle" type="email" autocomplete="off" required maxlength="254" value="{{handle}}"{{#error}} aria-describedby="form-error" aria-invalid="true"{{/error}}>
            </div>
            <div class="field">
            <label for="inviteLocale">{{t.pendingInviteLocaleLabel}}</label>
            <select id="inviteLocale" name="locale">
            {{#locales}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{value}}</option>
            {{/locales}}
            </select>
            </div>
            {{#hasInviteFields}}
            <div class="field">
            <label for="inviteMetaData">{{t.pendingInviteMetaDataLabel}}</label>
            <textarea id="inviteMetaData" name="metaData" rows="4" spellcheck="false" aria-describedby="invite-metadata-help">{{metaData}}</textarea>
            <p id="invite-metadata-help" class="help">{{t.pendingInviteMetaDataHelp}}</p>
            </div>
            {{/hasInviteFields}}
            <button id="invite-user-submit" type="submit">{{t.pendingInviteButton}}</button>
            </form>
            </section>
            {{/canEdit}}
            <h2 id="signups-heading">{{t.pendingSignupsHeading}}</h2>
            <table id="signups">
            <caption>{{t.pendingSignupsCaption}}</caption>
            <thead><tr><th scope="col">{{t.handleColumn}}</th><th scope="col">{{t.pendingStatusColumn}}</th><th scope="col">{{t.pendingLocaleColumn}}</th><th scope="col">{{t.pendingCreatedColumn}}</th><th scope="col">{{t.pendingExpiresColumn}}</th>{{#canEdit}}<th scope="col">{{t.sessionActionColumn}}</th>{{/canEdit}}</tr></thead>
            <tbody>
            {{#signups}}<tr id="signup-{{id}}"><td>{{handle}}</td><td>{{status}}</td><td>{{locale}}</td><td>{{created}}</td><td>{{expires}}</td>{{#canEdit}}<td><form class="cancel-signup" method="post" action="/portal/apps/{{appId}}/pending/signups/{{id}}/cancel"><input type="hidden" name="csrf" value="{{csrf}}"><button type="submit" class="secondary" aria-label="{{cancelLabel}}">{{t.pendingCancelButton}}</button></form></td>{{/canEdit}}</tr>
            {{/signups}}
            </tbody>
            </table>
            {{^signups}}<p>{{t.pendingNoSignups}}</p>{{/signups}}
            {{#signupsNext}}<p><a id="signups-next" href="{{signupsNext}}">{{t.pendingMoreSignups}}</a></p>{{/signupsNext}}
            <h2 id="invites-heading">{{t.pendingInvitesHeading}}</h2>
            <table id="invites">
            <caption>{{t.pendingInvitesCaption}}</caption>
            <thead><tr><th scope="col">{{t.handleColumn}}</th><th scope="col">{{t.pendingSenderColumn}}</th><th scope="col">{{t.pendingStatusColumn}}</th><th scope="col">{{t.pendingLocaleColumn}}</th><th scope="col">{{t.pendingCreatedColumn}}</th><th scope="col">{{t.pendingExpiresColumn}}</th>{{#canEdit}}<th scope="col">{{t.sessionActionColumn}}</th>{{/canEdit}}</tr></thead>
            <tbody>
            {{#invites}}<tr id="invite-{{id}}"><td>{{handle}}</td><td>{{sender}}</td><td>{{status}}</td><td>{{locale}}</td><td>{{created}}</td><td>{{expires}}</td>{{#canEdit}}<td class="row-actions">{{#resend}}<form class="resend-invite" method="post" action="/portal/apps/{{appId}}/pending/invite"><input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="handle" value="{{handle}}"><input type="hidden" name="locale" value="{{locale}}"><input type="hidden" name="metaData" value="{{metaData}}"><button type="submit" class="secondary" aria-label="{{label}}">{{t.pendingResendButton}}</button></form>{{/resend}}<form class="cancel-invite" method="post" action="/portal/apps/{{appId}}/pending/invites/{{id}}/cancel"><input type="hidden" name="csrf" value="{{csrf}}"><button type="submit" class="secondary" aria-label="{{cancelLabel}}">{{t.pendingCancelButton}}</button></form></td>{{/canEdit}}</tr>
            {{/invites}}
            </tbody>
            </table>
            {{^invites}}<p>{{t.pendingNoInvites}}</p>{{/invites}}
            {{#invitesNext}}<p><a id="invites-next" href="{{invitesNext}}">{{t.pendingMoreInvites}}</a></p>{{/invitesNext}}
            """,
    ]
}
