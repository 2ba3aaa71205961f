import Foundation
import Logging
import PostgresNIO

/// The RFC 7523 JWT-bearer grant (<doc:OAuth> §8): the app's own backend vouches for one of its users
/// with a short-lived JWT signed by a key registered on the app, and the token endpoint turns it into
/// a session. Webcom's "Custom" sign-in method.
///
/// An assertion is accepted when, in this order:
/// 1. it is a compact JWS signed with RS256, ES256, PS256 or EdDSA (never `none` or HMAC);
/// 2. its `iss` is the issuer of at least one key registered on the app, and one of those keys (the
///    one its `kid` names, or each in turn when it names none) verifies its signature;
/// 3. its `aud` names the app's issuer or its token endpoint;
/// 4. its `exp` is a number, not past (60 s of clock skew allowed) and at most five minutes ahead (plus
///    the same 60 s); `nbf`, when present, is not ahead; `iat`, when present, is neither ahead nor more
///    than ten minutes old;
/// 5. `sub` (1-255 characters) and `jti` (1-256) are strings;
/// 6. its (`iss`, `jti`) was never accepted before, on any node (a row per accepted assertion until it
///    expires; the insert that finds one refuses).
/// Any refusal is `invalid_grant` with a sentence saying which check failed, and writes nothing.
///
/// `sub` names the user through an identity of kind `custom` (see `VouchedSignIn` for the account
/// rule); an `email` claim becomes the handle of an account it creates. All the app's keys share one
/// namespace of subjects: the app's own user ids.
public struct AssertionGrant: Sendable {
    let client: PostgresClient
    let keySets: RemoteKeySets
    let signIns: VouchedSignIn
    /// The app's issuer and token endpoint, the audiences an assertion may name.
    let audiences: @Sendable (App) -> [String]
    let logger: Logger

    /// Clock skew allowed on every time check.
    static let leeway: Int64 = 60
    /// How far ahead an assertion's `exp` may be.
    static let maxLifetime: Int64 = 300
    /// How old an assertion's `iat` may be.
    static let maxAge: Int64 = 600
    /// How many keys are tried against an assertion that names no `kid`.
    static let maxCandidates = 20

    /// Checks `assertion` for `client` of `app` and signs its user in: a new session proven now.
    public func signIn(
        app: App, client oauthClient: OAuthClient, assertion: String, origin: ClientOrigin
    ) async throws(OAuthError) -> (user: User, sessionId: UUID, authTime: Date, amr: [String]) {
        guard oauthClient.appRef == app.ref else { throw .invalidClient("unknown client") }
        guard oauthClient.allows(.jwtBearer) else { throw .unauthorizedClient("this client may not use the jwt-bearer grant") }
        let checked = try await check(app: app, assertion: assertion)
        let taken: Bool
        do {
            taken = try await client.withConnection { db in
                try await OAuthAssertionJTIStore.take(
                    db, appRef: app.ref, issuer: checked.issuer, jti: checked.jti,
                    expiresAt: Date(timeIntervalSince1970: TimeInterval(checked.expires + Self.leeway)), logger: logger)
            }
        } catch {
            logger.error("could not record an assertion", metadata: ["app": "\(app.appId)", "error": "\(error)"])
            throw .serverError()
        }
        guard taken else { throw .invalidGrant("the assertion was already used (jti)") }
        return try await signIns.signIn(
            app: app,
            .init(kind: .custom, subject: checked.subject, email: checked.email,
                  detail: ["issuer": .string(checked.issuer), "clientId": .string(oauthClient.clientId)]),
            method: .custom, amr: [], origin: origin)
    }

    /// What a valid assertion says.
    struct Checked: Sendable {
        let issuer: String
        let subject: String
        let jti: String
        let email: String?
        /// `exp`, seconds since 1970.
        let expires: Int64
    }

    /// Steps 1 to 5 (everything but the replay check): the assertion's claims, or the refusal.
    func check(app: App, assertion: String, now: Date = Date()) async throws(OAuthError) -> Checked {
        guard let jwt = SignedJWT(assertion) else {
            throw .invalidGrant("the assertion must be a JWT signed with \(SignedJWT.algorithms.joined(separator: ", "))")
        }
        guard let issuer = jwt.string("iss"), SignedJWT.isPlainText(issuer, max: 512) else { throw .invalidGrant("the assertion has no iss") }
        let registered: [AssertionKey]
        do {
            registered = try await client.withConnection { try await OAuthAssertionKeyStore.list($0, appRef: app.ref, issuer: issuer, logger: logger) }
        } catch {
            logger.error("could not read assertion keys", metadata: ["app": "\(app.appId)", "error": "\(error)"])
            throw .serverError()
        }
        guard !registered.isEmpty else { throw .invalidGrant("no key is registered for the assertion's issuer") }
        var candidates: [[String: JSONValue]] = []
        for key in registered {
            if case .object(var jwk)? = key.jwk {
                // A key registered without a kid checks any assertion; one with a kid those that name it or none.
                guard jwt.kid == nil || key.kid == nil || key.kid == jwt.kid else { continue }
                jwk["kid"] = nil
                candidates.append(jwk)
            } else if let url = key.jwksURI, let set = await keySets.keys(url: url, kid: jwt.kid, logger: logger) {
                candidates += set.filter { jwt.kid == nil || $0["kid"] == nil || $0["kid"]?.stringValue == jwt.kid }
            }
        }
        candidates = Array(candidates.filter { PublicJWK.algorithms(of: $0).contains(jwt.algorithm) }.prefix(Self.maxCandidates))
        guard !candidates.isEmpty else { throw .invalidGrant("no key registered for the assertion's issuer matches its kid and alg") }
        var verified = false
        for key in candidates where await jwt.verifies(with: key) {
            verified = true
            break
        }
        guard verified else { throw .invalidGrant("the assertion's signature does not verify with a key registered for its issuer") }

        let accepted = audiences(app)
        guard jwt.audiences.contains(where: accepted.contains) else {
            throw .invalidGrant("the assertion's aud must name the app's issuer or token endpoint")
        }
        let clock = Int64(now.timeIntervalSince1970.rounded(.down))
        guard case .seconds(let exp) = jwt.numericDate("exp") else { throw .invalidGrant("the assertion needs exp, a number") }
        guard exp > clock - Self.leeway else { throw .invalidGrant("the assertion has expired") }
        guard exp <= clock + Self.maxLifetime + Self.leeway else { throw .invalidGrant("the assertion's exp is more than five minutes ahead") }
        switch jwt.numericDate("nbf") {
        case .absent: break
        case .invalid: throw .invalidGrant("the assertion's nbf must be a number")
        case .seconds(let nbf): guard nbf <= clock + Self.leeway else { throw .invalidGrant("the assertion is not valid yet (nbf)") }
        }
        switch jwt.numericDate("iat") {
        case .absent: break
        case .invalid: throw .invalidGrant("the assertion's iat must be a number")
        case .seconds(let iat):
            guard iat <= clock + Self.leeway else { throw .invalidGrant("the assertion's iat is in the future") }
            guard iat >= clock - Self.maxAge else { throw .invalidGrant("the assertion was issued more than ten minutes ago") }
        }
        guard let subject = jwt.string("sub"), SignedJWT.isPlainText(subject, max: 255) else {
            throw .invalidGrant("the assertion needs sub, 1-255 characters naming the user")
        }
        guard let jti = jwt.string("jti"), SignedJWT.isPlainText(jti, max: 256) else {
            throw .invalidGrant("the assertion needs jti, 1-256 characters, used once")
        }
        let email: String?
        switch jwt.claims["email"] {
        case nil, .null?: email = nil
        case .string(let text)?: email = text
        default: throw .invalidGrant("the assertion's email must be a string")
        }
        return Checked(issuer: issuer, subject: subject, jti: jti, email: email, expires: exp)
    }
}

extension OAuthServices {
    /// The JWT-bearer grant (RFC 7523) for the token endpoint.
    public var assertionGrant: AssertionGrant {
        let oauth = self
        return AssertionGrant(
            client: client, keySets: remoteKeys,
            signIns: VouchedSignIn(client: client, sessions: SessionGrant(tokens: tokens, logger: logger), logger: logger),
            audiences: { app in [oauth.issuer(appId: app.appId), oauth.endpoint(appId: app.appId, "/oauth/token")] }, logger: logger)
    }
}
