import Foundation
import Logging
import PostgresNIO

// `POST setUserMetadata`.

/// `POST setUserMetadata` (<doc:EndUserAPI> §5.23, recommended rules of <doc:EndUserAPI> §9.4).
/// The contract checks `metaData` before the token, so the caller is resolved only after it.
struct SetMetadata: Sendable {
    let client: PostgresClient
    let accounts: Accounts
    let audit: UserAudit
    let logger: Logger

    func run(caller resolve: () async throws -> AuthenticatedCaller, fields: Fields) async throws {
        guard let parsed = Metadata.parse(fields["metaData"]), let input = parsed else { throw EndUserError.invalidData }
        let caller = try await resolve()
        let (app, user) = (caller.app, caller.user)
        try Gates.requireActive(app)
        try Gates.requireActiveUser(user)
        guard !app.settings.metaData.isEmpty else { throw EndUserError.invalidData }
        try await client.transaction(logger: logger) { db in
            // Merged into the metadata as it is now, under the row's lock: two concurrent updates of
            // different keys both land (merging into the token's snapshot lost one), and a user
            // deleted meanwhile is refused.
            let current = try await accounts.lockCaller(db, app: app, userId: user.id)
            let updated = try Metadata.update(current.metaData, with: input, fields: app.settings.metaData)
            try await UserStore.setMetadata(db, userId: user.id, metadata: updated, logger: logger)
            try await audit.record(db, app: app, handle: user.handle, action: "setUserMetadata")
            try await Events.record(db, app: app, type: .userUpdated, user: user, data: ["fields": .array([.string("metaData")])], logger: logger)
        }
    }
}

extension EndUserFlows {
    public func setUserMetadata(caller resolve: () async throws -> AuthenticatedCaller, fields: Fields) async throws {
        try await SetMetadata(client: client, accounts: accounts, audit: userAudit, logger: logger).run(caller: resolve, fields: fields)
    }
}
