import Foundation
import Logging
import PostgresNIO

// `POST loginComplete`: the login-token and its code.

/// `POST loginComplete` (<doc:EndUserAPI> §5.3, §7.4). The login-token must be valid, unexpired, of scope `login`,
/// of the calling app, and its challenge unused, with fewer than `maxCodeAttempts` wrong codes.
/// Phone: the SMS code of this challenge. Google: a TOTP of the current step ±1 that is later
/// than the last one the user logged in with.
struct CompleteLogin: Sendable {
    let client: PostgresClient
    let tokens: TokenIssuer
    let codes: CodeChallenge
    let grant: TokenGrant
    let audit: UserAudit
    let logger: Logger

    func run(app: App, fields: Fields) async throws -> IssuedTokens {
        let loginToken = try fields.require("loginToken")
        let rawCode = try fields.require("code")
        let code = String(rawCode.unicodeScalars.filter { CharacterSet.alphanumerics.contains($0) }.map(Character.init))
        guard !code.isEmpty, code.allSatisfy({ $0.isASCII && $0.isNumber }) else { throw EndUserError.invalidData }
        guard let claims = await tokens.verifyLoginToken(loginToken), claims.appId == app.appId,
            let challengeId = UUID(uuidString: claims.jti)
        else { throw EndUserError.invalidCredentials }
        try Gates.requireActive(app)

        /// A wrong code is audited inside the transaction; other refusals after it.
        enum Outcome { case accepted(User), wrongCode, refused(String) }
        let outcome: Outcome = try await client.transaction(logger: logger) { db in
            // The user row before its challenge, in the order an account deletion or a password reset
            // takes them (user, then its challenges): the other order deadlocked with them (40P01).
            // FOR UPDATE, as the TOTP check locks it, so the lock is never upgraded.
            guard let user = try await UserStore.user(db, appRef: app.ref, handle: claims.handle, exact: true, forUpdate: true, logger: logger)
            else { return .refused("user gone") }
            guard let challenge = try await LoginChallengeStore.lockChallenge(db, id: challengeId, appRef: app.ref, logger: logger) else {
                return .refused("unknown login-token")
            }
            guard challenge.userId == user.id else { return .refused("user gone") }
            switch try await codes.verifySecondFactor(db, app: app, user: user, challenge: challenge, code: code) {
            case .refused(let reason): return .refused(reason)
            case .wrongCode:
                try await audit.record(db, app: app, handle: user.handle, action: "loginComplete", status: "error",
                                       detail: ["reason": .string("wrong code"), "factor": .string(challenge.factor.rawValue)])
                return .wrongCode
            case .accepted: break
            }
            return .accepted(user)
        }
        switch outcome {
        case .wrongCode:
            throw EndUserError.invalidCredentials
        case .refused(let reason):
            await audit.record(app: app, handle: claims.handle, action: "loginComplete", status: "error", detail: ["reason": .string(reason)])
            throw EndUserError.invalidCredentials
        case .accepted(let user):
            try Gates.requireActiveUser(user)
            let issued = try await grant.issueTokens(app: app, user: user, method: .secondFactor)
            try await client.withConnection { db in
                try await UserStore.touchLastLogin(db, userId: user.id, logger: logger)
                try await audit.record(db, app: app, handle: user.handle, action: "loginComplete")
                try await Events.record(db, app: app, type: .userLoginSucceeded, user: user, data: ["secondFactor": .bool(true)], logger: logger)
            }
            return issued
        }
    }
}

extension EndUserFlows {
    public func loginComplete(app: App, fields: Fields) async throws -> IssuedTokens {
        try await CompleteLogin(client: client, tokens: tokens, codes: codes, grant: grant, audit: userAudit, logger: logger)
            .run(app: app, fields: fields)
    }
}
