import CosyncAuth
import Foundation
import Hummingbird
import NIOConcurrencyHelpers

/// `GET /api/appuser/getApplication` (<doc:EndUserAPI> §5.1): the app's public settings, whitelisted.
/// Never a secret. Answers for a suspended app too.
struct GetApplication {
    let services: CosyncServices
    let bodies = EncodedBodies()

    func register(on router: Router<ServerRequestContext>) {
        router.group("api/appuser").add(middleware: LegacyErrorMiddleware()).get("getApplication", use: handle)
    }

    @Sendable func handle(_ request: Request, context: ServerRequestContext) async throws -> Response {
        // No token at all is E602; an empty one names no app (E400), as the legacy server answered.
        guard let token = LegacyHeaders.value("app-token", in: request.headers) ?? request.uri.queryParameters["appToken"].map(String.init)
        else { throw LegacyError.invalidData }
        let app = try await services.resolver.app(token: token, whenMissing: .invalidAppToken)
        let body = bodies.body(for: app) { (try? JSONCoding.encode(JSONValue.object(Self.publicSettings($0)))) ?? Data("{}".utf8) }
        return Response(
            status: .ok, headers: [.contentType: "application/json; charset=utf-8"], body: ResponseBody(byteBuffer: ByteBuffer(bytes: body)))
    }

    /// The encoded answer per app, reused while every field it is built from is unchanged (compared,
    /// not trusted to a timestamp): the read that every app start makes costs no JSON encoding.
    /// Bounded: at most `capacity` apps, emptied when full.
    final class EncodedBodies: Sendable {
        struct Entry {
            let name: String
            let status: AppStatus
            let settings: AppSettings
            let createdAt: Date
            let updatedAt: Date
            let body: Data

            func matches(_ app: App) -> Bool {
                name == app.name && status == app.status && createdAt == app.createdAt && updatedAt == app.updatedAt
                    && settings == app.settings
            }
        }

        let entries = NIOLockedValueBox([Int64: Entry]())
        let capacity = 20_000

        func body(for app: App, encode: (App) -> Data) -> Data {
            if let entry = entries.withLockedValue({ $0[app.ref] }), entry.matches(app) { return entry.body }
            let body = encode(app)
            let entry = Entry(name: app.name, status: app.status, settings: app.settings, createdAt: app.createdAt, updatedAt: app.updatedAt, body: body)
            entries.withLockedValue { entries in
                if entries.count >= capacity { entries.removeAll(keepingCapacity: true) }
                entries[app.ref] = entry
            }
            return body
        }
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
