import Foundation
import PostgresNIO

// `GET getUser`.

extension EndUserFlows {
    /// `GET getUser` (<doc:EndUserAPI> §5.15): the caller's user, once the app and the user are active.
    /// The HTTP edge shapes the answer (`EndUserRoutes.getUserBody`).
    public func getUser(caller: AuthenticatedCaller) throws -> User {
        try requireActive(caller.app)
        try requireActiveUser(caller.user)
        return caller.user
    }
}
