import Foundation
import Logging
import PostgresNIO

/// A sign-in that another party vouches for: the app's own backend (a JWT-bearer assertion, identity
/// kind `custom`) or an upstream OpenID provider (an ID token, kind `oidc`). Both end here, so both
/// follow one account rule (<doc:OAuth> §8):
///
/// - The identity (kind, subject) names the account. Its first sign-in creates one, with that
///   identity as its only way in. The handle is the e-mail the party vouches for when it gives one
///   (an upstream provider's only when it says it verified it); without one it is `custom_…` /
///   `oidc_…` and a random suffix.
/// - An e-mail that is already some account's handle is refused (`access_denied`): the identity never
///   joins that account by itself, and no second account takes the address. Joining an existing
///   account is an explicit step (the README's linking rule), which these methods do not take.
/// - A suspended account, or one signed out everywhere while this ran, is refused (`invalid_grant`).
///
/// The session is opened through `SessionGrant` with the identity's method, like every other sign-in,
/// with the `user.created` / `user.login.succeeded` events and an audit row in its transaction.
struct VouchedSignIn: Sendable {
    let client: PostgresClient
    let sessions: SessionGrant
    let logger: Logger

    /// What the party vouches for.
    struct Vouched: Sendable {
        let kind: IdentityKind
        let subject: String
        /// An e-mail address for the handle of a new account (already judged trustworthy by the caller).
        let email: String?
        /// What the audit row and the events say of where it came from (issuer, provider).
        let detail: [String: JSONValue]
    }

    /// The result every OAuth sign-in hands to code or token issuance.
    typealias Result = (user: User, sessionId: UUID, authTime: Date, amr: [String])

    func signIn(app: App, _ vouched: Vouched, method: SessionMethod, amr: [String], origin: ClientOrigin) async throws(OAuthError) -> Result {
        guard app.status == .active else { throw .accessDenied("the app is not active") }
        let handle = vouched.email.flatMap(Self.emailHandle)
        // A first sign-in racing another of the same identity loses on the unique index; the second
        // try finds the account the first one made.
        for attempt in 0..<2 {
            do {
                return try await client.transaction(logger: logger) { db in
                    try await run(db, app: app, vouched, handle: handle, method: method, amr: amr, origin: origin)
                }
            } catch let refusal as OAuthError {
                throw refusal
            } catch let refused as SessionGrant.Refused {
                switch refused {
                case .userRevoked: throw .invalidGrant("the account is suspended or was signed out while signing in")
                case .identityGone: throw .invalidGrant("the identity was removed while signing in")
                }
            } catch let error as PSQLError where error.uniqueViolationConstraint != nil && attempt == 0 {
                continue
            } catch {
                logger.error("vouched sign-in failed", metadata: ["app": "\(app.appId)", "kind": "\(vouched.kind.rawValue)", "error": "\(error)"])
                throw .serverError()
            }
        }
        throw .serverError()
    }

    func run(
        _ db: PostgresConnection, app: App, _ vouched: Vouched, handle: String?, method: SessionMethod, amr: [String], origin: ClientOrigin
    ) async throws -> Result {
        var detail = vouched.detail
        detail["kind"] = .string(vouched.kind.rawValue)
        let user: User
        if let existing = try await IdentityStore.user(db, appRef: app.ref, kind: vouched.kind, subject: vouched.subject, logger: logger) {
            guard existing.status == .active else { throw OAuthError.invalidGrant("the account is suspended") }
            user = existing
        } else {
            if let handle, try await UserStore.user(db, appRef: app.ref, handle: handle, logger: logger) != nil {
                throw OAuthError.accessDenied("an account with this e-mail address exists; it is not linked to this identity")
            }
            let newHandle = handle ?? "\(vouched.kind.rawValue)_\(Secrets.hexIdentifier())"
            user = try await UserStore.insertSocialUser(
                db, appRef: app.ref, handle: newHandle, provider: vouched.kind.rawValue, locale: Locales.defaultLocale, metadata: nil,
                logger: logger)
            try await IdentityStore.insert(
                db, appRef: app.ref, userId: user.id, kind: vouched.kind, subject: vouched.subject, email: handle, logger: logger)
            try await Events.record(db, app: app, type: .userCreated, user: user, data: ["method": .string(method.rawValue)], logger: logger)
            try await AuditLog.record(
                db, appRef: app.ref, appId: app.appId, actor: "user", action: "oauth.accountCreated",
                detail: detail.merging(["userId": .string(user.id.uuidString.lowercased())]) { a, _ in a }, logger: logger)
        }
        let sessionId = try await sessions.open(db, app: app, user: user, method: method, origin: origin)
        try await IdentityStore.touch(db, userId: user.id, kind: vouched.kind, logger: logger)
        try await UserStore.touchLastLogin(db, userId: user.id, logger: logger)
        try await Events.record(db, app: app, type: .userLoginSucceeded, user: user, data: ["method": .string(method.rawValue)], logger: logger)
        try await AuditLog.record(
            db, appRef: app.ref, appId: app.appId, actor: "user", action: "oauth.signIn",
            detail: detail.merging(["userId": .string(user.id.uuidString.lowercased())]) { a, _ in a }, logger: logger)
        // auth_time is the session's own proof time, as PostgreSQL wrote it.
        guard let live = try await SessionStore.liveUser(db, sessionId: sessionId, appRef: app.ref, userId: user.id, logger: logger) else {
            throw StoreError.noRowReturned
        }
        return (live.user, sessionId, live.proof.at, amr)
    }

    /// An e-mail address as a handle: trimmed, lower-cased, with an `@`, 3-254 characters, no spaces
    /// or control characters; nil for anything else (the account then gets a generated handle).
    static func emailHandle(_ raw: String) -> String? {
        guard let handle = Identifiers.normalizedHandle(raw), Identifiers.hasAt(handle), handle.unicodeScalars.count >= 3,
              !Identifiers.isAnonymous(handle)
        else { return nil }
        return handle
    }
}
