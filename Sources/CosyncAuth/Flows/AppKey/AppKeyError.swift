/// An error of the AppKey API: HTTP 400 with `{"code": <int>, "message": <string>}` (<doc:AppKeyAPI> §3).
/// The codes are the ones the AppKeySwift client maps to its `AppKeyError` cases.
public struct AppKeyError: Error, Equatable, Sendable, CustomStringConvertible {
    public let code: Int
    public let message: String

    public init(_ code: Int, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code) \(message)" }

    /// The same code with a more precise message.
    public func with(_ message: String) -> AppKeyError { AppKeyError(code, message) }

    public static let invalidAppToken = AppKeyError(400, "invalid app token")
    public static let appNotFound = AppKeyError(401, "app no longer exists")
    public static let appSuspended = AppKeyError(402, "app is suspended")
    public static let missingParameter = AppKeyError(403, "missing parameter")
    public static let accountSuspended = AppKeyError(404, "user account is suspended")
    public static let invalidAccessToken = AppKeyError(405, "invalid access token")
    public static let signupNotSupported = AppKeyError(407, "app does not support signup")
    public static let signupExpired = AppKeyError(411, "signup code expired")
    public static let appMigrated = AppKeyError(413, "app is migrated")
    public static let anonymousNotSupported = AppKeyError(414, "app does not support anonymous login")
    public static let appleNotSupported = AppKeyError(415, "app does not support Apple Authentication")
    public static let googleNotSupported = AppKeyError(416, "app does not support Google Authentication")
    public static let internalError = AppKeyError(500, "internal server error")
    public static let rateLimited = AppKeyError(500, "too many requests for this handle or address; try again later")
    public static let invalidLoginCredentials = AppKeyError(600, "invalid login credentials")
    public static let handleAlreadyRegistered = AppKeyError(601, "handle already registered")
    public static let invalidData = AppKeyError(602, "invalid data")
    public static let accountDoesNotExist = AppKeyError(603, "account does not exist")
    public static let invalidMetaData = AppKeyError(604, "the user JWT could not be built")
    public static let userNameInUse = AppKeyError(605, "user name already in use")
    public static let userNamesNotSupported = AppKeyError(606, "app does not support user names")
    public static let userNameDoesNotExist = AppKeyError(607, "user name does not exist")
    public static let accountNotVerified = AppKeyError(608, "account has not been verified")
    public static let invalidLocale = AppKeyError(609, "invalid locale")
    public static let emailAccountExists = AppKeyError(610, "a passkey account exists for this e-mail")
    public static let appleAccountExists = AppKeyError(611, "Apple account already exists")
    public static let googleAccountExists = AppKeyError(612, "Google account already exists")
    public static let invalidToken = AppKeyError(613, "token is invalid")
    public static let passkeyNotExist = AppKeyError(614, "passkey does not exist")
    public static let invalidPasskey = AppKeyError(615, "invalid passkey")
    public static let invalidHandleFormat = AppKeyError(617, "invalid handle format")

    /// The AppKey code of a CosyncAuth flow error (shared helpers throw those).
    public init(_ error: EndUserError) {
        self = switch error {
        case .invalidAppToken: .invalidAppToken
        case .appNotFound: .appNotFound
        case .appSuspended: .appSuspended
        case .missingParameter: .missingParameter
        case .userSuspended: .accountSuspended
        case .invalidAccessToken: .invalidAccessToken
        case .signupDisabled: .signupNotSupported
        case .signupCodeExpired: .signupExpired
        case .appMigrated: .appMigrated
        case .anonymousLoginDisabled: .anonymousNotSupported
        case .appleLoginDisabled: .appleNotSupported
        case .googleLoginDisabled: .googleNotSupported
        case .invalidCredentials: .invalidLoginCredentials
        case .handleAlreadyRegistered: .handleAlreadyRegistered
        case .invalidData: .invalidData
        case .accountDoesNotExist: .accountDoesNotExist
        case .invalidMetadata: .invalidMetaData
        case .userNameInUse: .userNameInUse
        case .userNamesDisabled: .userNamesNotSupported
        case .accountNotVerified: .accountNotVerified
        case .emailAccountExists: .emailAccountExists
        case .appleAccountExists: .appleAccountExists
        case .googleAccountExists: .googleAccountExists
        case .invalidSocialToken: .invalidToken
        case .smsLimitReached: AppKeyError(500, "SMS limit reached; try again later")
        case .rateLimited: .rateLimited
        default: .internalError
        }
    }
}
