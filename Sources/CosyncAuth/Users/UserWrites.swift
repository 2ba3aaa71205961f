import Foundation
import Logging
import PostgresNIO

/// The user writes that span stores, each in one home for every caller (end-user flows and the
/// admin API alike): the user row and what must change with it. Each runs inside the caller's
/// transaction, on its connection, its statements in the order given here.
enum UserWrites {
    /// Inserts a user and its first identity: the password one when it has a password, the anonymous
    /// one for an anonymous handle (`IdentityStore.insertInitial`).
    static func insert(
        _ db: PostgresConnection, appRef: Int64, handle: String, userName: String?, passwordHash: String?,
        locale: String, metaData: [String: JSONValue], logger: Logger
    ) async throws -> User {
        let user = try await UserStore.insertRow(
            db, appRef: appRef, handle: handle, userName: userName, passwordHash: passwordHash, locale: locale, metaData: metaData,
            logger: logger)
        try await IdentityStore.insertInitial(db, user: user, logger: logger)
        return user
    }

    /// Sets the password and ends the user's sessions: all of them, or all but `keepSession` (a
    /// changePassword keeps the caller's). The token version moves on, which ends the session-less
    /// tokens too, except the one whose hash is `keepTokenHash` (the caller's, when it has no session).
    /// `disableSecondFactor` (a reset) also turns 2FA off and drops open login challenges. Returns the
    /// ended sessions, or nil when the app has no such user. The one way a password is set, for the
    /// end-user flows and the admin API alike.
    @discardableResult
    static func setPassword(
        _ db: PostgresConnection, appRef: Int64, userId: UUID, hash: String, disableSecondFactor: Bool = false, keepSession: UUID? = nil,
        keepTokenHash: Data? = nil, logger: Logger
    ) async throws -> [UUID]? {
        guard try await UserStore.setPassword(
            db, appRef: appRef, userId: userId, hash: hash, disableSecondFactor: disableSecondFactor, keepTokenHash: keepTokenHash,
            logger: logger)
        else { return nil }
        if disableSecondFactor {
            try await LoginChallengeStore.deleteAll(db, userId: userId, logger: logger)
        }
        return try await SessionStore.deleteAll(db, userId: userId, except: keepSession, logger: logger)
    }

    /// Ends every session and access token of a user (sign out everywhere, suspension): the token
    /// version moves on, then the sessions go. Returns the ended sessions, or nil when the user does
    /// not exist.
    static func revokeAll(_ db: PostgresConnection, appRef: Int64, id: UUID, logger: Logger) async throws -> [UUID]? {
        guard try await UserStore.bumpTokenVersion(db, appRef: appRef, id: id, logger: logger) else { return nil }
        return try await SessionStore.deleteAll(db, userId: id, logger: logger)
    }
}
