import CosyncAuth
import Hummingbird

/// The end-user API's error: HTTP 400 with `{"code": <int>, "message": <string>}` (<doc:EndUserAPI> §3).
/// The codes and messages are the legacy ones the shipped SDKs map.
struct LegacyError: HTTPResponseError, Equatable {
    let code: Int
    let message: String

    var status: HTTPResponse.Status { .badRequest }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        JSONBody.response(["code": .int(code), "message": .string(message)], status: .badRequest)
    }

    static let invalidAppToken = LegacyError(.invalidAppToken)
    static let internalError = LegacyError(.internalError)
    static let invalidData = LegacyError(.invalidData)

    init(code: Int, message: String) {
        self.code = code
        self.message = message
    }

    init(_ error: EndUserError) {
        let (code, message) = Self.table(error)
        self.init(code: code, message: message)
    }

    /// The one mapping of typed errors to the legacy codes and messages (<doc:EndUserAPI> §3.1).
    static func table(_ error: EndUserError) -> (Int, String) {
        switch error {
        case .invalidAppToken: (400, "invalid app token")
        case .appNotFound: (401, "app no longer exist")
        case .appSuspended: (402, "app is suspended")
        case .missingParameter: (403, "missing parameter")
        case .userSuspended: (404, "user account is suspended")
        case .invalidAccessToken: (405, "invalid access token")
        case .invitationDisabled: (406, "app does not support invitaion")
        case .signupDisabled: (407, "app does not support signup")
        case .googleTwoFactorDisabled: (408, "app does not support google two-factor verification")
        case .phoneTwoFactorDisabled: (409, "app does not support phone two-factor verification")
        case .phoneNotVerified: (410, "user does not have verified phone number")
        case .signupCodeExpired: (411, "signup code expired.")
        case .phoneInUse: (412, "phone number already in use")
        case .appMigrated: (413, "app is migrated")
        case .anonymousLoginDisabled: (414, "app does not support anonymous login")
        case .appleLoginDisabled: (415, "app does not support Apple Authentication")
        case .googleLoginDisabled: (416, "app does not support Google Authentication")
        case .internalError: (500, "internal server error")
        case .smsLimitReached: (500, "SMS limit reached (the app's daily limit or this number's hourly limit); try again later")
        case .rateLimited: (500, "too many requests for this account or address; try again later")
        case .invalidCredentials: (600, "invalid login credentials")
        case .handleAlreadyRegistered: (601, "handle already registered")
        case .invalidData: (602, "invalid data")
        case .accountDoesNotExist: (603, "account does not exist")
        case .invalidMetadata: (604, "invalid metadata")
        case .userNameInUse: (605, "user name already assigned")
        case .userNamesDisabled: (606, "app does not support username login")
        case .accountNotVerified: (608, "account has not been verified")
        case .emailAccountExists: (610, "email account already exist")
        case .appleAccountExists: (611, "Apple account already exist")
        case .googleAccountExists: (612, "Google account already exist")
        case .invalidSocialToken: (613, "token is invalid")
        }
    }
}

/// Header lookups by lower-case name (`app-token`, `access-token`).
enum LegacyHeaders {
    static func value(_ name: String, in headers: HTTPFields) -> String? {
        headers.first(where: { $0.name.canonicalName == name })?.value
    }
}
