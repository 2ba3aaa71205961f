import Foundation
import Logging
import PostgresNIO

// `POST completeSignup` and its e-mailed link: the code turns a pending signup into an account.

/// Result of completing a signup; the GET (link) variant also needs the HTML page.
public struct CompletedSignup: Sendable {
    public let tokens: IssuedTokens
    public let clickThroughHTML: String
}

/// `POST completeSignup` (<doc:EndUserAPI> §5.6) and the link's `GET completeSignup` (<doc:EndUserAPI> §5.7).
struct CompleteSignup: Sendable {
    let client: PostgresClient
    let codes: CodeChallenge
    let accounts: Accounts
    let outbox: Outbox
    let audit: UserAudit
    let grant: TokenGrant
    let maxCodeAttempts: Int
    let logger: Logger

    private enum CodeCheck {
        case ok(User, PendingStore.Pending)
        case failed(EndUserError)
    }

    func run(app: App, fields: Fields) async throws -> CompletedSignup {
        let handle = Identifiers.handle(try fields.require("handle"))
        let code = try Input.code(try fields.require("code"))
        try Gates.requireActive(app)
        guard app.settings.signupEnabled else { throw EndUserError.signupDisabled }
        // Wrong codes are counted in a transaction that commits; the error is thrown afterwards.
        let check: CodeCheck = try await client.transaction(logger: logger) { db in
            guard let pending = try await PendingStore.pending(db, .signups, appRef: app.ref, handle: handle, logger: logger) else {
                let verified = try await PendingStore.hasVerified(db, .signups, appRef: app.ref, handle: handle, logger: logger)
                let existing = try await UserStore.user(db, appRef: app.ref, handle: handle, logger: logger)
                if verified || existing != nil { return .failed(.handleAlreadyRegistered) }
                return .failed(.invalidData)
            }
            guard pending.attempts < maxCodeAttempts else { return .failed(.invalidData) }
            guard codes.matches(code, sealed: pending.codeSealed, purpose: .signupCode(pending.id)) else {
                try await PendingStore.countFailedCode(db, .signups, id: pending.id, logger: logger)
                try await audit.record(db, app: app, handle: handle, action: "completeSignup", status: "error", detail: ["reason": .string("wrong code")])
                return .failed(.invalidData)
            }
            guard pending.expiresAt > Date() else { return .failed(.signupCodeExpired) }
            let user = try await accounts.insertUser(
                db, app: app, handle: handle, passwordHash: pending.passwordHash, locale: pending.locale, metadata: pending.metadata)
            try await PendingStore.markVerified(db, .signups, id: pending.id, logger: logger)
            try await outbox.email(db, app: app, template: "signUpSuccess", locale: pending.locale, to: handle, values: ["HANDLE": handle], logger: logger)
            try await audit.record(db, app: app, handle: handle, action: "completeSignup")
            return .ok(user, pending)
        }
        switch check {
        case .failed(let error): throw error
        case .ok(let user, let pending):
            var issued = try await grant.issueTokens(app: app, user: user, method: .signup, jwtFailure: .invalidData)
            issued.signedUserToken = try await grant.signedUserToken(app: app, user: user, code: code)
            let page = try await client.withConnection { db in
                try await Outbox.template(db, appRef: app.ref, name: "clickThrough", locale: pending.locale, logger: logger)
            }
            let html = Outbox.render(page.html, ["APP_NAME": app.name, "HANDLE": handle, "CODE": code], html: true)
            return CompletedSignup(tokens: issued, clickThroughHTML: html)
        }
    }
}

extension EndUserFlows {
    public func completeSignup(app: App, fields: Fields) async throws -> CompletedSignup {
        try await CompleteSignup(
            client: client, codes: codes, accounts: accounts, outbox: outbox, audit: userAudit, grant: grant,
            maxCodeAttempts: settings.maxCodeAttempts, logger: logger)
            .run(app: app, fields: fields)
    }
}
