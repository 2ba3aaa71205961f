import Foundation
import Logging
import PostgresNIO

// `POST signup`: a new account with a password, at once or after an e-mailed code.

/// Result of a signup: flow `none` returns tokens; `code` and `link` return nothing (`true`).
public enum SignupOutcome: Sendable, Equatable {
    case tokens(IssuedTokens)
    case codeSent
}

/// A concurrent request changed the pending row between our first look and the transaction.
struct PendingRaced: Error {}

/// `POST signup` (<doc:EndUserAPI> §5.5, §6.1).
struct SignupWithPassword: Sendable {
    let client: PostgresClient
    let hasher: PasswordHasher
    let outbox: Outbox
    let box: SecretBox
    let codes: CodeChallenge
    let pendingPolicy: PendingPolicy
    let accounts: Accounts
    let audit: UserAudit
    let grant: TokenGrant
    let signupCodeLifetime: Int
    let logger: Logger

    func run(app: App, fields: Fields, presentedAppToken: String) async throws -> SignupOutcome {
        let handle = Identifiers.handle(try fields.require("handle"))
        let password = try fields.require("password")
        try Gates.requireActive(app)
        guard app.settings.signupEnabled else { throw EndUserError.signupDisabled }
        // While this app's bcrypt queue is full, turn the signup away before any database work.
        try hasher.scheduler.precheck(tenant: String(app.ref))
        let md5 = try Input.md5(password)
        guard Identifiers.normalizedHandle(handle) != nil else { throw EndUserError.invalidData }
        let locale = (fields["locale"] ?? Locales.defaultLocale).uppercased()
        guard app.settings.locales.contains(locale) else { throw EndUserError.invalidData }
        guard let parsed = Metadata.parse(fields["metaData"]) else { throw EndUserError.invalidMetadata }
        let metadata = app.settings.metaData.isEmpty ? [:] : try Metadata.filter(parsed ?? [:], fields: app.settings.metaData)
        if try await client.withConnection({ try await UserStore.user($0, appRef: app.ref, handle: handle, logger: logger) }) != nil {
            throw EndUserError.handleAlreadyRegistered
        }

        if app.settings.signupFlow == .none {
            let hash = try await hasher.hash(md5Hex: md5, tenant: String(app.ref))
            let user: User = try await client.transaction(logger: logger) { db in
                let user = try await accounts.insertUser(db, app: app, handle: handle, passwordHash: hash, locale: locale, metadata: metadata)
                try await outbox.email(db, app: app, template: "signUpSuccess", locale: locale, to: handle, values: ["HANDLE": handle], logger: logger)
                try await audit.record(db, app: app, handle: handle, action: "signup", detail: ["flow": .string("none")])
                return user
            }
            return .tokens(try await grant.issueTokens(app: app, user: user, method: .signup, jwtFailure: .invalidData))
        }

        // A live pending signup (unexpired, fewer than maxCodeAttempts wrong guesses) is never changed
        // by a later signup of the same handle: its code is re-sent (within the handle's e-mail quota)
        // and the answer is the same `true`. Only once it is dead does a signup start a new code with
        // the new password and metadata. The bcrypt hash is made only then.
        let flow = app.settings.signupFlow
        let live = try await client.withConnection {
            try await PendingStore.pending($0, .signups, appRef: app.ref, handle: handle, lock: false, logger: logger)
        }.map { pendingPolicy.isLive($0) } ?? false
        let hash = live ? nil : try await hasher.hash(md5Hex: md5, tenant: String(app.ref))
        do {
            try await client.transaction(logger: logger) { db in
                let pending = try await PendingStore.pending(db, .signups, appRef: app.ref, handle: handle, logger: logger)
                let code: String
                if let pending, pendingPolicy.isLive(pending), let sealed = pending.codeSealed,
                    let existing = try? box.openString(sealed, purpose: .signupCode(pending.id))
                {
                    code = existing
                    guard try await pendingPolicy.takeCodeMail(db, app: app, handle: handle) else {
                        try await audit.record(db, app: app, handle: handle, action: "signup", status: "error", detail: ["reason": .string("re-send quota used up")])
                        return
                    }
                    try await audit.record(db, app: app, handle: handle, action: "signup", detail: ["flow": .string(flow.rawValue), "resent": .bool(true)])
                } else {
                    // A new signup replaces a dead one; a concurrent request may have made a live one
                    // after our first look (then `hash` is nil): that one stands.
                    guard let hash else { throw PendingRaced() }
                    guard try await pendingPolicy.takeCodeMail(db, app: app, handle: handle) else { throw EndUserError.rateLimited }
                    if let pending { try await PendingStore.markExpired(db, .signups, id: pending.id, logger: logger) }
                    code = Secrets.numericCode()
                    let id = UUID()
                    try await PendingStore.insertSignup(
                        db, id: id, appRef: app.ref, handle: handle, passwordHash: hash,
                        codeSealed: try codes.seal(code, purpose: .signupCode(id)), metadata: metadata, locale: locale,
                        lifetimeSeconds: signupCodeLifetime, logger: logger)
                    try await audit.record(db, app: app, handle: handle, action: "signup", detail: ["flow": .string(flow.rawValue)])
                    try await Events.record(db, app: app, type: .signupPending, userId: nil, data: ["handle": .string(handle)], logger: logger)
                }
                let mailLocale = pending.flatMap { pendingPolicy.isLive($0) ? $0.locale : nil } ?? locale
                if flow == .code {
                    try await outbox.email(
                        db, app: app, template: "signUp", locale: mailLocale, to: handle, values: ["HANDLE": handle, "CODE": code], logger: logger)
                } else {
                    let link = signupLink(app: app, handle: handle, code: code, appToken: presentedAppToken)
                    try await outbox.email(
                        db, app: app, template: "signUpLink", locale: mailLocale, to: handle,
                        values: ["HANDLE": handle, "CODE": code, "LINK": link], logger: logger)
                }
            }
        } catch let error as PSQLError where error.uniqueViolationConstraint != nil {
            // A concurrent signup of the same handle made the pending row first: it stands, as a
            // re-send would leave it. The legacy answer to a re-signup is `true`.
            return .codeSent
        } catch is PendingRaced {
            return .codeSent
        }
        return .codeSent
    }

    /// `<public URL>/api/appuser/completeSignup?appToken=…&handle=…&code=…`, every value percent-encoded.
    func signupLink(app: App, handle: String, code: String, appToken: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        func enc(_ s: String) -> String { s.addingPercentEncoding(withAllowedCharacters: allowed) ?? s }
        return "\(outbox.publicURL)/api/appuser/completeSignup?appToken=\(enc(appToken))&handle=\(enc(handle))&code=\(enc(code))"
    }
}

extension EndUserFlows {
    public func signup(app: App, fields: Fields, presentedAppToken: String) async throws -> SignupOutcome {
        try await SignupWithPassword(
            client: client, hasher: hasher, outbox: outbox, box: box, codes: codes, pendingPolicy: pendingPolicy, accounts: accounts,
            audit: userAudit, grant: grant, signupCodeLifetime: settings.signupCodeLifetime, logger: logger)
            .run(app: app, fields: fields, presentedAppToken: presentedAppToken)
    }
}
