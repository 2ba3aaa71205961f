import Foundation
import PostgresNIO

/// One line an operator can act on, for CLI output and server logs. PostgresNIO's `PSQLError`
/// prints only a generic text; here a server error gives its SQLSTATE, the server's message and the
/// names of the constraint, table and column it names, and a client-side error its kind and cause.
/// Never the query's bound values, the server's `detail` (which quotes row values, e.g. the
/// duplicate key) or the query text.
public func describeForOperator(_ error: any Error) -> String {
    guard let psql = error as? PSQLError else {
        if let described = (error as Any) as? any CustomStringConvertible { return described.description }
        return String(describing: type(of: error))
    }
    guard let info = psql.serverInfo else {
        var text = "PostgreSQL client error: \(psql.code)"
        if let underlying = psql.underlying { text += " (\(underlying))" }
        return text
    }
    var text = "SQLSTATE \(info[.sqlState] ?? "?")"
    if let severity = info[.localizedSeverity] ?? info[.severity] { text += " \(severity)" }
    text += ": \(info[.message] ?? "(no message)")"
    var names: [String] = []
    if let constraint = info[.constraintName] { names.append("constraint \(constraint)") }
    if let table = info[.tableName] { names.append("table \(table)") }
    if let column = info[.columnName] { names.append("column \(column)") }
    if !names.isEmpty { text += " (\(names.joined(separator: ", ")))" }
    return text
}
