import Foundation
import Loom
import LoomCore
import LoomTools

/// How a verb's failure reads on standard error: by its message, never by its Swift type name.
enum CommandFailure {
    /// The exit status of a verb that failed (``LoomCommand/exitStatusTable``).
    static let exitStatus: Int32 = 2

    /// The message of `error`, as `Error: ` follows it: a ``LoomError`` by its message and its
    /// cause, a ``LoomToolError`` by its place (line and field) and message, a ``TextQueryError``
    /// by its message and column, then the query with a caret under the column. A database
    /// URL's password in it, whoever wrote the text, shows as `***` (``CredentialRedaction``).
    static func message(for error: any Error) -> String {
        CredentialRedaction.redacting(unredactedMessage(for: error))
    }

    private static func unredactedMessage(for error: any Error) -> String {
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
