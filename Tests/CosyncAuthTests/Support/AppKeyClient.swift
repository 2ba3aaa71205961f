import CosyncAuth
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

/// A client of the AppKey API in both body kinds: `.form` is what AppKeySwift sends (a raw
/// `name=value&…` body without Content-Type, `response` a JSON string, only the credential header);
/// `.json` is what the JS / Flutter clients send (a JSON object, `response` an object).
struct AppKeyClient: Sendable {
    enum Kind: Sendable, CaseIterable { case form, json }

    let api: API
    let appToken: String
    var base = "/api/appuser"

    static let rpId = "auth.example.test"
    static let origin = "https://auth.example.test"

    /// Creates an appKey app with a relying party; returns the client and the creation reply.
    static func makeApp(_ api: API, _ settings: [String: JSONValue] = [:]) async throws -> (AppKeyClient, [String: JSONValue]) {
        var all: [String: JSONValue] = [
            "product": .string("appKey"), "rpId": .string(rpId), "rpName": .string("Example"), "anonymousLoginEnabled": .bool(true),
            "userNamesEnabled": .bool(true), "locales": .array([.string("EN"), .string("FR")]),
        ]
        all.merge(settings) { $1 }
        let created = try await api.createApp("AppKey \(Secrets.hexIdentifier().prefix(6))x", settings: all)
        return (AppKeyClient(api: api, appToken: created.string("appToken")), created)
    }

    static func uniqueEmail(_ name: String = "ann") -> String { "\(name)+\(Secrets.hexIdentifier().prefix(8))@example.com" }

    enum Credential { case app, access(String), signup(String), none }

    func headers(_ credential: Credential) -> HTTPFields {
        var headers: HTTPFields = [:]
        switch credential {
        case .app: headers[HTTPField.Name("app-token")!] = appToken
        case .access(let token): headers[HTTPField.Name("access-token")!] = token
        case .signup(let token): headers[HTTPField.Name("signup-token")!] = token
        case .none: break
        }
        return headers
    }

    func get(_ name: String, _ credential: Credential = .app, query: String = "") async throws -> API.Reply {
        try await api.call(.get, "\(base)/\(name)\(query)", token: nil, headers: headers(credential))
    }

    /// POST with `fields`: as a raw AppKeySwift form, or as a JSON object (values that are JSON
    /// objects, e.g. `response`, stay objects there and become JSON strings in the form).
    /// `from`: the client address, sent as X-Forwarded-For (the test server trusts 127.0.0.1 as a proxy).
    func post(_ name: String, _ kind: Kind, _ fields: [(String, JSONValue)], _ credential: Credential = .app, from address: String? = nil)
        async throws -> API.Reply
    {
        var headers = headers(credential)
        if let address { headers[HTTPField.Name("x-forwarded-for")!] = address }
        switch kind {
        case .form:
            let body = fields.map { key, value -> String in
                switch value {
                case .string(let s): return "\(key)=\(s)"
                default: return "\(key)=\(String(decoding: (try? JSONCoding.encode(value)) ?? Data(), as: UTF8.self))"
                }
            }.joined(separator: "&")
            return try await api.call(.post, "\(base)/\(name)", token: nil, body: body, headers: headers, contentType: nil)
        case .json:
            var object: [String: JSONValue] = [:]
            for (key, value) in fields { object[key] = value }
            let body = String(decoding: try JSONCoding.encode(JSONValue.object(object)), as: UTF8.self)
            return try await api.call(.post, "\(base)/\(name)", token: nil, body: body, headers: headers)
        }
    }

    /// The `response` value of a registration: AppKeySwift's hand-built string (form) or an object (JSON).
    static func response(_ r: RegistrationResponse, _ kind: Kind) -> JSONValue {
        switch kind {
        case .form: .string(SoftwareAuthenticator.appKeySwiftResponse(r))
        case .json:
            .object(
                ["clientDataJSON": .string(r.clientDataJSON), "attestationObject": .string(r.attestationObject)]
                    .merging(r.transports.map { ["transports": .array($0.map { .string($0) })] } ?? [:]) { $1 })
        }
    }

    static func response(_ a: AssertionResponse, _ kind: Kind) -> JSONValue {
        switch kind {
        case .form: .string(SoftwareAuthenticator.appKeySwiftResponse(a))
        case .json:
            .object([
                "clientDataJSON": .string(a.clientDataJSON), "authenticatorData": .string(a.authenticatorData),
                "signature": .string(a.signature), "userHandle": .string(a.userHandle ?? ""),
            ])
        }
    }

    /// The fields of a registration *Complete call.
    static func registration(handle: String?, _ r: RegistrationResponse, _ kind: Kind) -> [(String, JSONValue)] {
        var fields: [(String, JSONValue)] = []
        if let handle { fields.append(("handle", .string(kind == .form ? handle.replacingOccurrences(of: "+", with: "%2B") : handle))) }
        fields.append(("id", .string(r.id)))
        if kind == .json { fields += [("rawId", .string(r.rawId ?? r.id)), ("type", .string("public-key"))] }
        fields.append(("response", response(r, kind)))
        return fields
    }

    static func assertion(handle: String, _ a: AssertionResponse, _ kind: Kind) -> [(String, JSONValue)] {
        var fields: [(String, JSONValue)] = [
            ("handle", .string(kind == .form ? handle.replacingOccurrences(of: "+", with: "%2B") : handle)), ("id", .string(a.id)),
        ]
        if kind == .json { fields += [("rawId", .string(a.rawId ?? a.id)), ("type", .string("public-key"))] }
        fields.append(("response", response(a, kind)))
        return fields
    }

    static func challenge(_ reply: API.Reply) throws -> [UInt8] {
        try #require(WebAuthn.decodeBase64URL(reply.object.string("challenge")), "no challenge in \(reply.text)")
    }

    static func code(_ reply: API.Reply) -> Int? { reply.status == .badRequest ? reply.object["code"]?.intValue : nil }

    /// The last signup code e-mailed (or texted) to `handle`.
    static func lastCode(to handle: String, count: Int = 1) async throws -> String {
        let mails = try await TestEnvironment.sendGrid.value.waitForMails(to: handle, count: count)
        return try #require(mails.last.flatMap { sixDigitCode(in: $0.text) }, "no code sent to \(handle)")
    }

    /// A whole signup (signup → signupConfirm → signupComplete); returns the USER-body.
    func signUp(_ handle: String, _ authenticator: SoftwareAuthenticator, _ kind: Kind = .form, displayName: String = "Ann") async throws
        -> [String: JSONValue]
    {
        let options = try await post("signup", kind, [("handle", .string(handle)), ("displayName", .string(displayName))])
        try #require(options.status == .ok, "signup: \(options.text)")
        let registration = authenticator.register(challenge: try Self.challenge(options))
        let confirm = try await post("signupConfirm", kind, Self.registration(handle: handle, registration, kind))
        try #require(confirm.status == .ok, "signupConfirm: \(confirm.text)")
        let token = confirm.object.string("signup-token")
        let complete = try await post("signupComplete", kind, [("code", .string(try await Self.lastCode(to: handle.lowercased())))], .signup(token))
        try #require(complete.status == .ok, "signupComplete: \(complete.text)")
        return complete.object
    }

    /// login → loginComplete (or verify → verifyComplete).
    func logIn(_ handle: String, _ authenticator: inout SoftwareAuthenticator, _ kind: Kind = .form, verify: Bool = false,
               credential: Credential = .app) async throws -> API.Reply
    {
        let options = try await post(verify ? "verify" : "login", kind, [("handle", .string(handle))], credential)
        try #require(options.status == .ok, "login: \(options.text)")
        let assertion = authenticator.assert(challenge: try Self.challenge(options), userHandle: nil)
        return try await post(verify ? "verifyComplete" : "loginComplete", kind, Self.assertion(handle: handle, assertion, kind), credential)
    }
}
