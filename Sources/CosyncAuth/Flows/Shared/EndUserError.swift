/// What can go wrong in an end-user flow. Flows throw these; the end-user API maps each to its legacy
/// numeric code in one table (<doc:EndUserAPI> §3.1).
public enum EndUserError: Error, Equatable, Sendable {
    case invalidAppToken            // 400
    case appNotFound                // 401
    case appSuspended               // 402
    case missingParameter           // 403
    case userSuspended              // 404
    case invalidAccessToken         // 405
    case invitationDisabled         // 406
    case signupDisabled             // 407
    case googleTwoFactorDisabled    // 408
    case phoneTwoFactorDisabled     // 409
    case phoneNotVerified           // 410
    case signupCodeExpired          // 411
    case phoneInUse                 // 412
    case appMigrated                // 413
    case anonymousLoginDisabled     // 414
    case appleLoginDisabled         // 415
    case googleLoginDisabled        // 416
    case internalError              // 500
    case smsLimitReached            // 500: the app's smsDailyLimit is used up; nothing was sent
    case rateLimited                // 500: too many requests for this account or address; nothing was sent
    case invalidCredentials         // 600 (also while a login is locked out)
    case handleAlreadyRegistered    // 601
    case invalidData                // 602
    case accountDoesNotExist        // 603
    case invalidMetadata            // 604
    case userNameInUse              // 605
    case userNamesDisabled          // 606
    case accountNotVerified         // 608
    case emailAccountExists         // 610
    case appleAccountExists         // 611
    case googleAccountExists        // 612
    case invalidSocialToken         // 613
}
