import Foundation
import Logging
import PostgresNIO

/// Removing one way in: an admin detach, an admin passkey removal and the end user's `removePasskey`
/// all end here, inside their transaction and after they locked the user row.
enum IdentityRemoval {
    /// Ends the sessions the identity opened (`SessionStore.deleteOpenedBy`), then deletes the
    /// identity (a passkey's row goes with it), and records `session.revoked` for the ended sessions.
    /// The sessions go first: the foreign key would otherwise end them silently, with no event.
    /// Sessions opened by the user's other identities stay. Returns the ended session ids.
    @discardableResult
    static func remove(
        _ db: PostgresConnection, app: App, user: User, identityId: UUID, kind: IdentityKind, reason: String, logger: Logger
    ) async throws -> [UUID] {
        let ended = try await SessionStore.deleteOpenedBy(db, userId: user.id, identityId: identityId, kind: kind, logger: logger)
        guard try await IdentityStore.delete(db, userId: user.id, identityId: identityId, logger: logger) != nil else {
            throw StoreError.noRowReturned
        }
        try await Events.sessionsRevoked(db, app: app, user: user, ended, reason: reason, logger: logger)
        return ended
    }
}
