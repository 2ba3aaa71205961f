import Foundation
import Logging
import PostgresNIO

/// Admin operations on the sessions of one user: list, end one, end all ("sign out everywhere").
extension UserAdministration {
    public func sessions(app: App, userId: String) async throws -> [Session] {
        guard let id = UUID(uuidString: userId) else { throw AdminFailure.notFound("user") }
        return try await client.withConnection { db in
            guard try await UserStore.find(db, appRef: app.ref, id: id, logger: logger) != nil else { throw AdminFailure.notFound("user") }
            return try await SessionStore.list(db, appRef: app.ref, userId: id, logger: logger)
        }
    }

    public func endSession(app: App, userId: String, sessionId: String, actor: String) async throws {
        guard let id = UUID(uuidString: userId) else { throw AdminFailure.notFound("user") }
        guard let session = UUID(uuidString: sessionId) else { throw AdminFailure.notFound("session") }
        try await client.transaction(logger: logger) { db in
            guard try await SessionStore.delete(db, appRef: app.ref, userId: id, sessionId: session, logger: logger) else {
                throw AdminFailure.notFound("session")
            }
            try await Events.record(
                db, app: app, type: .sessionRevoked, userId: id,
                data: ["sessionIds": .array([.string(session.uuidString.lowercased())]), "reason": .string("admin"), "actor": .string(actor)],
                logger: logger)
            try await AuditLog.record(
                db, appRef: app.ref, appId: app.appId, actor: actor, action: "session.revoke",
                detail: ["userId": .string(id.uuidString.lowercased()), "sessionId": .string(session.uuidString.lowercased())],
                logger: logger)
        }
    }

    /// Ends every session of the user and every session-less token (legacy or older); returns how
    /// many sessions ended.
    public func endAllSessions(app: App, userId: String, actor: String) async throws -> Int {
        guard let id = UUID(uuidString: userId) else { throw AdminFailure.notFound("user") }
        return try await client.transaction(logger: logger) { db in
            guard let ended = try await UserWrites.revokeAll(db, appRef: app.ref, id: id, logger: logger) else {
                throw AdminFailure.notFound("user")
            }
            try await Events.record(
                db, app: app, type: .sessionRevoked, userId: id,
                data: ["sessionIds": .array(ended.map { .string($0.uuidString.lowercased()) }), "reason": .string("sign_out_everywhere"),
                       "actor": .string(actor)],
                logger: logger)
            try await AuditLog.record(
                db, appRef: app.ref, appId: app.appId, actor: actor, action: "session.revokeAll",
                detail: ["userId": .string(id.uuidString.lowercased()), "sessions": .int(ended.count)], logger: logger)
            return ended.count
        }
    }
}

extension Session {
}
