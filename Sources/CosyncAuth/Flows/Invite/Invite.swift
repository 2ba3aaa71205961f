import Foundation
import Logging
import PostgresNIO

// `POST invite` (a user) and the admin invite: a code e-mailed to the invitee.

/// `POST invite` (<doc:EndUserAPI> §5.8): a logged-in user invites a handle; the invitee gets a code by e-mail.
/// Inviting the same handle again re-sends the same code; it never takes over a live invite.
/// The admin API's invite (`runAdmin`) stores its invite the same way.
struct Invite: Sendable {
    let client: PostgresClient
    let box: SecretBox
    let codes: CodeChallenge
    let pendingPolicy: PendingPolicy
    let outbox: Outbox
    let audit: UserAudit
    let inviteCodeLifetime: Int
    let logger: Logger

    func run(caller: AuthenticatedCaller, fields: Fields) async throws {
        let (app, inviter) = (caller.app, caller.user)
        let invitee = Identifiers.handle(try fields.require("handle"))
        let senderUserId = fields["senderUserId"] ?? ""
        try Gates.requireActive(app)
        try Gates.requireActiveUser(inviter)
        guard app.settings.invitationEnabled else { throw EndUserError.invitationDisabled }
        guard Identifiers.normalizedHandle(invitee) != nil, Identifiers.hasAt(invitee) else { throw EndUserError.invalidData }
        guard let parsed = Metadata.parse(fields["metaData"]) else { throw EndUserError.invalidMetadata }
        let metadata = app.settings.metaDataInvite.isEmpty ? [:] : try Metadata.filter(parsed ?? [:], fields: app.settings.metaDataInvite)
        if try await client.withConnection({ try await UserStore.user($0, appRef: app.ref, handle: invitee, logger: logger) }) != nil {
            throw EndUserError.handleAlreadyRegistered
        }
        try await store(app: app, invitee: invitee, senderHandle: inviter.handle, senderUserId: senderUserId,
                              metadata: metadata, locale: inviter.locale, actor: inviter.handle)
    }

    /// An invite from the admin API (sender `superuser`, as the legacy portal did).
    func runAdmin(app: App, input: [String: JSONValue], actor: String) async throws -> String {
        let allowed: Set<String> = ["handle", "locale", "metaData"]
        if let unknown = input.keys.sorted().first(where: { !allowed.contains($0) }) {
            throw AdminFailure.invalid(FieldError(unknown, "unknown_field", "is not a field of an invite"))
        }
        guard let raw = input["handle"]?.stringValue, Identifiers.adminHandle(raw, email: true) != nil else {
            throw AdminFailure.invalid(FieldError("handle", "invalid_value", "must be an e-mail address"))
        }
        let invitee = Identifiers.handle(raw)
        let locale = (input["locale"]?.stringValue ?? Locales.defaultLocale).uppercased()
        guard input["locale"] == nil || input["locale"]?.stringValue != nil, app.settings.locales.contains(locale) else {
            throw AdminFailure.invalid(FieldError("locale", "invalid_value", "must be one of the app's locales"))
        }
        guard input["metaData"] == nil || input["metaData"]?.objectValue != nil else {
            throw AdminFailure.invalid(FieldError("metaData", "invalid_type", "must be an object"))
        }
        let metadata: [String: JSONValue]
        do {
            metadata = app.settings.metaDataInvite.isEmpty ? [:] : try Metadata.filter(input["metaData"]?.objectValue ?? [:], fields: app.settings.metaDataInvite)
        } catch {
            throw AdminFailure.invalid(FieldError("metaData", "invalid_value", "misses a required invite field or has a non-string value"))
        }
        if try await client.withConnection({ try await UserStore.user($0, appRef: app.ref, handle: invitee, logger: logger) }) != nil {
            throw AdminFailure.conflict(code: "handle_taken", message: "a user with this handle exists in this app")
        }
        do {
            try await store(app: app, invitee: invitee, senderHandle: "superuser", senderUserId: "superuser",
                                  metadata: metadata, locale: locale, actor: actor)
        } catch EndUserError.handleAlreadyRegistered {
            throw AdminFailure.conflict(code: "conflict", message: "another request invited this handle at the same time")
        }
        return invitee
    }

    /// Creates the invite and queues its e-mail in the same transaction. Each sender has its own
    /// pending invite of a handle, with its own code (<doc:EndUserAPI> §5.8 step 7), so another user's
    /// invite never takes over a pending one. While the sender's invite is live (unexpired, fewer than
    /// maxCodeAttempts wrong guesses), inviting again never changes it (senderUserId, metadata,
    /// attempts): it re-sends the same code within the handle's e-mail quota. A dead invite is closed
    /// and replaced by a new one with a new code.
    func store(
        app: App, invitee: String, senderHandle: String, senderUserId: String, metadata: [String: JSONValue],
        locale: String, actor: String
    ) async throws {
        do {
            try await client.transaction(logger: logger) { db in
                let pending = try await PendingStore.pendingRows(
                    db, .invites, appRef: app.ref, handle: invitee, sender: senderHandle, logger: logger).first
                let code: String
                let mailLocale: String
                if let pending, pendingPolicy.isLive(pending), let sealed = pending.codeSealed,
                    let existing = try? box.openString(sealed, purpose: .inviteCode(pending.id))
                {
                    code = existing
                    mailLocale = pending.locale
                    guard try await pendingPolicy.takeCodeMail(db, app: app, handle: invitee) else {
                        try await audit.record(db, app: app, handle: actor, action: "invite", status: "error",
                                        detail: ["invitee": .string(invitee), "reason": .string("re-send quota used up")])
                        return
                    }
                } else {
                    guard try await pendingPolicy.takeCodeMail(db, app: app, handle: invitee) else { throw EndUserError.rateLimited }
                    if let pending { try await PendingStore.markExpired(db, .invites, id: pending.id, logger: logger) }
                    code = Secrets.numericCode()
                    mailLocale = locale
                    let id = UUID()
                    try await PendingStore.insertInvite(
                        db, id: id, appRef: app.ref, handle: invitee, senderHandle: senderHandle, senderUserId: senderUserId,
                        codeSealed: try codes.seal(code, purpose: .inviteCode(id)), metadata: metadata, locale: locale,
                        lifetimeSeconds: inviteCodeLifetime, logger: logger)
                }
                try await outbox.email(
                    db, app: app, template: "invite", locale: mailLocale, to: invitee, values: ["HANDLE": invitee, "CODE": code],
                    logger: logger)
                try await audit.record(db, app: app, handle: actor, action: "invite", detail: ["invitee": .string(invitee)])
                try await Events.record(db, app: app, type: .inviteSent, userId: nil, data: ["handle": .string(invitee), "senderHandle": .string(senderHandle)], logger: logger)
            }
        } catch let error as PSQLError where error.uniqueViolationConstraint != nil {
            // The same sender invited the same handle at the same moment: that request's invite and
            // e-mail stand, as a re-send would leave them.
            return
        }
    }
}

extension EndUserFlows {
    public func invite(caller: AuthenticatedCaller, fields: Fields) async throws {
        try await inviteStep.run(caller: caller, fields: fields)
    }

    public func adminInvite(app: App, input: [String: JSONValue], actor: String) async throws -> String {
        try await inviteStep.runAdmin(app: app, input: input, actor: actor)
    }

    private var inviteStep: Invite {
        Invite(
            client: client, box: box, codes: codes, pendingPolicy: pendingPolicy, outbox: outbox, audit: userAudit,
            inviteCodeLifetime: settings.inviteCodeLifetime, logger: logger)
    }
}
