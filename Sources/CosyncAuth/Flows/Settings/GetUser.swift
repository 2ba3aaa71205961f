import Foundation

// `GET getUser`.

/// `GET getUser` (<doc:EndUserAPI> §5.15): the caller's user, once the app and the user are active.
/// The HTTP edge shapes the answer (`EndUserRoutes.getUserBody`). It needs nothing but the caller.
enum GetUser {
    static func run(caller: AuthenticatedCaller) throws -> User {
        try Gates.requireActive(caller.app)
        try Gates.requireActiveUser(caller.user)
        return caller.user
    }
}

extension EndUserFlows {
    public func getUser(caller: AuthenticatedCaller) throws -> User { try GetUser.run(caller: caller) }
}
