/// An error of the AppKey API (<doc:AppKeyAPI> §3): what went wrong, and optionally a more precise
/// message than the standard one. The wire codes and standard messages (the ones the AppKeySwift
/// client maps to its `AppKeyError` cases) live in the HTTP module, in one table.
public struct AppKeyError: Error, Equatable, Sendable, CustomStringConvertible {
    /// What went wrong; each kind has one wire code and standard message.
    public enum Kind: String, Sendable, Equatable, CaseIterable {
        case invalidAppToken, appNotFound, appSuspended, missingParameter, accountSuspended, invalidAccessToken, signupNotSupported
        case signupExpired, appMigrated, anonymousNotSupported, appleNotSupported, googleNotSupported, internalError, rateLimited
        case smsLimitReached, invalidLoginCredentials, handleAlreadyRegistered, invalidData, accountDoesNotExist, invalidMetaData
        case userNameInUse, userNamesNotSupported, userNameDoesNotExist, accountNotVerified, invalidLocale, emailAccountExists
        case appleAccountExists, googleAccountExists, invalidToken, passkeyNotExist, invalidPasskey, invalidHandleFormat
    }

    public let kind: Kind
    /// The message to answer instead of the kind's standard one; nil for the standard one.
    public let detail: String?

    /// Labelled: an unlabelled `AppKeyError(.x)` would also match `init(_: EndUserError)`, whose cases
    /// share many names, and a static below calling that one back would initialise itself (a hang).
    public init(kind: Kind, detail: String? = nil) {
        self.kind = kind
        self.detail = detail
    }

    public var description: String { detail.map { "\(kind.rawValue): \($0)" } ?? kind.rawValue }

    /// The same kind with a more precise message.
    public func with(_ message: String) -> AppKeyError { AppKeyError(kind: kind, detail: message) }

    public static let invalidAppToken = AppKeyError(kind: .invalidAppToken)
    public static let appNotFound = AppKeyError(kind: .appNotFound)
    public static let appSuspended = AppKeyError(kind: .appSuspended)
    public static let missingParameter = AppKeyError(kind: .missingParameter)
    public static let accountSuspended = AppKeyError(kind: .accountSuspended)
    public static let invalidAccessToken = AppKeyError(kind: .invalidAccessToken)
    public static let signupNotSupported = AppKeyError(kind: .signupNotSupported)
    public static let signupExpired = AppKeyError(kind: .signupExpired)
    public static let appMigrated = AppKeyError(kind: .appMigrated)
    public static let anonymousNotSupported = AppKeyError(kind: .anonymousNotSupported)
    public static let appleNotSupported = AppKeyError(kind: .appleNotSupported)
    public static let googleNotSupported = AppKeyError(kind: .googleNotSupported)
    public static let internalError = AppKeyError(kind: .internalError)
    public static let rateLimited = AppKeyError(kind: .rateLimited)
    public static let smsLimitReached = AppKeyError(kind: .smsLimitReached)
    public static let invalidLoginCredentials = AppKeyError(kind: .invalidLoginCredentials)
    public static let handleAlreadyRegistered = AppKeyError(kind: .handleAlreadyRegistered)
    public static let invalidData = AppKeyError(kind: .invalidData)
    public static let accountDoesNotExist = AppKeyError(kind: .accountDoesNotExist)
    public static let invalidMetaData = AppKeyError(kind: .invalidMetaData)
    public static let userNameInUse = AppKeyError(kind: .userNameInUse)
    public static let userNamesNotSupported = AppKeyError(kind: .userNamesNotSupported)
    public static let userNameDoesNotExist = AppKeyError(kind: .userNameDoesNotExist)
    public static let accountNotVerified = AppKeyError(kind: .accountNotVerified)
    public static let invalidLocale = AppKeyError(kind: .invalidLocale)
    public static let emailAccountExists = AppKeyError(kind: .emailAccountExists)
    public static let appleAccountExists = AppKeyError(kind: .appleAccountExists)
    public static let googleAccountExists = AppKeyError(kind: .googleAccountExists)
    public static let invalidToken = AppKeyError(kind: .invalidToken)
    public static let passkeyNotExist = AppKeyError(kind: .passkeyNotExist)
    public static let invalidPasskey = AppKeyError(kind: .invalidPasskey)
    public static let invalidHandleFormat = AppKeyError(kind: .invalidHandleFormat)
    /// A sensitive change whose caller has not proven itself recently enough (`StepUp`).
    public static let freshSignInRequired = AppKeyError(kind: .invalidAccessToken, detail: "a fresh sign-in is required: verify first")

    /// The AppKey error of a CosyncAuth flow error (shared helpers throw those).
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
        case .smsLimitReached: .smsLimitReached
        case .rateLimited: .rateLimited
        default: .internalError
        }
    }
}
