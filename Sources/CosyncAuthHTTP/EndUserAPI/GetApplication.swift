import CosyncAuth
import Hummingbird

/// `GET /api/appuser/getApplication` (<doc:EndUserAPI> §5.1): the app's public settings, whitelisted.
/// Never a secret. Answers for a suspended app too.
struct GetApplication {
    let services: CosyncServices

    func register(on router: Router<ServerRequestContext>) {
        router.group("api/appuser").add(middleware: LegacyErrorMiddleware()).get("getApplication", use: handle)
    }

    @Sendable func handle(_ request: Request, context: ServerRequestContext) async throws -> Response {
        let token = LegacyHeaders.value("app-token", in: request.headers) ?? request.uri.queryParameters["appToken"].map(String.init)
        let app = try await services.resolver.app(token: token, whenMissing: .invalidData)
        return JSONBody.response(Self.publicSettings(app))
    }

    /// The ✔ fields of <doc:EndUserAPI> §5.1 plus the recommended extras; nothing secret.
    static func publicSettings(_ app: App) -> [String: JSONValue] {
        let s = app.settings
        let status = app.status.legacyName
        let fields: [String: JSONValue] = [
            "name": .string(app.name), "status": .string(status),
            "signupEnabled": .bool(s.signupEnabled), "invitationEnabled": .bool(s.invitationEnabled),
            "signupFlow": .string(s.signupFlow.rawValue), "anonymousLoginEnabled": .bool(s.anonymousLoginEnabled),
            "userNamesEnabled": .bool(s.userNamesEnabled), "googleLoginEnabled": .bool(s.googleLoginEnabled),
            "appleLoginEnabled": .bool(s.appleLoginEnabled), "twoFactorVerification": .string(s.twoFactorVerification.rawValue),
            "passwordFilter": .bool(s.passwordFilter), "passwordMinLength": .int(s.passwordMinLength),
            "passwordMinUpper": .int(s.passwordMinUpper), "passwordMinLower": .int(s.passwordMinLower),
            "passwordMinDigit": .int(s.passwordMinDigit), "passwordMinSpecial": .int(s.passwordMinSpecial),
            "appData": .object(s.appData), "locales": .array(s.locales.map { .string($0) }),
            "userJWTExpiration": .int(s.userJWTExpiration), "realmAppId": .string(s.realmAppId),
            "metaData": (try? JSONCoding.tree(s.metaData)) ?? .array([]),
            "metaDataInvite": (try? JSONCoding.tree(s.metaDataInvite)) ?? .array([]),
            "metaDataEmail": .bool(s.metaDataEmail), "handle": .string(s.handle),
            "createdAt": .string(ISO8601.milliseconds(app.createdAt)), "updatedAt": .string(ISO8601.milliseconds(app.updatedAt)),
        ]
        return fields
    }
}
