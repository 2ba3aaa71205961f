import Foundation
import Logging
import PostgresNIO

/// A Portal account as the operator's accounts page lists it: the account and its roles per app.
public struct PortalAccountEntry: Sendable {
    public struct Role: Sendable, Equatable {
        public let appId: String
        public let appName: String
        public let role: PortalRole
    }
    public let account: PortalAccount
    public let createdAt: Date
    public let roles: [Role]
}

/// One app of the tenants page with its figures.
public struct TenantEntry: Sendable {
    public let app: AppView
    /// Nil when the app went away between the list and the counts.
    public let stats: TenantStore.Stats?
}

/// The operator's views and actions on Portal accounts and tenants (issue 23). Every call needs an
/// operator's session (`forbidden` otherwise) and is audited as `portal:<email>`.
extension PortalAccounts {
    func requireOperator(_ session: PortalSession) throws(PortalError) {
        guard session.account.isOperator else { throw .forbidden }
    }

    /// Every app, newest first, keyset-paginated as the apps list is (`query`: a name or appId
    /// prefix), with its users, live sessions, last sign-in and events of the last 7 days: one
    /// statement for the page's apps (see `TenantStore`).
    public func tenants(of session: PortalSession, query: String?, limit: Int, cursor: String?) async throws -> (
        tenants: [TenantEntry], nextCursor: String?
    ) {
        try requireOperator(session)
        let page = try await visibleApps(of: session, query: query, limit: limit, cursor: cursor)
        let ids = page.apps.map(\.appId)
        let stats = try await client.withConnection { db in try await TenantStore.stats(db, appIds: ids, logger: logger) }
        return (page.apps.map { TenantEntry(app: $0, stats: stats[$0.appId]) }, page.nextCursor)
    }

    /// Portal accounts by e-mail (`query`: an e-mail prefix), `limit` (1…200) a page, after the
    /// e-mail `after`; with each account's roles.
    public func accounts(of session: PortalSession, query: String?, limit: Int, after: String?) async throws -> (
        accounts: [PortalAccountEntry], next: String?
    ) {
        try requireOperator(session)
        let limit = min(max(limit, 1), 200)
        let prefix = query.map { String($0.lowercased().prefix(254)) }
        let after = after.map { String($0.prefix(254)) }
        return try await client.withConnection { db in
            let rows = try await PortalStore.listAccounts(db, prefix: prefix, after: after, limit: limit + 1, logger: logger)
            let page = Array(rows.prefix(limit))
            let roles = try await PortalStore.roles(db, accountIds: page.map(\.id), logger: logger)
            let entries = page.map { row in
                PortalAccountEntry(
                    account: PortalAccount(id: row.id, email: row.email, isOperator: row.isOperator, totpEnabled: row.totpEnabled, status: row.status),
                    createdAt: row.createdAt,
                    roles: roles.filter { $0.accountId == row.id }.compactMap { found in
                        PortalRole(rawValue: found.role).map { PortalAccountEntry.Role(appId: found.appId, appName: found.appName, role: $0) }
                    })
            }
            return (entries, rows.count > limit ? page.last?.email : nil)
        }
    }

    /// Suspends or activates a Portal account. Suspending ends its sessions at once (and
    /// `session(cookie:)` refuses a suspended account's cookie anyway). An operator cannot suspend
    /// their own account (`conflict`).
    /// Returns the account's e-mail.
    @discardableResult
    public func setStatus(accountId: UUID, active: Bool, by session: PortalSession) async throws -> String {
        try requireOperator(session)
        guard active || accountId != session.account.id else { throw PortalError.conflict("You cannot suspend your own account.") }
        return try await client.transaction(logger: logger) { db -> String in
            guard let row = try await PortalStore.account(db, id: accountId, forUpdate: true, logger: logger) else {
                throw PortalError.notFound
            }
            let status = active ? "active" : "suspended"
            guard try await PortalStore.setStatus(db, id: accountId, status: status, logger: logger) else { throw PortalError.notFound }
            if !active { try await PortalStore.deleteSessions(db, accountId: accountId, logger: logger) }
            try await audit(
                db, actor: session.auditActor, action: active ? "portal.account.activate" : "portal.account.suspend",
                detail: ["account": .string(row.email)])
            return row.email
        }
    }

    /// Removes an account's role on an app (`notFound` when it has none there).
    public func removeRole(accountId: UUID, appId: String, by session: PortalSession) async throws {
        try requireOperator(session)
        guard appId.utf8.count <= 64 else { throw PortalError.notFound }
        try await client.transaction(logger: logger) { db in
            guard let app = try await AppStore.app(db, appId: appId, logger: logger),
                let row = try await PortalStore.account(db, id: accountId, logger: logger),
                let role = try await PortalStore.deleteRole(db, accountId: accountId, appRef: app.ref, logger: logger)
            else { throw PortalError.notFound }
            try await audit(
                db, actor: session.auditActor, action: "portal.role.remove", app: (app.ref, app.appId),
                detail: ["account": .string(row.email), "role": .string(role)])
        }
    }
}
