import Foundation
import Logging
import PostgresNIO

/// Admin access to an app's pending signups and invites, e-mail templates, outbox and audit log.
public struct AppRecords: Sendable {
    public let apps: AppAdministration
    var client: PostgresClient { apps.client }
    var logger: Logger { apps.logger }

    public init(apps: AppAdministration) { self.apps = apps }

    public struct Page<Item: Sendable>: Sendable {
        public let items: [Item]
        public let nextCursor: String?
    }

    // MARK: signups and invites

    public func pending(_ kind: AppRecordStore.Kind, app: App, limit: Int, cursor: String?) async throws -> Page<AppRecordStore.PendingRecord> {
        let before = try Cursor.timeOrNil(cursor)
        let rows = try await client.withConnection { db in
            try await AppRecordStore.listPending(db, kind: kind, appRef: app.ref, before: before, limit: limit + 1, logger: logger)
        }
        let page = Array(rows.prefix(limit))
        let next = rows.count > limit ? page.last.map { last in
            Cursor.encode(micros: Int64((last.createdAt.timeIntervalSince1970 * 1_000_000).rounded()), id: last.id)
        } : nil
        return Page(items: page, nextCursor: next)
    }

    public func deletePending(_ kind: AppRecordStore.Kind, app: App, id: String, actor: String) async throws {
        guard let uuid = UUID(uuidString: id) else { throw AdminFailure.notFound(kind == .signups ? "signup" : "invite") }
        try await client.transaction(logger: logger) { db in
            guard let handle = try await AppRecordStore.deletePending(db, kind: kind, appRef: app.ref, id: uuid, logger: logger) else {
                throw AdminFailure.notFound(kind == .signups ? "signup" : "invite")
            }
            try await AuditLog.record(
                db, appRef: app.ref, appId: app.appId, actor: actor, action: kind == .signups ? "signup.delete" : "invite.delete",
                detail: ["id": .string(id.lowercased()), "handle": .string(handle)], logger: logger)
        }
    }

    // MARK: templates

    public struct TemplateView: Sendable {
        public let name: String
        public let locale: String
        public let template: EmailTemplate
        public let isDefault: Bool

    }

    func checkTemplateKey(_ name: String, _ locale: String, settings: AppSettings) throws {
        guard EmailTemplate.names.contains(name) else {
            throw AdminFailure.notFound("template '\(name)' (known: \(EmailTemplate.names.joined(separator: ", ")))")
        }
        guard settings.locales.contains(locale) else {
            throw AdminFailure.notFound("locale '\(locale)' of this app (its locales: \(settings.locales.joined(separator: ", ")))")
        }
    }

    /// The app's template, or the built-in default (`isDefault: true`) when it has none.
    public func template(app: App, name: String, locale: String) async throws -> TemplateView {
        try checkTemplateKey(name, locale, settings: app.settings)
        if let stored = try await client.withConnection({
            try await AppRecordStore.template($0, appRef: app.ref, name: name, locale: locale, logger: logger)
        }) {
            return TemplateView(name: name, locale: locale, template: stored, isDefault: false)
        }
        guard let builtIn = EmailTemplate.builtIn(name) else { throw AdminFailure.notFound("template") }
        return TemplateView(name: name, locale: locale, template: builtIn, isDefault: true)
    }

    /// PUT: `{subject, html, text?, replyTo?, localeLinkText?}`.
    public func putTemplate(app: App, name: String, locale: String, input: [String: JSONValue], actor: String) async throws -> TemplateView {
        try checkTemplateKey(name, locale, settings: app.settings)
        let template = try Self.draft(name: name, input: input)
        try await client.transaction(logger: logger) { db in
            try await AppRecordStore.upsertTemplate(db, appRef: app.ref, name: name, locale: locale, template: template, logger: logger)
            try await AuditLog.record(
                db, appRef: app.ref, appId: app.appId, actor: actor, action: "template.put",
                detail: ["template": .string(name), "locale": .string(locale)], logger: logger)
        }
        return TemplateView(name: name, locale: locale, template: template, isDefault: false)
    }

    /// Back to the built-in template: removes the app's own, if any (written to the audit log), and
    /// answers the template that now applies. Resetting a template never customised changes nothing.
    public func resetTemplate(app: App, name: String, locale: String, actor: String) async throws -> TemplateView {
        try checkTemplateKey(name, locale, settings: app.settings)
        guard let builtIn = EmailTemplate.builtIn(name) else { throw AdminFailure.notFound("template") }
        try await client.transaction(logger: logger) { db in
            guard try await AppRecordStore.deleteTemplate(db, appRef: app.ref, name: name, locale: locale, logger: logger) else { return }
            try await AuditLog.record(
                db, appRef: app.ref, appId: app.appId, actor: actor, action: "template.reset",
                detail: ["template": .string(name), "locale": .string(locale)], logger: logger)
        }
        return TemplateView(name: name, locale: locale, template: builtIn, isDefault: true)
    }

    // MARK: outbox and logs

    public func messages(app: App, to: String?, limit: Int, cursor: String?) async throws -> Page<AppRecordStore.Message> {
        let before = try Cursor.intOrNil(cursor)
        let rows = try await client.withConnection { db in
            try await AppRecordStore.messages(db, appRef: app.ref, to: to, before: before, limit: limit + 1, logger: logger)
        }
        let page = Array(rows.prefix(limit))
        return Page(items: page, nextCursor: rows.count > limit ? page.last.map { Cursor.encode($0.id) } : nil)
    }

    public func logs(app: App, limit: Int, cursor: String?) async throws -> Page<AuditLog.Entry> {
        let before = try Cursor.intOrNil(cursor)
        let rows = try await client.withConnection { db in
            try await AuditLog.list(db, appRef: app.ref, before: before, limit: limit + 1, logger: logger)
        }
        let page = Array(rows.prefix(limit))
        return Page(items: page, nextCursor: rows.count > limit ? page.last.map { Cursor.encode($0.id) } : nil)
    }
}
