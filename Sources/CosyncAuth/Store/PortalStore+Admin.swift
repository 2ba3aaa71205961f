import Foundation
import Logging
import PostgresNIO

/// The operator's administration of Portal accounts (issue 23, operator views): the accounts list
/// with their roles, suspending and activating an account, removing a role. Part of PortalStore
/// (it owns `portal_accounts` and `portal_roles`).
extension PortalStore {
    /// One account of the operator's list.
    struct AccountListRow: Sendable {
        let id: UUID
        let email: String
        let isOperator: Bool
        let totpEnabled: Bool
        let status: String
        let createdAt: Date
    }

    /// Accounts by e-mail after `after` (keyset), whose e-mail starts with `prefix` when given.
    static func listAccounts(
        _ db: PostgresConnection, prefix: String?, after: String?, limit: Int, logger: Logger
    ) async throws -> [AccountListRow] {
        let pattern = AppStore.likePrefix((prefix ?? "").lowercased())
        let rows = try await db.query(
            """
            SELECT id, email, is_operator, totp_enabled, status, created_at FROM portal_accounts
            WHERE email > \(after ?? "") AND email LIKE \(pattern)
            ORDER BY email LIMIT \(limit)
            """, logger: logger)
        var found: [AccountListRow] = []
        for try await (id, email, isOperator, totp, status, created) in rows.decode((UUID, String, Bool, Bool, String, Date).self) {
            found.append(AccountListRow(id: id, email: email, isOperator: isOperator, totpEnabled: totp, status: status, createdAt: created))
        }
        return found
    }

    /// The roles of these accounts, with their apps' ids and names (at most 200 an account).
    static func roles(
        _ db: PostgresConnection, accountIds: [UUID], logger: Logger
    ) async throws -> [(accountId: UUID, appId: String, appName: String, role: String)] {
        guard !accountIds.isEmpty else { return [] }
        let rows = try await db.query(
            """
            SELECT x.account_id, x.app_id, x.name, x.role FROM (
                SELECT r.account_id, a.app_id, a.name, r.role,
                       row_number() OVER (PARTITION BY r.account_id ORDER BY a.name, a.app_id) AS n
                FROM portal_roles r JOIN apps a ON a.id = r.app_ref
                WHERE r.account_id = ANY(\(accountIds))
            ) x WHERE x.n <= 200 ORDER BY x.account_id, x.name, x.app_id
            """, logger: logger)
        var found: [(accountId: UUID, appId: String, appName: String, role: String)] = []
        for try await (id, appId, name, role) in rows.decode((UUID, String, String, String).self) { found.append((id, appId, name, role)) }
        return found
    }

    /// Sets the account's status; false when there is no such account.
    static func setStatus(_ db: PostgresConnection, id: UUID, status: String, logger: Logger) async throws -> Bool {
        let rows = try await db.query(
            "UPDATE portal_accounts SET status = \(status), updated_at = now() WHERE id = \(id) RETURNING id", logger: logger)
        for try await _ in rows.decode(UUID.self) { return true }
        return false
    }

    /// Removes the account's role on the app; the role it had, or nil when it had none.
    static func deleteRole(_ db: PostgresConnection, accountId: UUID, appRef: Int64, logger: Logger) async throws -> String? {
        let rows = try await db.query(
            "DELETE FROM portal_roles WHERE account_id = \(accountId) AND app_ref = \(appRef) RETURNING role", logger: logger)
        for try await role in rows.decode(String.self) { return role }
        return nil
    }
}
