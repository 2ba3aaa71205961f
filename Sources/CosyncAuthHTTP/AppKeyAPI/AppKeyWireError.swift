import CosyncAuth

/// The AppKey API's error on the wire: HTTP 400 with `{"code": <int>, "message": <string>}` (<doc:AppKeyAPI> §3).
/// The codes are the ones the AppKeySwift client maps to its `AppKeyError` cases.
enum AppKeyWireError {
    /// The code and message answered for an error: its own message when the flow gave one, else the standard one.
    static func body(_ error: AppKeyError) -> (code: Int, message: String) {
        let (code, message) = table(error.kind)
        return (code, error.detail ?? message)
    }

    /// The one mapping of AppKey error kinds to their wire codes and standard messages.
    static func table(_ kind: AppKeyError.Kind) -> (Int, String) {
        switch kind {
        case .invalidAppToken: (400, "invalid app token")
        case .appNotFound: (401, "app no longer exists")
        case .appSuspended: (402, "app is suspended")
        case .missingParameter: (403, "missing parameter")
        case .accountSuspended: (404, "user account is suspended")
        case .invalidAccessToken: (405, "invalid access token")
        case .signupNotSupported: (407, "app does not support signup")
        case .signupExpired: (411, "signup code expired")
        case .appMigrated: (413, "app is migrated")
        case .anonymousNotSupported: (414, "app does not support anonymous login")
        case .appleNotSupported: (415, "app does not support Apple Authentication")
        case .googleNotSupported: (416, "app does not support Google Authentication")
        case .internalError: (500, "internal server error")
        case .rateLimited: (500, "too many requests for this handle or address; try again later")
        case .smsLimitReached: (500, "SMS limit reached; try again later")
        case .invalidLoginCredentials: (600, "invalid login credentials")
        case .handleAlreadyRegistered: (601, "handle already registered")
        case .invalidData: (602, "invalid data")
        case .accountDoesNotExist: (603, "account does not exist")
        case .invalidMetaData: (604, "the user JWT could not be built")
        case .userNameInUse: (605, "user name already in use")
        case .userNamesNotSupported: (606, "app does not support user names")
        case .userNameDoesNotExist: (607, "user name does not exist")
        case .accountNotVerified: (608, "account has not been verified")
        case .invalidLocale: (609, "invalid locale")
        case .emailAccountExists: (610, "a passkey account exists for this e-mail")
        case .appleAccountExists: (611, "Apple account already exists")
        case .googleAccountExists: (612, "Google account already exists")
        case .invalidToken: (613, "token is invalid")
        case .passkeyNotExist: (614, "passkey does not exist")
        case .invalidPasskey: (615, "invalid passkey")
        case .invalidHandleFormat: (617, "invalid handle format")
        }
    }
}
