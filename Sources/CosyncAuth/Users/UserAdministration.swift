import Foundation
import Logging
import PostgresNIO

/// Admin operations on the users of one app. Passwords are hashed exactly as on the end-user path:
/// bcrypt over the MD5 hex of the plaintext.
public struct UserAdministration: Sendable {
    public let apps: AppAdministration
    public let hasher: PasswordHasher
    /// Verifies provider tokens for linking and upgrades (the end-user API's verifier).
    public let social: SocialTokenVerifier?
    var client: PostgresClient { apps.client }
    var logger: Logger { apps.logger }

    public init(apps: AppAdministration, hasher: PasswordHasher, social: SocialTokenVerifier? = nil) {
        self.apps = apps
        self.hasher = hasher
        self.social = social
    }

    public func create(app: App, input: [String: JSONValue], actor: String) async throws -> User {
        let allowed: Set<String> = ["handle", "password", "metaData", "userName", "locale"]
        if let unknown = input.keys.sorted().first(where: { !allowed.contains($0) }) {
            throw AdminFailure.invalid(FieldError(unknown, "unknown_field", "is not a field of a new user"))
        }
        guard let rawHandle = input["handle"]?.stringValue else {
            throw AdminFailure.invalid(FieldError("handle", "required", "is required and must be a string"))
        }
        guard let handle = Identifiers.adminHandle(rawHandle) else {
            throw AdminFailure.invalid(FieldError("handle", "invalid_value", "must be 1-254 characters without spaces"))
        }
        guard let password = input["password"]?.stringValue else {
            throw AdminFailure.invalid(FieldError("password", "required", "is required and must be a string"))
        }
        try Self.checkPassword(password, settings: app.settings)
        let userName = try Self.userName(input["userName"])
        let locale = try Self.locale(input["locale"], settings: app.settings) ?? Locales.defaultLocale
        let metaData = try Self.metaData(input["metaData"]) ?? [:]
        let hash = try await hasher.hash(md5Hex: PasswordHasher.md5Hex(password), tenant: String(app.ref))
        do {
            return try await client.transaction(logger: logger) { db in
                let user = try await UserWrites.insert(
                    db, appRef: app.ref, handle: handle, userName: userName, passwordHash: hash, locale: locale,
                    metaData: metaData, logger: logger)
                try await AuditLog.record(
                    db, appRef: app.ref, appId: app.appId, actor: actor, action: "user.create",
                    detail: ["userId": .string(user.id.uuidString.lowercased()), "handle": .string(handle)], logger: logger)
                try await Events.record(db, app: app, type: .userCreated, user: user, data: ["actor": .string(actor)], logger: logger)
                return user
            }
        } catch let error as PSQLError {
            throw Self.conflict(error) ?? error
        }
    }

    public struct Page: Sendable {
        public let users: [User]
        public let nextCursor: String?
    }

    public func list(app: App, query: String?, limit: Int, cursor: String?) async throws -> Page {
        let after = try Cursor.textOrNil(cursor)
        let users = try await client.withConnection { db in
            try await UserStore.list(db, appRef: app.ref, query: query, after: after, limit: limit + 1, logger: logger)
        }
        let page = Array(users.prefix(limit))
        let next = users.count > limit ? page.last.map { Cursor.encode(text: $0.handle.lowercased()) } : nil
        return Page(users: page, nextCursor: next)
    }

    public func get(app: App, userId: String) async throws -> User {
        guard let id = UUID(uuidString: userId),
            let user = try await client.withConnection({ try await UserStore.find($0, appRef: app.ref, id: id, logger: logger) })
        else { throw AdminFailure.notFound("user") }
        return user
    }

    /// PATCH: `status` (active|suspended), `metaData` (object), `userName` (string or null), `locale`.
    public func update(app: App, userId: String, patch: [String: JSONValue], actor: String) async throws -> User {
        guard let id = UUID(uuidString: userId) else { throw AdminFailure.notFound("user") }
        let allowed: Set<String> = ["status", "metaData", "userName", "locale"]
        if let unknown = patch.keys.sorted().first(where: { !allowed.contains($0) }) {
            throw AdminFailure.invalid(FieldError(unknown, "unknown_field", "cannot be changed here"))
        }
        // Validate everything before touching the database.
        var status: UserStatus?
        if let value = patch["status"] {
            guard let parsed = value.stringValue.flatMap(UserStatus.init(rawValue:)) else {
                throw AdminFailure.invalid(FieldError("status", "invalid_value", "must be active or suspended"))
            }
            status = parsed
        }
        let metaData = try Self.metaData(patch["metaData"])
        let userName = try Self.userName(patch["userName"])
        let locale = try Self.locale(patch["locale"], settings: app.settings)
        do {
            return try await client.transaction(logger: logger) { db in
                guard var user = try await UserStore.find(db, appRef: app.ref, id: id, forUpdate: true, logger: logger) else {
                    throw AdminFailure.notFound("user")
                }
                if let status, status != user.status {
                    user.status = status
                    if status == .suspended {  // suspension ends every session and access token
                        user.tokenVersion += 1
                        user.keptTokenHash = nil
                        let ended = try await SessionStore.deleteAll(db, userId: user.id, logger: logger)
                        try await Events.sessionsRevoked(db, app: app, user: user, ended, reason: "suspended", logger: logger)
                    }
                }
                if let metaData { user.metaData = metaData }
                if patch["userName"] != nil { user.userName = userName }
                if let locale { user.locale = locale }
                let updated = try await UserStore.update(db, user: user, logger: logger)
                try await AuditLog.record(
                    db, appRef: app.ref, appId: app.appId, actor: actor, action: "user.update",
                    detail: ["userId": .string(userId.lowercased()), "fields": .array(patch.keys.sorted().map { .string($0) })],
                    logger: logger)
                try await Events.record(db, app: app, type: status == .suspended ? .userSuspended : .userUpdated, user: updated, data: ["fields": .array(patch.keys.sorted().map { .string($0) })], logger: logger)
                return updated
            }
        } catch let error as PSQLError {
            throw Self.conflict(error) ?? error
        }
    }

    public func delete(app: App, userId: String, actor: String) async throws {
        guard let id = UUID(uuidString: userId) else { throw AdminFailure.notFound("user") }
        try await client.transaction(logger: logger) { db in
            guard let handle = try await UserStore.delete(db, appRef: app.ref, id: id, logger: logger) else {
                throw AdminFailure.notFound("user")
            }
            try await AuditLog.record(
                db, appRef: app.ref, appId: app.appId, actor: actor, action: "user.delete",
                detail: ["userId": .string(userId.lowercased()), "handle": .string(handle)], logger: logger)
            try await Events.record(db, app: app, type: .userDeleted, userId: id, data: ["handle": .string(handle), "actor": .string(actor)], logger: logger)
        }
    }

    /// Admin password reset: md5 → bcrypt as on the end-user path; revokes the user's access tokens.
    public func setPassword(app: App, userId: String, input: [String: JSONValue], actor: String) async throws {
        guard let id = UUID(uuidString: userId) else { throw AdminFailure.notFound("user") }
        if let unknown = input.keys.sorted().first(where: { $0 != "password" }) {
            throw AdminFailure.invalid(FieldError(unknown, "unknown_field", "is not accepted here"))
        }
        guard let password = input["password"]?.stringValue else {
            throw AdminFailure.invalid(FieldError("password", "required", "is required and must be a string"))
        }
        try Self.checkPassword(password, settings: app.settings)
        let hash = try await hasher.hash(md5Hex: PasswordHasher.md5Hex(password), tenant: String(app.ref))
        try await client.transaction(logger: logger) { db in
            guard try await UserWrites.setPassword(db, appRef: app.ref, userId: id, hash: hash, logger: logger) != nil,
                let user = try await UserStore.find(db, appRef: app.ref, id: id, logger: logger)
            else {
                throw AdminFailure.notFound("user")
            }
            // A user given its first password (a social or anonymous account) signs in with it now.
            try await IdentityStore.ensurePassword(db, appRef: app.ref, userId: id, handle: user.handle, logger: logger)
            try await AuditLog.record(
                db, appRef: app.ref, appId: app.appId, actor: actor, action: "user.password.set",
                detail: ["userId": .string(userId.lowercased())], logger: logger)
            try await Events.record(db, app: app, type: .userPasswordChanged, userId: id, data: ["actor": .string(actor)], logger: logger)
        }
    }

    // MARK: validation

    static func checkPassword(_ password: String, settings: AppSettings) throws {
        guard !password.isEmpty, password.count <= 1024 else {
            throw AdminFailure.invalid(FieldError("password", "invalid_value", "must be 1-1024 characters"))
        }
        if let violation = PasswordPolicy.violation(of: password, settings: settings) {
            throw AdminFailure.invalid(FieldError("password", "password_policy", violation))
        }
    }

    static func userName(_ value: JSONValue?) throws -> String? {
        guard let value, value != .null else { return nil }
        guard let text = value.stringValue, let name = Identifiers.normalizedUserName(text) else {
            throw AdminFailure.invalid(
                FieldError("userName", "invalid_value", "must be a letter followed by letters or digits, at most 64"))
        }
        return name
    }

    static func locale(_ value: JSONValue?, settings: AppSettings) throws -> String? {
        guard let value else { return nil }
        guard let text = value.stringValue?.uppercased(), settings.locales.contains(text) else {
            throw AdminFailure.invalid(FieldError("locale", "invalid_value", "must be one of the app's locales"))
        }
        return text
    }

    static func metaData(_ value: JSONValue?) throws -> [String: JSONValue]? {
        guard let value else { return nil }
        guard let object = value.objectValue else {
            throw AdminFailure.invalid(FieldError("metaData", "invalid_type", "must be an object"))
        }
        guard let size = try? JSONCoding.encode(value).count, size <= 65_536 else {
            throw AdminFailure.invalid(FieldError("metaData", "too_long", "must be at most 64 KiB of JSON"))
        }
        return object
    }

    static func conflict(_ error: PSQLError) -> AdminFailure? {
        switch error.uniqueViolationConstraint {
        case "users_app_handle": .conflict(code: "handle_taken", message: "a user with this handle exists in this app")
        case "users_app_user_name": .conflict(code: "user_name_taken", message: "this user name is used by another user")
        case "identities_app_subject": .conflict(code: "identity_taken", message: "this sign-in is an identity of another user of this app")
        case "identities_user_kind": .conflict(code: "identity_exists", message: "the user already has an identity of this kind")
        default: nil
        }
    }
}
