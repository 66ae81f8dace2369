import Foundation
import Loom
import LoomTools

/// How a verb's failure reads on standard error: by its message, never by its Swift type name.
enum CommandFailure {
    /// The exit status of a verb that failed (``LoomCommand/exitStatusTable``).
    static let exitStatus: Int32 = 2

    /// The message of `error`, as `Error: ` follows it: a ``LoomError`` by its message and its
    /// cause, a ``LoomToolError`` by its place (line and field) and message, a ``TextQueryError``
    /// by its message and column, then the query with a caret under the column.
    static func message(for error: any Error) -> String {
        switch error {
        case let error as LoomError:
            error.message + (error.underlying.map { " (\($0))" } ?? "")
        case let error as LoomToolError:
            error.description
        case let error as TextQueryError:
            "\(error.message) (column \(error.column))\n\(error.caretDiagram)"
        default:
            (error as? any LocalizedError)?.errorDescription ?? String(describing: error)
        }
    }
}
