/// A `loom` verb's failure: what went wrong, and where (the input line and field, or the object).
///
/// Attribute values are never put into the message (they can be personal data).
package struct LoomToolError: Error, CustomStringConvertible, Sendable {
    /// What kind of failure it is.
    package enum Code: String, Sendable {
        /// The input is not what the verb reads (a malformed line, an unknown entity, a dangling URI).
        case badInput
        /// The destination exists (a load never writes over a store).
        case destinationExists
        /// The store could not be read or written.
        case storeFailure
    }

    package var code: Code
    /// What happened, as a sentence.
    package var message: String
    /// The 1-based input line, when the failure is in one.
    package var line: Int?
    /// The field of that line (`uri`, `attributes.title`, `relationships.author[2]`), when known.
    package var field: String?

    package init(_ code: Code, _ message: String, line: Int? = nil, field: String? = nil) {
        self.code = code
        self.message = message
        self.line = line
        self.field = field
    }

    package var description: String {
        var place = ""
        if let line { place = "line \(line)" + (field.flatMap { $0.isEmpty ? nil : ", field \($0)" } ?? "") + ": " }
        return place + message
    }
}
