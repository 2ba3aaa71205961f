import Foundation

extension Date {
    /// Year 1 to year 9999 (UTC): what PostgreSQL stores and what PostgresNIO can encode. PostgresNIO
    /// traps (and so stops the whole server) on a `Date` whose microseconds do not fit an `Int64`, so
    /// every date taken from input (cursors, imported documents) goes through this first.
    public static let storableRange = Date(timeIntervalSince1970: -62_135_596_800)...Date(timeIntervalSince1970: 253_402_300_799)

    /// The date of `secondsSince1970`, or nil when it is not a finite, storable date.
    public static func storable(secondsSince1970 seconds: Double) -> Date? {
        guard seconds.isFinite else { return nil }
        let date = Date(timeIntervalSince1970: seconds)
        return storableRange.contains(date) ? date : nil
    }

    /// `self` when it is storable, else nil.
    public var storable: Date? { Self.storableRange.contains(self) ? self : nil }
}
