import Foundation
import PostgresNIO

// `GET getUser`.

extension EndUserFlows {
    /// `GET getUser` (<doc:EndUserAPI> §5.15): the fields the SDK reads, dates with milliseconds.
    public func getUser(caller: AuthenticatedCaller) async throws -> [String: JSONValue] {
        let (app, user) = (caller.app, caller.user)
        try requireActive(app)
        try requireActiveUser(user)
        var object: [String: JSONValue] = [
            "handle": .string(user.handle), "loginProvider": .string(user.loginProvider), "locale": .string(user.locale),
            "twoFactorPhoneVerification": .bool(user.twoFactorPhone), "twoFactorGoogleVerification": .bool(user.twoFactorGoogle),
            "appId": .string(app.appId), "phoneVerified": .bool(user.phoneVerified), "metaData": .object(user.metaData),
            "status": .string(user.status.rawValue), "createdAt": .string(ISO8601.milliseconds(user.createdAt)),
            "updatedAt": .string(ISO8601.milliseconds(user.updatedAt)),
        ]
        if let userName = user.userName { object["userName"] = .string(userName) }
        if let phone = user.phone { object["phone"] = .string(phone) }
        if let lastLogin = user.lastLogin { object["lastLogin"] = .string(ISO8601.milliseconds(lastLogin)) }
        return object
    }
}
