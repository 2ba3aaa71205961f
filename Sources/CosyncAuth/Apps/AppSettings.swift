/// Every non-secret setting of an app, with the legacy defaults (<doc:LegacyImport> §2.1). Stored as
/// one jsonb document; a key missing from a stored document takes its default, so adding a setting
/// needs no data migration.
public struct AppSettings: Codable, Sendable, Equatable {
    public enum SignupFlow: String, Codable, Sendable, CaseIterable { case none, link, code }
    public enum TwoFactorMode: String, Codable, Sendable, CaseIterable { case none, phone, google }

    public var signupFlow: SignupFlow = .code
    public var signupEnabled = true
    public var invitationEnabled = true
    public var passwordFilter = false
    public var passwordMinLength = 5
    public var passwordMinUpper = 0
    public var passwordMinLower = 0
    public var passwordMinDigit = 0
    public var passwordMinSpecial = 0
    public var twoFactorVerification: TwoFactorMode = .none
    public var anonymousLoginEnabled = false
    public var userNamesEnabled = false
    public var appleLoginEnabled = false
    public var appleBundleId = ""
    public var googleLoginEnabled = false
    public var googleClientId = ""
    public var googleAppName = ""
    public var locales: [String] = [Locales.defaultLocale]
    public var metaData: [MetaDataField] = []
    public var metaDataInvite: [MetaDataField] = []
    public var metaDataEmail = true
    public var userJWTExpiration = 24
    public var realmAppId = ""
    public var appData: [String: JSONValue] = [:]
    public var maxLoginAttempts = 10
    public var handle = "email"
    public var jwtEnabled = false
    public var emailExtension = false
    public var emailExtensionSenderEmail = ""
    /// SMS the app may queue per UTC day (phone verification and SMS login codes); beyond it the
    /// request fails and nothing is sent. A guard against SMS pumping fraud.
    public var smsDailyLimit = 200
    /// Destructive end-user steps (deleting the account with a provider token) need a sign-in at most
    /// this many minutes old. The password mode re-checks the password, which counts as fresh.
    public var freshAuthMinutes = 5

    // AppKey (the passkey product): the WebAuthn relying party and the passkey rules.
    public enum UserVerification: String, Codable, Sendable, CaseIterable { case required, preferred, discouraged }
    public enum AttestationPolicy: String, Codable, Sendable, CaseIterable { case none, optional, required }
    public enum CounterRegression: String, Codable, Sendable, CaseIterable { case refuse, flag }
    public enum HandleType: String, Codable, Sendable, CaseIterable { case email, phone, both }
    /// The RP ID (a registrable domain, e.g. `demo.example.com`); empty: passkeys cannot be used yet.
    public var rpId = ""
    /// The name the passkey sheet shows; empty: the app's name.
    public var rpName = ""
    /// Exact origins accepted in clientDataJSON; empty: `https://<rpId>` only.
    public var allowedOrigins: [String] = []
    public var userVerification: UserVerification = .required
    public var attestation: AttestationPolicy = .none
    /// Attestation trust anchors (X.509 certificates, standard base64 of DER); empty: none checked.
    public var trustAnchors: [String] = []
    public var passkeysPerUser = 10
    /// How long a WebAuthn challenge can be answered, in seconds (60–600).
    public var challengeLifetimeSeconds = 300
    /// A sign counter that did not grow: refuse the assertion, or accept it and flag the passkey.
    public var counterRegression: CounterRegression = .refuse
    /// What an AppKey signup handle may be.
    public var handleType: HandleType = .email
    /// Life of the code of an AppKey signup (signupConfirm → signupComplete), in seconds.
    public var signupCodeLifetimeSeconds = 3600

    public init() {}

    enum CodingKeys: String, CodingKey, CaseIterable {
        case signupFlow, signupEnabled, invitationEnabled, passwordFilter, passwordMinLength, passwordMinUpper
        case passwordMinLower, passwordMinDigit, passwordMinSpecial, twoFactorVerification, anonymousLoginEnabled
        case userNamesEnabled, appleLoginEnabled, appleBundleId, googleLoginEnabled, googleClientId, googleAppName
        case locales, metaData, metaDataInvite, metaDataEmail, userJWTExpiration, realmAppId, appData
        case maxLoginAttempts, handle, jwtEnabled, emailExtension, emailExtensionSenderEmail, smsDailyLimit
        case freshAuthMinutes
        case rpId, rpName, allowedOrigins, userVerification, attestation, trustAnchors, passkeysPerUser
        case challengeLifetimeSeconds, counterRegression, handleType, signupCodeLifetimeSeconds
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let d = AppSettings()
        func value<T: Decodable>(_ key: CodingKeys, _ fallback: T) throws -> T {
            try c.decodeIfPresent(T.self, forKey: key) ?? fallback
        }
        signupFlow = try value(.signupFlow, d.signupFlow)
        signupEnabled = try value(.signupEnabled, d.signupEnabled)
        invitationEnabled = try value(.invitationEnabled, d.invitationEnabled)
        passwordFilter = try value(.passwordFilter, d.passwordFilter)
        passwordMinLength = try value(.passwordMinLength, d.passwordMinLength)
        passwordMinUpper = try value(.passwordMinUpper, d.passwordMinUpper)
        passwordMinLower = try value(.passwordMinLower, d.passwordMinLower)
        passwordMinDigit = try value(.passwordMinDigit, d.passwordMinDigit)
        passwordMinSpecial = try value(.passwordMinSpecial, d.passwordMinSpecial)
        twoFactorVerification = try value(.twoFactorVerification, d.twoFactorVerification)
        anonymousLoginEnabled = try value(.anonymousLoginEnabled, d.anonymousLoginEnabled)
        userNamesEnabled = try value(.userNamesEnabled, d.userNamesEnabled)
        appleLoginEnabled = try value(.appleLoginEnabled, d.appleLoginEnabled)
        appleBundleId = try value(.appleBundleId, d.appleBundleId)
        googleLoginEnabled = try value(.googleLoginEnabled, d.googleLoginEnabled)
        googleClientId = try value(.googleClientId, d.googleClientId)
        googleAppName = try value(.googleAppName, d.googleAppName)
        locales = try value(.locales, d.locales)
        metaData = try value(.metaData, d.metaData)
        metaDataInvite = try value(.metaDataInvite, d.metaDataInvite)
        metaDataEmail = try value(.metaDataEmail, d.metaDataEmail)
        userJWTExpiration = try value(.userJWTExpiration, d.userJWTExpiration)
        realmAppId = try value(.realmAppId, d.realmAppId)
        appData = try value(.appData, d.appData)
        maxLoginAttempts = try value(.maxLoginAttempts, d.maxLoginAttempts)
        handle = try value(.handle, d.handle)
        jwtEnabled = try value(.jwtEnabled, d.jwtEnabled)
        emailExtension = try value(.emailExtension, d.emailExtension)
        emailExtensionSenderEmail = try value(.emailExtensionSenderEmail, d.emailExtensionSenderEmail)
        smsDailyLimit = try value(.smsDailyLimit, d.smsDailyLimit)
        freshAuthMinutes = try value(.freshAuthMinutes, d.freshAuthMinutes)
        rpId = try value(.rpId, d.rpId)
        rpName = try value(.rpName, d.rpName)
        allowedOrigins = try value(.allowedOrigins, d.allowedOrigins)
        userVerification = try value(.userVerification, d.userVerification)
        attestation = try value(.attestation, d.attestation)
        trustAnchors = try value(.trustAnchors, d.trustAnchors)
        passkeysPerUser = try value(.passkeysPerUser, d.passkeysPerUser)
        challengeLifetimeSeconds = try value(.challengeLifetimeSeconds, d.challengeLifetimeSeconds)
        counterRegression = try value(.counterRegression, d.counterRegression)
        handleType = try value(.handleType, d.handleType)
        signupCodeLifetimeSeconds = try value(.signupCodeLifetimeSeconds, d.signupCodeLifetimeSeconds)
    }

    /// The origins a WebAuthn response may come from.
    public var effectiveOrigins: [String] {
        allowedOrigins.isEmpty ? (rpId.isEmpty ? [] : ["https://\(rpId)"]) : allowedOrigins
    }
}

/// Provider credentials: write-only through the API, sealed at rest, never returned.
public struct ProviderCredentials: Codable, Sendable, Equatable {
    public var TWILIOAccountSid: String?
    public var TWILIOToken: String?
    public var TWILIOPhoneNumber: String?
    public var emailExtensionAPIKey: String?

    public init() {}

    public static let fieldNames = ["TWILIOAccountSid", "TWILIOToken", "TWILIOPhoneNumber", "emailExtensionAPIKey"]

    public var isEmpty: Bool {
        TWILIOAccountSid == nil && TWILIOToken == nil && TWILIOPhoneNumber == nil && emailExtensionAPIKey == nil
    }

    /// What a GET may show: whether each credential is set.
    public var presence: [String: Bool] {
        [
            "TWILIOAccountSid": TWILIOAccountSid != nil, "TWILIOToken": TWILIOToken != nil,
            "TWILIOPhoneNumber": TWILIOPhoneNumber != nil, "emailExtensionAPIKey": emailExtensionAPIKey != nil,
        ]
    }
}
