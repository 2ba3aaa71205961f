/// A validation failure that names the offending field (admin API: 422 with `field`).
public struct FieldError: Error, Sendable, Equatable, CustomStringConvertible {
    public let field: String
    public let code: String
    public let message: String
    public init(_ field: String, _ code: String, _ message: String) {
        self.field = field
        self.code = code
        self.message = message
    }
    public var description: String { "\(field) \(message)" }
}
