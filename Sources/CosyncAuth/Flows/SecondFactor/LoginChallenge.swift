import Foundation
import Logging
import PostgresNIO

// The second step a login may need: a login challenge and its login-token.

/// Opens a login challenge for a second factor and answers its login-token.
struct LoginChallenge: Sendable {
    let client: PostgresClient
    let tokens: TokenIssuer
    let codes: CodeChallenge
    let outbox: Outbox
    let audit: UserAudit
    let settings: FlowSettings
    let logger: Logger

    /// Opens a login challenge for `factor` and answers its login-token; with `smsTo`, the
    /// challenge's SMS code is queued in the same transaction.
    func open(app: App, user: User, factor: SecondFactor, smsTo phone: String?, throttle: LoginThrottle) async throws -> LoginOutcome {
        let challenge = UUID()
        let code = phone.map { _ in Secrets.numericCode() }
        let sealed = try code.map { try codes.seal($0, purpose: .loginChallenge(challenge)) }
        try await client.transaction(logger: logger) { db in
            // The user row first, as the login saw it: deleted, suspended or revoked during the
            // password check, it opens no challenge (and a deleted one no foreign-key failure).
            guard try await UserStore.lockLive(db, appRef: app.ref, userId: user.id, tokenVersion: user.tokenVersion, logger: logger)
            else { throw EndUserError.invalidCredentials }
            try await throttle.release(in: db)
            try await LoginChallengeStore.insertChallenge(
                db, id: challenge, appRef: app.ref, userId: user.id, factor: factor, codeSealed: sealed,
                lifetimeSeconds: settings.loginCodeLifetime, logger: logger)
            if let phone, let code {
                try await outbox.sms(
                    db, app: app, locale: user.locale, to: phone, values: ["CODE": code, "HANDLE": user.handle],
                    perNumberPerHour: settings.smsPerNumberPerHour, logger: logger)
            }
            try await audit.record(db, app: app, handle: user.handle, action: "login", detail: ["secondFactor": .string(factor.rawValue)])
        }
        return .secondFactor(loginToken: try await tokens.loginToken(handle: user.handle, appId: app.appId, challenge: challenge))
    }
}

extension EndUserFlows {
    var loginChallenge: LoginChallenge {
        LoginChallenge(client: client, tokens: tokens, codes: codes, outbox: outbox, audit: userAudit, settings: settings, logger: logger)
    }
}
