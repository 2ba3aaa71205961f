import CosyncAuth
import Foundation
import HTTPTypes
import Hummingbird

/// The operator views (issue 23): every tenant with its size and recent activity, and the Portal
/// accounts with their roles. Operators only: a developer gets the Portal's 404 (the pages are not
/// confirmed to exist), for the pages and their forms alike.
///
/// | Path | Page / action |
/// |---|---|
/// | GET `/portal/tenants?q=&cursor=` | every app, newest first (keyset pages as the apps list), with users, live sessions, last sign-in, events of 7 days |
/// | GET `/portal/accounts?q=&after=` | Portal accounts by e-mail, with their roles per app |
/// | POST `/portal/accounts/{accountId}/suspend`, `…/activate` | suspend (its sessions end at once) or activate an account |
/// | POST `/portal/accounts/{accountId}/roles/{appId}/remove` | remove a role |
/// | POST `/portal/accounts/invite` | invite an operator (`email`) |
extension PortalRoutes {
    func registerOperator(on router: Router<Context>) {
        router.get("portal/tenants") { request, _ in await tenantsPage(request) }
        router.get("portal/accounts") { request, _ in await accountsPage(request) }
        router.post("portal/accounts/invite") { request, _ in await inviteOperator(request) }
        router.post("portal/accounts/:accountId/suspend") { request, context in
            await setAccountStatus(request, accountId: context.parameters.get("accountId") ?? "", active: false)
        }
        router.post("portal/accounts/:accountId/activate") { request, context in
            await setAccountStatus(request, accountId: context.parameters.get("accountId") ?? "", active: true)
        }
        router.post("portal/accounts/:accountId/roles/:appId/remove") { request, context in
            await removeRole(
                request, accountId: context.parameters.get("accountId") ?? "", appId: context.parameters.get("appId") ?? "")
        }
    }

    /// Operators only; anyone else is told there is nothing here.
    func requireOperator(_ visitor: Visitor) throws {
        guard visitor.session.account.isOperator else { throw Stop.notFound }
    }

    // MARK: tenants

    /// `GET /portal/tenants`.
    func tenantsPage(_ request: Request) async -> Response {
        await signedIn(request) { visitor in
            try requireOperator(visitor)
            guard let query = PortalForm.queryParameters(request) else { throw Stop.badRequest }
            let q = try Self.searchText(query)
            let cursor = query["cursor"].flatMap { $0.isEmpty ? nil : $0 }
            let found = try await services.portal.tenants(of: visitor.session, query: q, limit: Self.pageSize, cursor: cursor)
            let rows: [[String: Any]] = found.tenants.map { tenant in
                [
                    "appId": tenant.app.appId, "name": tenant.app.state.name, "status": tenant.app.state.status.rawValue,
                    "users": tenant.stats.map { String($0.users) } ?? "", "sessions": tenant.stats.map { String($0.sessions) } ?? "",
                    "lastLogin": Self.date(tenant.stats?.lastLogin), "events": tenant.stats.map { String($0.events7d) } ?? "",
                    "created": Self.date(tenant.app.createdAt),
                ]
            }
            var values: [String: Any] = ["tenants": rows, "q": q ?? ""]
            if let next = found.nextCursor {
                values["nextURL"] =
                    "/portal/tenants?" + (q.map { "q=" + PortalForm.encode($0) + "&" } ?? "") + "cursor=" + PortalForm.encode(next)
            }
            var page = makePage(visitor, heading: PortalText.text(.tenantsTitle), template: "operator.tenants", values: values)
            page.operatorCurrent = "tenants"
            return PortalPages.render(page)
        }
    }

    // MARK: accounts

    /// `GET /portal/accounts`.
    func accountsPage(_ request: Request) async -> Response {
        await signedIn(request) { visitor in
            try requireOperator(visitor)
            guard let query = PortalForm.queryParameters(request) else { throw Stop.badRequest }
            return try await accountsForm(visitor, query: query)
        }
    }

    func accountsForm(
        _ visitor: Visitor, query: [String: String] = [:], notice: String? = nil, inviteLink: String? = nil, email: String = "",
        error: String? = nil, status: HTTPResponse.Status = .ok
    ) async throws -> Response {
        let q = try Self.searchText(query)
        let after = query["after"].flatMap { $0.isEmpty ? nil : $0 }
        let found = try await services.portal.accounts(of: visitor.session, query: q, limit: Self.pageSize, after: after)
        let rows: [[String: Any]] = found.accounts.map { entry in
            let id = entry.account.id.uuidString.lowercased()
            let active = entry.account.status == "active"
            return [
                "id": id, "email": entry.account.email,
                "kind": PortalText.text(entry.account.isOperator ? .operatorKind : .developerKind),
                "enrolled": entry.account.totpEnabled, "status": entry.account.status, "active": active,
                "self": entry.account.id == visitor.session.account.id,
                "hasRoles": !entry.roles.isEmpty,
                "statusCSRF": csrf.token(bound: visitor.cookie, purpose: "account-status:" + id),
                "roles": entry.roles.map { role -> [String: Any] in
                    [
                        "accountId": id, "appId": role.appId, "appName": role.appName, "role": role.role.rawValue,
                        "csrf": csrf.token(bound: visitor.cookie, purpose: "remove-role:\(id):\(role.appId)"),
                    ]
                },
            ]
        }
        var values: [String: Any] = [
            "accounts": rows, "q": q ?? "", "inviteCSRF": csrf.token(bound: visitor.cookie, purpose: "invite-operator"), "email": email,
        ]
        if let next = found.next {
            values["nextURL"] = "/portal/accounts?" + (q.map { "q=" + PortalForm.encode($0) + "&" } ?? "") + "after=" + PortalForm.encode(next)
        }
        if let inviteLink { values["inviteLink"] = inviteLink }
        var page = makePage(visitor, heading: PortalText.text(.accountsTitle), template: "operator.accounts", values: values, status: status)
        page.operatorCurrent = "accounts"
        page.notice = notice
        page.error = error
        return PortalPages.render(page)
    }

    /// `POST /portal/accounts/{accountId}/suspend|activate`.
    func setAccountStatus(_ request: Request, accountId: String, active: Bool) async -> Response {
        await signedInPost(request, purpose: "account-status:" + accountId.lowercased()) { visitor, _ in
            try requireOperator(visitor)
            guard let id = UUID(uuidString: accountId) else { throw Stop.notFound }
            let email: String
            do {
                email = try await services.portal.setStatus(accountId: id, active: active, by: visitor.session)
            } catch {
                guard let (text, status) = Self.formError(error) else { throw error }
                return try await accountsForm(visitor, error: text, status: status)
            }
            return try await accountsForm(visitor, notice: PortalText.text(active ? .accountActivated : .accountSuspended, ["email": email]))
        }
    }

    /// `POST /portal/accounts/{accountId}/roles/{appId}/remove`.
    func removeRole(_ request: Request, accountId: String, appId: String) async -> Response {
        await signedInPost(request, purpose: "remove-role:\(accountId.lowercased()):\(appId)") { visitor, _ in
            try requireOperator(visitor)
            guard let id = UUID(uuidString: accountId), AppAdministration.isAppId(appId) else { throw Stop.notFound }
            try await services.portal.removeRole(accountId: id, appId: appId, by: visitor.session)
            return try await accountsForm(visitor, notice: PortalText.text(.roleRemoved))
        }
    }

    /// `POST /portal/accounts/invite`: an operator invites another operator (the core's invite, as
    /// for app members); the link is shown once, as on the members page.
    func inviteOperator(_ request: Request) async -> Response {
        await signedInPost(request, purpose: "invite-operator") { visitor, form in
            try requireOperator(visitor)
            let email = (form["email"] ?? "").trimmingCharacters(in: .whitespaces)
            guard !email.isEmpty else {
                return try await accountsForm(visitor, error: PortalText.text(.emailRequired), status: .badRequest)
            }
            do {
                let code = try await services.portal.invite(email: email, isOperator: true, appId: nil, role: nil, by: visitor.session)
                return try await accountsForm(
                    visitor, notice: PortalText.text(.operatorInvited, ["email": email]), inviteLink: services.portal.inviteLink(code: code))
            } catch {
                guard let (text, status) = Self.formError(error) else { throw error }
                return try await accountsForm(visitor, email: email, error: text, status: status)
            }
        }
    }

}

extension PortalPages {
    static let operatorTemplates: [String: String] = [
        "operator.tenants": """
            <form method="get" action="/portal/tenants" role="search" class="search">
            <label for="q">{{t.tenantSearchLabel}}</label>
            <input id="q" name="q" type="search" value="{{q}}" maxlength="200">
            <button type="submit">{{t.searchButton}}</button>
            </form>
            <p><a id="import-app" class="button" href="/portal/import">{{t.importAppLink}}</a></p>
            <table id="tenants">
            <caption>{{t.tenantsCaption}}</caption>
            <thead><tr><th scope="col">{{t.appNameColumn}}</th><th scope="col">{{t.appIdColumn}}</th><th scope="col">{{t.statusColumn}}</th><th scope="col" class="num">{{t.tenantUsersColumn}}</th><th scope="col" class="num">{{t.tenantSessionsColumn}}</th><th scope="col">{{t.tenantLastSignInColumn}}</th><th scope="col" class="num">{{t.tenantEventsColumn}}</th><th scope="col">{{t.createdColumn}}</th></tr></thead>
            <tbody>
            {{#tenants}}<tr><td><a class="tenant-link" href="/portal/apps/{{appId}}">{{name}}</a></td><td><code>{{appId}}</code></td><td>{{status}}</td><td class="num">{{users}}</td><td class="num">{{sessions}}</td><td>{{lastLogin}}</td><td class="num">{{events}}</td><td>{{created}}</td></tr>
            {{/tenants}}
            </tbody>
            </table>
            {{^tenants}}<p>{{t.noTenants}}</p>{{/tenants}}
            {{#nextURL}}<p><a id="next-page" href="{{nextURL}}">{{t.nextPage}}</a></p>{{/nextURL}}
            """,
        "operator.accounts": """
            {{#inviteLink}}
            <div class="once" role="status">
            <p class="label" id="invite-link-label">{{t.inviteLinkLabel}}</p>
            <p><code id="invite-link" class="copyable wrap">{{inviteLink}}</code></p>
            </div>
            {{/inviteLink}}
            <form method="get" action="/portal/accounts" role="search" class="search">
            <label for="q">{{t.accountSearchLabel}}</label>
            <input id="q" name="q" type="search" value="{{q}}" maxlength="200">
            <button type="submit">{{t.searchButton}}</button>
            </form>
            <table id="accounts">
            <caption>{{t.accountsCaption}}</caption>
            <thead><tr><th scope="col">{{t.accountEmailColumn}}</th><th scope="col">{{t.accountKindColumn}}</th><th scope="col">{{t.accountStatusColumn}}</th><th scope="col">{{t.accountRolesColumn}}</th><th scope="col">{{t.accountActionsColumn}}</th></tr></thead>
            <tbody>
            {{#accounts}}<tr id="account-{{id}}"><td class="account-email">{{email}}{{^enrolled}} <span class="help">{{t.notEnrolled}}</span>{{/enrolled}}</td><td>{{kind}}</td><td class="account-status">{{status}}</td>
            <td>{{#hasRoles}}<ul class="roles">{{#roles}}<li><a href="/portal/apps/{{appId}}">{{appName}}</a> <span class="member-role">{{role}}</span> <form class="remove-role inline" method="post" action="/portal/accounts/{{accountId}}/roles/{{appId}}/remove"><input type="hidden" name="csrf" value="{{csrf}}"><button type="submit" class="secondary" aria-label="{{t.removeRoleButton}} {{role}} {{appName}}">{{t.removeRoleButton}}</button></form></li>{{/roles}}</ul>{{/hasRoles}}{{^hasRoles}}{{t.noRoles}}{{/hasRoles}}</td>
            <td>{{^self}}{{#active}}<form class="suspend-account inline" method="post" action="/portal/accounts/{{id}}/suspend"><input type="hidden" name="csrf" value="{{statusCSRF}}"><button type="submit" class="secondary" aria-label="{{t.suspendButton}} {{email}}">{{t.suspendButton}}</button></form>{{/active}}{{^active}}<form class="activate-account inline" method="post" action="/portal/accounts/{{id}}/activate"><input type="hidden" name="csrf" value="{{statusCSRF}}"><button type="submit" aria-label="{{t.activateButton}} {{email}}">{{t.activateButton}}</button></form>{{/active}}{{/self}}</td></tr>
            {{/accounts}}
            </tbody>
            </table>
            {{^accounts}}<p>{{t.noAccounts}}</p>{{/accounts}}
            {{#nextURL}}<p><a id="next-page" href="{{nextURL}}">{{t.nextPage}}</a></p>{{/nextURL}}
            <section class="card wide" aria-labelledby="invite-operator-heading">
            <h2 id="invite-operator-heading">{{t.inviteOperatorHeading}}</h2>
            <p id="invite-operator-help">{{t.inviteOperatorHelp}}</p>
            <form method="post" action="/portal/accounts/invite">
            <input type="hidden" name="csrf" value="{{inviteCSRF}}">
            <div class="field">
            <label for="invite-email">{{t.inviteEmailLabel}}</label>
            <input id="invite-email" name="email" type="email" autocomplete="off" required value="{{email}}" aria-describedby="invite-operator-help">
            </div>
            <button id="invite-operator-submit" type="submit">{{t.inviteOperatorButton}}</button>
            </form>
            </section>
            """,
    ]
}
