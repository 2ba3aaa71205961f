import CosyncAuth
import Foundation
import PostgresNIO

/// Report entries of a batch, made on or off the writer's path, recorded (`LegacyImporter.record`)
/// inside the batch's transaction and counted (`tally`) once it committed.
struct Notes: Sendable {
    var entries: [ReportEntry] = []

    mutating func add(_ action: String, _ collection: String, _ legacyId: String, _ appId: String, _ handle: String?, _ reason: String) {
        entries.append(ReportEntry(collection: collection, legacyId: legacyId, appId: appId, handle: handle, action: action, reason: reason))
    }
    mutating func refuse(_ collection: String, _ legacyId: String, _ appId: String, _ handle: String?, _ reason: String) {
        add("refused", collection, legacyId, appId, handle, reason)
    }
    mutating func adjust(_ collection: String, _ legacyId: String, _ appId: String, _ handle: String?, _ reason: String) {
        add("adjusted", collection, legacyId, appId, handle, reason)
    }
    mutating func replace(_ collection: String, _ legacyId: String, _ appId: String, _ handle: String?, _ reason: String) {
        add("replaced", collection, legacyId, appId, handle, reason)
    }

    /// Refused entries count as refused rows, the others as adjusted ones.
    func tally(into counts: inout ImportSummary.Counts) {
        for entry in entries {
            if entry.action == "refused" { counts.refused += 1 } else { counts.adjusted += 1 }
        }
    }
}

extension LegacyImporter {
    /// One user row on its way to PostgreSQL, and the unique keys it needs.
    struct UserRow: Sendable {
        var fields: [String: JSONValue]
        let index: Int
        let appRef: Int64
        let appId: String
        let legacyId: String
        let handle: String
        let updatedAt: Date
        /// `fields` as one line of COPY's text format (`makeCopyLine`), made off the writer's path and
        /// made again when the writer changes `fields`.
        var copyLine = ByteBuffer()
        var userName: String? { fields["user_name"]?.stringValue }
        var verifiedPhone: String? { fields["phone_verified"] == .bool(true) ? fields["phone"]?.stringValue : nil }
        var socialKey: String? {
            guard let social = fields["social_user_id"]?.stringValue, let provider = fields["login_provider"]?.stringValue else { return nil }
            return "\(provider):\(social)"
        }

        /// The row as one line of COPY's text format, in the order of `LegacyImportStore.userBatchColumns`:
        /// a string as it is, an object as JSON text, a missing field or null as `\N`.
        func makeCopyLine() -> ByteBuffer {
            var buffer = ByteBufferAllocator().buffer(capacity: 512)
            for (i, column) in LegacyImportStore.userBatchColumns.enumerated() {
                if i > 0 { buffer.writeInteger(UInt8(ascii: "\t")) }
                switch fields[column] {
                case nil, .null?: buffer.writeStaticString("\\N")
                case .string(let text)?: CopyText.write(text, into: &buffer)
                case .int(let value)?: buffer.writeString(String(value))
                case .bool(let value)?: buffer.writeStaticString(value ? "true" : "false")
                case let value?: CopyText.write(CompactJSON.text(value), into: &buffer)
                }
            }
            buffer.writeInteger(UInt8(ascii: "\n"))
            return buffer
        }
    }

    /// A batch of users mapped off the writer's path, with the jsonb keys of its checks.
    struct PreparedUsers: Sendable {
        var rows: [UserRow]
        var notes: Notes
        var lastIndex: Int
        /// `[{app_ref, handle, user_name, phone, provider, social}]` (`LegacyImportStore.userCollisions`).
        var keys: String
        /// `[{app_ref, legacy_id, fingerprint}]` (`LegacyImportStore.localUserChanges`).
        var identities: String
    }

    /// A legacy raw MD5 hex password (before 2021-07) in the stored form of
    /// `PasswordHasher.legacyDigest`: the MD5 itself is what clients send, so it is never stored;
    /// bcrypt replaces it at the next login (hashing at import would cost ~50 ms a row).
    static func storedFormOfRawMD5(_ text: String) -> String? {
        guard text.count == 32, text.allSatisfy(\.isHexDigit) else { return nil }
        return PasswordHasher.legacyDigest(md5Hex: text)
    }

    static func isBcrypt(_ text: String) -> Bool { text.hasPrefix("$2") && text.count == 60 }

    /// A legacy bcrypt hash this server will verify: well formed, cost within
    /// `PasswordHasher.acceptedCosts` (4–16). Nil, with the reason, for anything else.
    static func usableBcrypt(_ text: String) -> (hash: String?, problem: String?) {
        guard let cost = PasswordHasher.bcryptCost(text) else { return (nil, "password looks like bcrypt but is malformed") }
        guard PasswordHasher.acceptedCosts.contains(cost) else {
            return (nil, "bcrypt cost \(cost) is outside 4–16 (a crafted hash could hold a hashing thread for hours)")
        }
        return (text, nil)
    }

    /// A date: the field, else the ObjectId's creation second, else the epoch.
    static func date(_ doc: LegacyDocument, _ key: String) -> Date {
        if let date = doc.date(key) { return date }
        if let id = doc.id, id.count == 24, let seconds = UInt32(id.prefix(8), radix: 16) { return Date(timeIntervalSince1970: Double(seconds)) }
        return Date(timeIntervalSince1970: 0)
    }

    /// Maps a legacy user document (<doc:LegacyImport> §3.2) or refuses it.
    func userRow(_ index: Int, _ doc: LegacyDocument, bytes: ArraySlice<UInt8>, _ notes: inout Notes) throws -> UserRow? {
        guard let (app, ref) = owner("users", doc, &notes) else { return nil }
        let legacyId = doc.id ?? ""
        let raw = doc.string("handle") ?? ""
        let handle = LegacyMapping.handle(raw)
        guard !legacyId.isEmpty, !handle.isEmpty, handle.unicodeScalars.count <= 254 else {
            notes.refuse("users", legacyId, app.appId, raw, "no _id or no usable handle")
            return nil
        }
        var subject: String?
        if handle != raw {
            notes.adjust("users", legacyId, app.appId, handle, "handle normalised from '\(raw)' (legacy login lower-cased and trimmed the typed handle); the JWT sub stays '\(raw)'")
            subject = raw
        }
        let id = LegacyMapping.stableId("user", app.appId, legacyId)
        var fields: [String: JSONValue] = [
            "id": .string(id.uuidString.lowercased()), "app_ref": .int(Int(ref)), "handle": .string(handle), "legacy_id": .string(legacyId),
            "fingerprint": .string(LegacyMapping.fingerprint(bytes).base64EncodedString()),
            "locale": .string(LegacyMapping.locale(doc.string("locale"))),
            "status": .string(doc.string("status") == "active" || doc.string("status") == nil ? "active" : "suspended"),
        ]
        if let subject { fields["jwt_subject"] = .string(subject) }
        if let password = doc.string("password"), !password.isEmpty {
            if Self.isBcrypt(password) {
                let checked = Self.usableBcrypt(password)
                if let hash = checked.hash {
                    fields["password_hash"] = .string(hash)
                } else {
                    notes.adjust("users", legacyId, app.appId, handle, "\(checked.problem ?? "unusable bcrypt hash"); imported without a password (the user resets it)")
                }
            } else if let hash = Self.storedFormOfRawMD5(password) {
                fields["password_hash"] = .string(hash)  // the raw-MD5 era: hashed now, never stored as is
            } else {
                notes.adjust("users", legacyId, app.appId, handle, "password is neither bcrypt nor a 32-hex MD5; dropped (the user resets it)")
            }
        }
        if let name = doc.string("userName"), !name.isEmpty {
            // Legacy did not validate user names: any name without '@' or spaces, of at most 64 characters.
            let normalised = name.trimmingCharacters(in: .whitespacesAndNewlines).lowercased()
            if !normalised.isEmpty, normalised.unicodeScalars.count <= 64, !Identifiers.hasAt(normalised), !normalised.contains(where: \.isWhitespace) {
                fields["user_name"] = .string(normalised)
            } else {
                notes.adjust("users", legacyId, app.appId, handle, "userName '\(name)' is not a valid user name; dropped")
            }
        }
        let provider = doc.string("loginProvider") ?? ""
        fields["login_provider"] = .string(["apple", "google"].contains(provider) ? provider : "")
        if let social = doc.string("socialUserId"), !social.isEmpty { fields["social_user_id"] = .string(social) }
        if let metadata = doc.object("metaData") { fields["metadata"] = .object(metadata) }
        if let rawPhone = doc.string("phone"), !rawPhone.isEmpty {
            if let phone = LegacyMapping.phone(rawPhone) {
                fields["phone"] = .string(phone)
                fields["phone_verified"] = .bool(doc.bool("phoneVerified") ?? false)
            } else {
                notes.adjust("users", legacyId, app.appId, handle, "phone '\(rawPhone)' is not E.164; dropped")
            }
        }
        fields["phone_verified"] = fields["phone_verified"] ?? .bool(false)
        // Phone 2FA needs a number that can receive the code: without one it is off, and the report says
        // so (as for a Google key that cannot be read), never silently skipped at login.
        let phoneTwoFactor = doc.bool("twoFactorPhoneVerification") ?? false
        fields["two_factor_phone"] = .bool(phoneTwoFactor && fields["phone"] != nil)
        if phoneTwoFactor && fields["phone"] == nil {
            notes.adjust("users", legacyId, app.appId, handle, "phone 2FA was on without a usable phone number; turned off")
        }
        fields["two_factor_google"] = .bool(doc.bool("twoFactorGoogleVerification") ?? false)
        if let key = doc.string("googleSecretKey"), !key.isEmpty {
            if let secret = TOTP.secret(fromKey: key) {
                fields["totp"] = .string(try box.seal(TOTP.base32(secret), purpose: .totp(userId: id)).base64EncodedString())
            } else {
                notes.adjust("users", legacyId, app.appId, handle, "googleSecretKey is not base32; dropped (TOTP must be set up again)")
                fields["two_factor_google"] = .bool(false)
            }
        }
        if let lastLogin = doc.date("lastLogin") { fields["last_login"] = .string(ISO8601.milliseconds(lastLogin)) }
        let createdAt = Self.date(doc, "createdAt")
        let updatedAt = doc.date("updatedAt") ?? createdAt
        fields["created_at"] = .string(ISO8601.milliseconds(createdAt))
        fields["updated_at"] = .string(ISO8601.milliseconds(updatedAt))
        return UserRow(fields: fields, index: index, appRef: ref, appId: app.appId, legacyId: legacyId, handle: handle, updatedAt: updatedAt)
    }

    /// True when `a` wins over `b` under merge-newest (newest updatedAt; ties by legacy id).
    static func newer(_ a: (Date, String), than b: (Date, String)) -> Bool { a.0 != b.0 ? a.0 > b.0 : a.1 > b.1 }

    /// Maps a batch and settles duplicate handles inside it. Runs while the previous batch is written.
    func prepareUsers(_ batch: Batch) throws -> PreparedUsers {
        var notes = Notes()
        var rows: [UserRow] = []
        for item in batch {
            if let row = try userRow(item.index, item.doc, bytes: item.bytes, &notes) { rows.append(row) }
        }
        var winners: [String: UserRow] = [:]
        for row in rows {
            let key = "\(row.appRef)|\(row.handle.lowercased())"
            guard let current = winners[key] else {
                winners[key] = row
                continue
            }
            let replace = options.duplicates == .mergeNewest && Self.newer((row.updatedAt, row.legacyId), than: (current.updatedAt, current.legacyId))
            let (kept, dropped) = replace ? (row, current) : (current, row)
            winners[key] = kept
            notes.refuse("users", dropped.legacyId, dropped.appId, dropped.handle, "duplicate handle in the app; kept legacy row \(kept.legacyId) (\(options.duplicates.rawValue))")
        }
        rows = rows.filter { winners["\($0.appRef)|\($0.handle.lowercased())"]?.legacyId == $0.legacyId }
        if options.dryRun { return PreparedUsers(rows: rows, notes: notes, lastIndex: batch.last?.index ?? 0, keys: "", identities: "") }
        for i in rows.indices { rows[i].copyLine = rows[i].makeCopyLine() }
        let keys = JSONValue.array(rows.map { row in
            var key: [String: JSONValue] = ["app_ref": .int(Int(row.appRef)), "handle": .string(row.handle.lowercased())]
            if let name = row.userName { key["user_name"] = .string(name) }
            if let phone = row.verifiedPhone { key["phone"] = .string(phone) }
            if let provider = row.fields["login_provider"], let social = row.fields["social_user_id"] {
                key["provider"] = provider
                key["social"] = social
            }
            return .object(key)
        })
        let identities = CompactJSON.text(.array(rows.map { row in
            .object(["app_ref": .int(Int(row.appRef)), "legacy_id": .string(row.legacyId), "fingerprint": row.fields["fingerprint"] ?? .null])
        }))
        return PreparedUsers(rows: rows, notes: notes, lastIndex: batch.last?.index ?? 0, keys: CompactJSON.text(keys), identities: identities)
    }

    func writeUsers(_ prepared: PreparedUsers, _ counts: inout ImportSummary.Counts) async throws {
        record(prepared.notes)
        prepared.notes.tally(into: &counts)
        let rows = prepared.rows
        let lastIndex = prepared.lastIndex
        if options.dryRun {
            counts.imported += rows.count
            return
        }
        let keysJSON = prepared.keys
        let identities = prepared.identities
        var importedNow = 0
        var notes = Notes()
        let overwrite = options.overwriteLocalChanges
        try await client.transaction(logger: logger) { db in
            notes = Notes()
            // Rows changed or deleted on this server since the import wrote them are kept (sql/0006).
            let local = try await LegacyImportStore.localUserChanges(db, rows: identities, logger: self.logger)
            var recreated: [JSONValue] = []
            var rows = rows
            if !local.isEmpty {
                rows = rows.filter { row in
                    guard let change = local["\(row.appRef)|\(row.legacyId)"] else { return true }
                    let what = change.deleted ? "deleted on this server" : "changed on this server since it was imported (status now '\(change.status)')"
                    if overwrite {
                        notes.add("overwritten", "users", row.legacyId, row.appId, row.handle, "\(what); overwritten by the export (--overwrite-local-changes)")
                        if change.deleted { recreated.append(.object(["app_ref": .int(Int(row.appRef)), "legacy_id": .string(row.legacyId)])) }
                        return true
                    }
                    notes.add("kept", "users", row.legacyId, row.appId, row.handle, "\(what); the newer export was not applied (--overwrite-local-changes applies it)")
                    return false
                }
            }
            let collisions = try await LegacyImportStore.userCollisions(db, keys: keysJSON, logger: self.logger)
            var byKey: [String: LegacyImportStore.Collision] = [:]
            for c in collisions { byKey["\(c.kind)|\(c.appRef)|\(c.key)"] = c }
            var accepted: [UserRow] = []
            var replaced: [JSONValue] = []
            var replacedIds = Set<String>()
            for row in rows {
                if let existing = byKey["handle|\(row.appRef)|\(row.handle.lowercased())"], existing.legacyId != row.legacyId {
                    guard let existingId = existing.legacyId else {
                        notes.refuse("users", row.legacyId, row.appId, row.handle, "a user with this handle was created on this server; not overwritten")
                        continue
                    }
                    if existing.locallyChanged && !overwrite {
                        notes.refuse("users", row.legacyId, row.appId, row.handle,
                                     "duplicate handle in the app; kept legacy row \(existingId): it was changed on this server since it was imported")
                        continue
                    }
                    if self.options.duplicates == .mergeNewest && Self.newer((row.updatedAt, row.legacyId), than: (existing.updatedAt, existingId)) {
                        replaced.append(.object(["app_ref": .int(Int(row.appRef)), "legacy_id": .string(existingId)]))
                        replacedIds.insert("\(row.appRef)|\(existingId)")
                        notes.replace("users", existingId, row.appId, row.handle, "duplicate handle in the app; replaced by newer legacy row \(row.legacyId)")
                    } else {
                        notes.refuse("users", row.legacyId, row.appId, row.handle,
                                     "duplicate handle in the app; kept legacy row \(existingId) (\(self.options.duplicates.rawValue))")
                        continue
                    }
                }
                accepted.append(row)
            }
            // Other unique keys: the attribute is dropped from the later row, the row is kept. `holders`
            // maps "kind|app|key" to the legacy id holding it ("" for a row made on this server).
            var holders: [String: String] = [:]
            for c in collisions where c.kind != "handle" && !replacedIds.contains("\(c.appRef)|\(c.legacyId ?? "")") {
                holders["\(c.kind)|\(c.appRef)|\(c.key)"] = c.legacyId ?? ""
            }
            func clash(_ kind: String, _ row: UserRow, _ key: String) -> Bool {
                let slot = "\(kind)|\(row.appRef)|\(key)"
                guard let holder = holders[slot] else {
                    holders[slot] = row.legacyId
                    return false
                }
                return holder != row.legacyId
            }
            for i in accepted.indices {
                let row = accepted[i]
                var changed = false
                func note(_ reason: String) { notes.adjust("users", row.legacyId, row.appId, row.handle, reason) }
                if let name = row.userName, clash("userName", row, name) {
                    accepted[i].fields["user_name"] = nil
                    changed = true
                    note("userName '\(name)' belongs to another user of the app; dropped")
                }
                if let phone = row.verifiedPhone, clash("phone", row, phone) {
                    accepted[i].fields["phone_verified"] = .bool(false)
                    changed = true
                    note("phone \(phone) is verified by another user of the app; imported unverified")
                }
                if let social = row.socialKey, clash("social", row, social) {
                    accepted[i].fields["social_user_id"] = nil
                    changed = true
                    note("provider account \(social) belongs to another user of the app; dropped")
                }
                if changed { accepted[i].copyLine = accepted[i].makeCopyLine() }
            }
            if !replaced.isEmpty {
                try await LegacyImportStore.deleteImportedUsers(
                    db, ids: String(decoding: try JSONCoding.encode(JSONValue.array(replaced)), as: UTF8.self), logger: self.logger)
            }
            if !recreated.isEmpty {
                try await LegacyImportStore.clearUserTombstones(db, ids: CompactJSON.text(.array(recreated)), logger: self.logger)
            }
            if !accepted.isEmpty {
                var batch = ByteBufferAllocator().buffer(capacity: accepted.reduce(0) { $0 + $1.copyLine.readableBytes })
                for row in accepted { batch.writeImmutableBuffer(row.copyLine) }
                // The identities' keys: those of the whole batch when every row is accepted (the common case).
                let keys = accepted.count == prepared.rows.count
                    ? identities : CompactJSON.text(.array(accepted.map { .object(["app_ref": .int(Int($0.appRef)), "legacy_id": .string($0.legacyId)]) }))
                try await LegacyImportStore.upsertUsers(db, batch: batch, keys: keys, logger: self.logger)
            }
            self.record(notes)
            try await self.flushReport(db)
            try await LegacyImportStore.setCheckpoint(db, source: self.source, collection: "users", rowsDone: lastIndex + 1, logger: self.logger)
            importedNow = accepted.count
        }
        counts.imported += importedNow
        notes.tally(into: &counts)
    }

    /// Runs one batch's `work`: in a dry run without a database, otherwise in one transaction together
    /// with the batch's report entries (so a resumed run keeps them).
    func commitBatch(_ work: @Sendable (PostgresConnection?) async throws -> (Int, Notes)) async throws -> (Int, Notes) {
        if options.dryRun {
            let result = try await work(nil)
            record(result.1)
            return result
        }
        return try await client.transaction(logger: logger) { db in
            let result = try await work(db)
            self.record(result.1)
            try await self.flushReport(db)
            return result
        }
    }

    // MARK: signups and invites

    func importPending(_ kind: AppRecordStore.Kind, _ batch: Batch, _ counts: inout ImportSummary.Counts) async throws {
        let collection = kind.rawValue
        var notes = Notes()
        var importedNow = 0
        let lastIndex = batch.last?.index ?? 0
        let work: @Sendable (PostgresConnection?) async throws -> (Int, Notes) = { db in
            var notes = Notes()
            var imported = 0
            for item in batch {
                let doc = item.doc
                guard let (app, ref) = self.owner(collection, doc, &notes) else { continue }
                let legacyId = doc.id ?? ""
                let handle = LegacyMapping.handle(doc.string("handle") ?? "")
                func refuse(_ reason: String) { notes.refuse(collection, legacyId, app.appId, handle, reason) }
                guard !legacyId.isEmpty, !handle.isEmpty else {
                    refuse("no _id or no handle")
                    continue
                }
                let legacyStatus = doc.string("status") ?? "pending"
                let pending = legacyStatus == "pending"
                let code = doc.int("code")
                if pending && !(100_000...999_999).contains(code ?? 0) {
                    refuse("pending without a usable 6-digit code")
                    continue
                }
                let id = LegacyMapping.stableId(collection, app.appId, legacyId)
                let createdAt = Self.date(doc, "createdAt")
                let updatedAt = doc.date("updatedAt") ?? createdAt
                let expiresAt: Date
                switch (kind, pending) {
                case (.signups, true): expiresAt = updatedAt.addingTimeInterval(48 * 3600)  // the legacy window
                case (.invites, true): expiresAt = max(updatedAt, self.options.now).addingTimeInterval(self.options.inviteValidity)
                default: expiresAt = updatedAt
                }
                guard let db else {
                    imported += 1
                    continue
                }
                if pending {
                    if kind == .signups, try await LegacyImportStore.userExists(db, appRef: ref, handle: handle.lowercased(), logger: self.logger) {
                        refuse("a user with this handle exists; the pending signup is obsolete")
                        continue
                    }
                    if let other = try await LegacyImportStore.otherPending(db, kind, appRef: ref, handle: handle.lowercased(), legacyId: legacyId, logger: self.logger) {
                        guard let otherId = other.legacyId else {
                            refuse("a pending \(kind == .signups ? "signup" : "invite") for this handle was made on this server")
                            continue
                        }
                        if self.options.duplicates == .mergeNewest && Self.newer((updatedAt, legacyId), than: (other.updatedAt, otherId)) {
                            try await LegacyImportStore.deleteImported(db, kind, appRef: ref, legacyId: otherId, logger: self.logger)
                            notes.replace(collection, otherId, app.appId, handle, "duplicate pending handle; replaced by newer legacy row \(legacyId)")
                        } else {
                            refuse("duplicate pending handle; kept legacy row \(otherId) (\(self.options.duplicates.rawValue))")
                            continue
                        }
                    }
                }
                let purpose: SealPurpose = kind == .signups ? .signupCode(id) : .inviteCode(id)
                let sealed = pending ? try self.box.seal(String(code ?? 0), purpose: purpose) : nil
                let metadata = String(decoding: try JSONCoding.encode(JSONValue.object(doc.object("metaData") ?? [:])), as: UTF8.self)
                let locale = LegacyMapping.locale(doc.string("locale"))
                let fingerprint = LegacyMapping.fingerprint(item.bytes)
                let status = pending ? "pending" : "verified"
                switch kind {
                case .signups:
                    let password = doc.string("password").flatMap { Self.isBcrypt($0) ? Self.usableBcrypt($0).hash : Self.storedFormOfRawMD5($0) }
                    try await LegacyImportStore.upsertSignup(
                        db, id: id, appRef: ref, handle: handle, passwordHash: password, codeSealed: sealed, metadata: metadata, locale: locale,
                        status: status, expiresAt: expiresAt, createdAt: createdAt, updatedAt: updatedAt, legacyId: legacyId,
                        fingerprint: fingerprint, logger: self.logger)
                case .invites:
                    try await LegacyImportStore.upsertInvite(
                        db, id: id, appRef: ref, handle: handle, senderHandle: doc.string("senderHandle") ?? "superuser",
                        senderUserId: doc.string("senderUserId") ?? "", codeSealed: sealed, metadata: metadata, locale: locale, status: status,
                        expiresAt: expiresAt, createdAt: createdAt, updatedAt: updatedAt, legacyId: legacyId, fingerprint: fingerprint,
                        logger: self.logger)
                }
                imported += 1
            }
            if let db {
                try await LegacyImportStore.setCheckpoint(db, source: self.source, collection: collection, rowsDone: lastIndex + 1, logger: self.logger)
            }
            return (imported, notes)
        }
        (importedNow, notes) = try await commitBatch(work)
        counts.imported += importedNow
        notes.tally(into: &counts)
    }

    // MARK: reset codes

    /// Legacy pending reset codes (<doc:LegacyImport> §3.5: they never expired) are carried, each valid for
    /// `resetCodeLifetime` from the import; the user types the handle or user name the legacy row
    /// holds, with the e-mailed code. A code an earlier import carried is never carried again (used or
    /// expired here, it stays gone).
    func importResetCodes(_ batch: Batch, _ counts: inout ImportSummary.Counts) async throws {
        let collection = "resetpasswords"
        let lastIndex = batch.last?.index ?? 0
        let expiresAt = options.now.addingTimeInterval(options.resetCodeLifetime)
        let work: @Sendable (PostgresConnection?) async throws -> (Int, Notes) = { db in
            var notes = Notes()
            var imported = 0
            for item in batch {
                let doc = item.doc
                guard let (app, ref) = self.owner(collection, doc, &notes) else { continue }
                let legacyId = doc.id ?? ""
                // The lower-cased handle or user name the user typed, as resetPassword reads it.
                let identifier = LegacyMapping.handle(doc.string("handle") ?? "").lowercased()
                func refuse(_ reason: String) { notes.refuse(collection, legacyId, app.appId, identifier, reason) }
                guard !legacyId.isEmpty, !identifier.isEmpty else {
                    refuse("no _id or no handle")
                    continue
                }
                guard (doc.string("status") ?? "pending") == "pending" else {
                    refuse("not pending")
                    continue
                }
                guard let code = doc.int("code"), (100_000...999_999).contains(code) else {
                    refuse("no usable 6-digit code")
                    continue
                }
                guard let db else {
                    imported += 1
                    continue
                }
                let earlier = try await LegacyImportStore.carriedResetCode(db, appRef: ref, legacyId: legacyId, logger: self.logger)
                if earlier.carried {
                    if earlier.present {
                        imported += 1  // this very row, from an earlier run
                    } else {
                        notes.add("kept", collection, legacyId, app.appId, identifier, "carried by an earlier import and since used or expired here; not carried again")
                    }
                    continue
                }
                guard let userId = try await LegacyImportStore.userForReset(db, appRef: ref, identifier: identifier, logger: self.logger) else {
                    refuse("no user of the app has this handle or user name; not carried")
                    continue
                }
                let sealed = try self.box.seal(String(code), purpose: .resetCode(appId: app.appId, identifier: identifier))
                try await LegacyImportStore.insertLegacyResetCode(
                    db, appRef: ref, userId: userId, identifier: identifier, codeSealed: sealed, expiresAt: expiresAt,
                    createdAt: Self.date(doc, "createdAt"), legacyId: legacyId, logger: self.logger)
                notes.adjust(collection, legacyId, app.appId, identifier,
                             "legacy reset codes never expired; carried valid until \(ISO8601.milliseconds(expiresAt)) (import time + \(Int(self.options.resetCodeLifetime / 60)) min)")
                imported += 1
            }
            if let db {
                try await LegacyImportStore.setCheckpoint(db, source: self.source, collection: collection, rowsDone: lastIndex + 1, logger: self.logger)
            }
            return (imported, notes)
        }
        let (importedNow, notes) = try await commitBatch(work)
        counts.imported += importedNow
        notes.tally(into: &counts)
    }

    // MARK: templates

    struct TemplateRow: Sendable {
        let legacyId: String, appId: String, ref: Int64, name: String, locale: String, subject: String, html: String, replyTo: String
        let link: String, updatedAt: Date
    }

    /// Templates: one per (app, name, locale). Duplicates follow `--duplicates` (newest `updatedAt`,
    /// or the first) and are reported; a row without a known locale is the EN one, and says so.
    func importTemplates(_ batch: Batch, _ counts: inout ImportSummary.Counts) async throws {
        var rows: [TemplateRow] = []
        var notes = Notes()
        for item in batch {
            let doc = item.doc
            guard let (app, ref) = owner("emailtemplates", doc, &notes) else { continue }
            let name = doc.string("templateName") ?? ""
            let legacyId = doc.id ?? "?"
            guard EmailTemplate.names.contains(name), let html = doc.string("htmlTemplate") else {
                notes.refuse("emailtemplates", legacyId, app.appId, nil, "unknown template name '\(name)' or no htmlTemplate")
                continue
            }
            let rawLocale = doc.string("locale")
            let locale = LegacyMapping.locale(rawLocale)
            if rawLocale?.uppercased() != locale {
                notes.adjust("emailtemplates", legacyId, app.appId, nil, "template \(name): locale '\(rawLocale ?? "")' missing or unknown; imported as \(locale)")
            }
            rows.append(TemplateRow(
                legacyId: legacyId, appId: app.appId, ref: ref, name: name, locale: locale, subject: doc.string("subject") ?? "", html: html,
                replyTo: doc.string("replyTo") ?? "", link: doc.string("localeLinkText") ?? "", updatedAt: Self.date(doc, "updatedAt")))
        }
        if options.dryRun {
            record(notes)
            notes.tally(into: &counts)
            counts.imported += rows.count
            return
        }
        let lastIndex = batch.last?.index ?? 0
        let finalRows = rows
        let newest = options.duplicates == .mergeNewest
        let (imported, allNotes) = try await client.transaction(logger: logger) { [notes] db -> (Int, Notes) in
            var imported = 0
            var notes = notes
            for r in finalRows {
                if let existing = try await LegacyImportStore.template(db, appRef: r.ref, name: r.name, locale: r.locale, logger: self.logger) {
                    let same = existing.updatedAt == r.updatedAt && existing.subject == r.subject && existing.html == r.html
                        && existing.replyTo == r.replyTo && existing.link == r.link
                    if same { imported += 1; continue }  // this very row, from an earlier run
                    guard newest && r.updatedAt > existing.updatedAt else {
                        notes.refuse("emailtemplates", r.legacyId, r.appId, nil,
                                     "duplicate template \(r.name)/\(r.locale); kept the \(newest ? "newer" : "first") row")
                        continue
                    }
                    notes.replace("emailtemplates", r.legacyId, r.appId, nil,
                                  "duplicate template \(r.name)/\(r.locale); this newer row replaced an older one")
                }
                try await LegacyImportStore.upsertTemplate(
                    db, appRef: r.ref, template: r.name, locale: r.locale, subject: r.subject, html: r.html, replyTo: r.replyTo,
                    localeLinkText: r.link, updatedAt: r.updatedAt, logger: self.logger)
                imported += 1
            }
            self.record(notes)
            try await self.flushReport(db)
            try await LegacyImportStore.setCheckpoint(db, source: self.source, collection: "emailtemplates", rowsDone: lastIndex + 1, logger: self.logger)
            return (imported, notes)
        }
        counts.imported += imported
        allNotes.tally(into: &counts)
    }
}

/// A value in COPY's text format: backslash, tab, newline and carriage return escaped, the rest as is.
enum CopyText {
    static func write(_ text: String, into buffer: inout ByteBuffer) {
        var text = text
        text.withUTF8 { bytes in
            guard bytes.contains(where: { $0 == UInt8(ascii: "\\") || $0 == UInt8(ascii: "\t") || $0 == UInt8(ascii: "\n") || $0 == UInt8(ascii: "\r") })
            else {
                buffer.writeBytes(bytes)
                return
            }
            for byte in bytes {
                switch byte {
                case UInt8(ascii: "\\"): buffer.writeStaticString("\\\\")
                case UInt8(ascii: "\t"): buffer.writeStaticString("\\t")
                case UInt8(ascii: "\n"): buffer.writeStaticString("\\n")
                case UInt8(ascii: "\r"): buffer.writeStaticString("\\r")
                default: buffer.writeInteger(byte)
                }
            }
        }
    }
}
