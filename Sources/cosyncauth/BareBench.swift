import CosyncAuth
import CosyncAuthHTTP
import Foundation
import Hummingbird
import Logging
import PostgresNIO

/// The yardstick of issue 24's per-request goals: a bare Hummingbird 2 application in the same binary,
/// with none of the server's middleware, path normalizing or deadline. `cosyncauth bench-bare` serves it;
/// tools/bench/request-cost.sh prints the server's `/healthz` and getUser next to these two routes:
/// - `GET /healthz`: a fixed JSON body;
/// - `GET /user/{id}`: one primary-key SELECT of a user row through PostgresNIO (the columns the
///   server's user queries read, every one decoded), answered as a small JSON object.
func buildBareBenchApplication(client: PostgresClient, host: String, port: Int, logger: Logger) -> some ApplicationProtocol {
    let router = Router()
    router.get("healthz") { _, _ in
        Response(
            status: .ok, headers: [.contentType: "application/json; charset=utf-8"],
            body: ResponseBody(byteBuffer: ByteBuffer(string: #"{"status":"ok"}"#)))
    }
    router.get("user/:id") { _, context -> Response in
        guard let id = context.parameters.get("id").flatMap(UUID.init(uuidString:)) else { return Response(status: .badRequest) }
        let rows = try await client.query(
            """
            SELECT id, app_ref, handle, user_name, password_hash, locale, status, login_provider, social_user_id,
                   metadata::text, phone, phone_verified, two_factor_phone, two_factor_google, token_version, last_login,
                   created_at, updated_at, jwt_subject, kept_token_hash
            FROM users WHERE id = \(id)
            """, logger: logger)
        for try await row in rows {
            let (rowId, _, handle, userName, _, locale, status, _, _, metadata, _, _, _, _, _, _, createdAt, _, _, _) = try row.decode(
                (UUID, Int64, String, String?, String?, String, String, String, String?, String, String?, Bool, Bool, Bool,
                 Int, Date?, Date, Date, String?, Data?).self)
            let object: JSONValue = .object([
                "id": .string(rowId.uuidString.lowercased()), "handle": .string(handle), "userName": userName.map(JSONValue.string) ?? .null,
                "locale": .string(locale), "status": .string(status), "metaData": .string(metadata),
                "createdAt": .int(Int(createdAt.timeIntervalSince1970)),
            ])
            return Response(
                status: .ok, headers: [.contentType: "application/json; charset=utf-8"],
                body: ResponseBody(byteBuffer: ByteBuffer(bytes: (try? JSONCoding.encode(object)) ?? Data("{}".utf8))))
        }
        return Response(status: .notFound)
    }
    return Application(
        router: router, configuration: .init(address: .hostname(host, port: port), serverName: "bare"), logger: logger)
}
