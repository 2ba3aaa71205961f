/// A bad or missing setting. The CLI prints `description` on one line and exits with code 2.
public struct ConfigurationError: Error, CustomStringConvertible, Sendable {
    public let setting: String
    public let problem: String
    public init(_ setting: String, _ problem: String) {
        self.setting = setting
        self.problem = problem
    }
    public var description: String { "\(setting): \(problem)" }
}
