import Foundation
import Logging
import PostgresNIO

// The tokens a successful sign-in answers: the user JWT, the session and its access token, and the signed-user-token.

/// The tokens a successful login-type call returns.
public struct IssuedTokens: Sendable, Equatable {
    public let jwt: String
    public let accessToken: String
    public var signedUserToken: String?
}

public enum LoginOutcome: Sendable, Equatable {
    case tokens(IssuedTokens)
    case secondFactor(loginToken: String)
}

/// The tokens a successful end-user sign-in answers, as a small type the steps declare.
struct TokenGrant: Sendable {
    let client: PostgresClient
    let tokens: TokenIssuer
    let sessions: SessionGrant
    let logger: Logger

    /// Builds the user JWT (`invalidMetadata` when a required field has no value), opens a session
    /// (`method`, and the request's `ClientOrigin`) and signs the access token that names it
    /// (`SessionGrant`, shared with the AppKey flows).
    /// `alongside` runs in the session's transaction (one pool checkout for the sign-in's writes: the
    /// session, and e.g. the last-login time, the audit row and the event).
    func issueTokens(
        app: App, user: User, method: SessionMethod, jwtFailure: EndUserError = .invalidMetadata,
        alongside: (@Sendable (PostgresConnection) async throws -> Void)? = nil
    ) async throws -> IssuedTokens {
        let claims: [String: JSONValue]
        do {
            claims = try Metadata.userJWTClaims(user: user, settings: app.settings)
        } catch {
            throw jwtFailure
        }
        let jwt = try await tokens.userJWT(claims: claims, appRef: app.ref)
        let (grant, origin) = (sessions, ClientOrigin.current)
        // One transaction: the session's insert holds the user row until it commits (see SessionGrant.open).
        let sessionId: UUID
        do {
            sessionId = try await Telemetry.sql("insert session") {
                try await client.transaction(logger: logger) { db in
                    let sessionId = try await grant.open(db, app: app, user: user, method: method, origin: origin)
                    try await alongside?(db)
                    return sessionId
                }
            }
        } catch let refused as SessionGrant.Refused {
            switch refused {
            // The user's sessions were ended (or the user suspended or deleted) while this sign-in ran.
            case .userRevoked: throw EndUserError.invalidCredentials
            // The provider account or anonymous handle it signed in with was detached meanwhile.
            case .identityGone: throw method == .apple || method == .google ? EndUserError.accountDoesNotExist : EndUserError.invalidCredentials
            }
        }
        let access = try await sessions.accessToken(app: app, user: user, sessionId: sessionId)
        return IssuedTokens(jwt: jwt, accessToken: access, signedUserToken: nil)
    }

    /// `signed-user-token` (<doc:EndUserAPI> §7.5): metaData as a JSON string indented by 10 spaces, or "".
    func signedUserToken(app: App, user: User, code: String, senderHandle: String? = nil, senderUserId: String? = nil) async throws -> String {
        var claims: [String: JSONValue] = [
            "handle": .string(user.handle), "appId": .string(app.appId), "code": .int(Int(code) ?? 0),
            "metaData": .string(user.metaData.isEmpty ? "" : Self.legacyIndentedJSON(.object(user.metaData))),
        ]
        if let senderHandle { claims["senderHandle"] = .string(senderHandle) }
        if let senderUserId { claims["senderUserId"] = .string(senderUserId) }
        return try await tokens.signedUserToken(claims: claims, appRef: app.ref)
    }

    static func legacyIndentedJSON(_ value: JSONValue, depth: Int = 0) -> String {
        let pad = String(repeating: " ", count: 10 * (depth + 1))
        let closePad = String(repeating: " ", count: 10 * depth)
        switch value {
        case .object(let object) where !object.isEmpty:
            let items = object.keys.sorted().map { key in
                "\(pad)\(quote(key)): \(legacyIndentedJSON(object[key] ?? .null, depth: depth + 1))"
            }
            return "{\n" + items.joined(separator: ",\n") + "\n\(closePad)}"
        case .array(let array) where !array.isEmpty:
            return "[\n" + array.map { pad + legacyIndentedJSON($0, depth: depth + 1) }.joined(separator: ",\n") + "\n\(closePad)]"
        default:
            return (try? String(decoding: JSONCoding.encode(value), as: UTF8.self)) ?? "null"
        }
    }

    static func quote(_ key: String) -> String {
        (try? String(decoding: JSONCoding.encode(JSONValue.string(key)), as: UTF8.self)) ?? "\"\""
    }
}
