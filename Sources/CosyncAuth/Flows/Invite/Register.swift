import Foundation
import Logging
import PostgresNIO

// `POST register`: an invitee redeems the code with a password.

/// `POST register` (<doc:EndUserAPI> §5.9): accept an invite with its code; the invite's metadata is merged over the
/// user's (invite values win).
struct Register: Sendable {
    let client: PostgresClient
    let hasher: PasswordHasher
    let codes: CodeChallenge
    let pendingPolicy: PendingPolicy
    let accounts: Accounts
    let outbox: Outbox
    let audit: UserAudit
    let grant: TokenGrant
    let logger: Logger

    private enum InviteCheck {
        case ok(User, PendingStore.Pending)
        case failed(EndUserError)
    }

    func run(app: App, fields: Fields) async throws -> IssuedTokens {
        let handle = Identifiers.handle(try fields.require("handle"))
        let password = try fields.require("password")
        let rawCode = try fields.require("code")
        try Gates.requireActive(app)
        guard app.settings.invitationEnabled else { throw EndUserError.invitationDisabled }
        let md5 = try Input.md5(password)
        let code = try Input.code(rawCode)
        let locale = (fields["locale"] ?? Locales.defaultLocale).uppercased()
        guard let parsed = Metadata.parse(fields["metaData"]) else { throw EndUserError.invalidData }
        let check: InviteCheck = try await client.transaction(logger: logger) { db in
            let pending = try await PendingStore.pendingRows(db, .invites, appRef: app.ref, handle: handle, logger: logger)
            if pending.isEmpty {
                if try await PendingStore.hasVerified(db, .invites, appRef: app.ref, handle: handle, logger: logger) {
                    return .failed(.handleAlreadyRegistered)
                }
                return .failed(.invalidData)
            }
            let live = pending.filter(pendingPolicy.isLive)
            guard !live.isEmpty else { return .failed(.invalidData) }
            // Compare with every live invite (constant time each); a wrong guess counts against all of
            // the handle's pending invites, so several senders do not multiply the guesses.
            var matched: PendingStore.Pending?
            for candidate in live where codes.matches(code, sealed: candidate.codeSealed, purpose: .inviteCode(candidate.id)) {
                matched = candidate
            }
            guard let invite = matched else {
                try await PendingStore.countFailedInviteCode(db, appRef: app.ref, handle: handle, logger: logger)
                try await audit.record(db, app: app, handle: handle, action: "register", status: "error", detail: ["reason": .string("wrong code")])
                return .failed(.invalidData)
            }
            guard app.settings.locales.contains(locale) else { return .failed(.invalidData) }
            let userMetadata: [String: JSONValue]
            do {
                userMetadata = app.settings.metaData.isEmpty ? [:] : try Metadata.filter(parsed ?? [:], fields: app.settings.metaData)
            } catch let error as EndUserError {
                return .failed(error)
            }
            let merged = Metadata.merge(userMetadata, invite.metadata)
            if try await UserStore.user(db, appRef: app.ref, handle: handle, logger: logger) != nil {
                return .failed(.handleAlreadyRegistered)
            }
            // bcrypt only once the code matched, so wrong guesses cost no hashing thread.
            let hash = try await hasher.hash(md5Hex: md5, tenant: String(app.ref))
            let user = try await accounts.insertUser(db, app: app, handle: handle, passwordHash: hash, locale: locale, metadata: merged)
            try await PendingStore.markVerified(db, .invites, id: invite.id, logger: logger)
            try await PendingStore.closeOtherInvites(db, appRef: app.ref, handle: handle, keep: invite.id, logger: logger)
            try await outbox.email(db, app: app, template: "signUpSuccess", locale: locale, to: handle, values: ["HANDLE": handle], logger: logger)
            try await audit.record(db, app: app, handle: handle, action: "register")
            try await Events.record(db, app: app, type: .inviteAccepted, user: user, data: ["senderHandle": invite.senderHandle.map { .string($0) } ?? .null], logger: logger)
            return .ok(user, invite)
        }
        switch check {
        case .failed(let error): throw error
        case .ok(let user, let invite):
            var issued = try await grant.issueTokens(app: app, user: user, method: .register)
            issued.signedUserToken = try await grant.signedUserToken(
                app: app, user: user, code: code, senderHandle: invite.senderHandle, senderUserId: invite.senderUserId)
            return issued
        }
    }
}

extension EndUserFlows {
    public func register(app: App, fields: Fields) async throws -> IssuedTokens {
        try await Register(
            client: client, hasher: hasher, codes: codes, pendingPolicy: pendingPolicy, accounts: accounts, outbox: outbox,
            audit: userAudit, grant: grant, logger: logger)
            .run(app: app, fields: fields)
    }
}
