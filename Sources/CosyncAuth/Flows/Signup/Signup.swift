import Foundation
import PostgresNIO

/// Result of a signup: flow `none` returns tokens; `code` and `link` return nothing (`true`).
public enum SignupOutcome: Sendable, Equatable {
    case tokens(IssuedTokens)
    case codeSent
}

/// Result of completing a signup; the GET (link) variant also needs the HTML page.
public struct CompletedSignup: Sendable {
    public let tokens: IssuedTokens
    public let clickThroughHTML: String
}

extension EndUserFlows {
    /// `POST signup` (§5.5, §6.1).
    public func signup(appToken: String?, fields: Fields) async throws -> SignupOutcome {
        let app = try await app(token: appToken, whenMissing: .invalidAppToken)
        let handle = Input.handle(try fields.require("handle"))
        let password = try fields.require("password")
        try requireActive(app)
        guard app.settings.signupEnabled else { throw EndUserError.signupDisabled }
        let md5 = try Input.md5(password)
        guard Identifiers.normalizedHandle(handle) != nil else { throw EndUserError.invalidData }
        let locale = (fields["locale"] ?? Locales.defaultLocale).uppercased()
        guard app.settings.locales.contains(locale) else { throw EndUserError.invalidData }
        guard let parsed = Metadata.parse(fields["metaData"]) else { throw EndUserError.invalidMetadata }
        let metadata = app.settings.metaData.isEmpty ? [:] : try Metadata.filter(parsed ?? [:], fields: app.settings.metaData)
        if try await client.withConnection({ try await EndUserStore.user($0, appRef: app.ref, handle: handle, logger: logger) }) != nil {
            throw EndUserError.handleAlreadyRegistered
        }
        let hash = try await hasher.hash(md5Hex: md5)

        if app.settings.signupFlow == .none {
            let user: User = try await client.transaction(logger: logger) { db in
                let user = try await insertUser(db, app: app, handle: handle, passwordHash: hash, locale: locale, metadata: metadata)
                try await outbox.email(db, app: app, template: "signUpSuccess", locale: locale, to: handle, values: ["HANDLE": handle], logger: logger)
                try await audit(db, app: app, handle: handle, action: "signup", detail: ["flow": .string("none")])
                return user
            }
            return .tokens(try await issueTokens(app: app, user: user, jwtFailure: .invalidData))
        }

        let flow = app.settings.signupFlow
        do {
            try await client.transaction(logger: logger) { db in
                let code: String
                if let pending = try await EndUserStore.pending(db, .signups, appRef: app.ref, handle: handle, logger: logger),
                    let sealed = pending.codeSealed, let existing = try? box.openString(sealed, purpose: "signup-code:\(pending.id)")
                {
                    // Re-signup while pending: same code, new password and metadata, the window restarts.
                    code = existing
                    try await EndUserStore.refreshSignup(
                        db, id: pending.id, passwordHash: hash, metadata: metadata, locale: locale,
                        lifetimeSeconds: settings.signupCodeLifetime, logger: logger)
                } else {
                    code = Secrets.numericCode()
                    let id = UUID()
                    try await EndUserStore.insertSignup(
                        db, id: id, appRef: app.ref, handle: handle, passwordHash: hash,
                        codeSealed: try sealCode(code, purpose: "signup-code:\(id)"), metadata: metadata, locale: locale,
                        lifetimeSeconds: settings.signupCodeLifetime, logger: logger)
                }
                if flow == .code {
                    try await outbox.email(
                        db, app: app, template: "signUp", locale: locale, to: handle, values: ["HANDLE": handle, "CODE": code], logger: logger)
                } else {
                    let link = signupLink(app: app, handle: handle, code: code, appToken: appToken ?? "")
                    try await outbox.email(
                        db, app: app, template: "signUpLink", locale: locale, to: handle,
                        values: ["HANDLE": handle, "CODE": code, "LINK": link], logger: logger)
                }
                try await audit(db, app: app, handle: handle, action: "signup", detail: ["flow": .string(flow.rawValue)])
            }
        } catch let error as PSQLError where error.uniqueViolationConstraint != nil {
            throw EndUserError.handleAlreadyRegistered  // a concurrent signup of the same handle won
        }
        return .codeSent
    }

    /// `<public URL>/api/appuser/completeSignup?appToken=…&handle=…&code=…`, every value percent-encoded.
    func signupLink(app: AppRow, handle: String, code: String, appToken: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        func enc(_ s: String) -> String { s.addingPercentEncoding(withAllowedCharacters: allowed) ?? s }
        return "\(outbox.publicURL)/api/appuser/completeSignup?appToken=\(enc(appToken))&handle=\(enc(handle))&code=\(enc(code))"
    }

    private enum CodeCheck {
        case ok(User, EndUserStore.Pending)
        case failed(EndUserError)
    }

    /// `POST completeSignup` (§5.6) and the link's `GET completeSignup` (§5.7).
    public func completeSignup(app: AppRow, fields: Fields) async throws -> CompletedSignup {
        let handle = Input.handle(try fields.require("handle"))
        let code = try Input.code(try fields.require("code"))
        try requireActive(app)
        guard app.settings.signupEnabled else { throw EndUserError.signupDisabled }
        // Wrong codes are counted in a transaction that commits; the error is thrown afterwards.
        let check: CodeCheck = try await client.transaction(logger: logger) { db in
            guard let pending = try await EndUserStore.pending(db, .signups, appRef: app.ref, handle: handle, logger: logger) else {
                let verified = try await EndUserStore.hasVerified(db, .signups, appRef: app.ref, handle: handle, logger: logger)
                let existing = try await EndUserStore.user(db, appRef: app.ref, handle: handle, logger: logger)
                if verified || existing != nil { return .failed(.handleAlreadyRegistered) }
                return .failed(.invalidData)
            }
            guard pending.attempts < settings.maxCodeAttempts else { return .failed(.invalidData) }
            guard codeMatches(code, sealed: pending.codeSealed, purpose: "signup-code:\(pending.id)") else {
                try await EndUserStore.countFailedCode(db, .signups, id: pending.id, logger: logger)
                try await audit(db, app: app, handle: handle, action: "completeSignup", status: "error", detail: ["reason": .string("wrong code")])
                return .failed(.invalidData)
            }
            guard pending.expiresAt > Date() else { return .failed(.signupCodeExpired) }
            let user = try await insertUser(
                db, app: app, handle: handle, passwordHash: pending.passwordHash, locale: pending.locale, metadata: pending.metadata)
            try await EndUserStore.markVerified(db, .signups, id: pending.id, logger: logger)
            try await outbox.email(db, app: app, template: "signUpSuccess", locale: pending.locale, to: handle, values: ["HANDLE": handle], logger: logger)
            try await audit(db, app: app, handle: handle, action: "completeSignup")
            return .ok(user, pending)
        }
        switch check {
        case .failed(let error): throw error
        case .ok(let user, let pending):
            var issued = try await issueTokens(app: app, user: user, jwtFailure: .invalidData)
            issued.signedUserToken = try await signedUserToken(app: app, user: user, code: code)
            let page = try await client.withConnection { db in
                try await Outbox.template(db, appRef: app.ref, name: "clickThrough", locale: pending.locale, logger: logger)
            }
            let html = Outbox.render(page.html, ["APP_NAME": app.name, "HANDLE": handle, "CODE": code], html: true)
            return CompletedSignup(tokens: issued, clickThroughHTML: html)
        }
    }
}
