/// An error thrown while reading a dpkg status database: a code you can match, where it
/// happened, and a message that says what is wrong.
///
/// ```swift
/// do {
///     packages = try DebianPackageDatabase.load(contentsOf: url)
/// } catch let error as DebianPackageDatabaseError where error.code == .malformedField {
///     print(error)   // "/var/lib/dpkg/status:120: line is neither "Field: value" nor …"
/// }
/// ```
///
/// Codes can also be matched directly: `catch DebianPackageDatabaseError.Code.unreadable`.
///
/// Field *values* are not put into messages; the source name and line number locate them.
package struct DebianPackageDatabaseError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is. Extensible: new codes may be added.
    package struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        package let rawValue: String
        package init(rawValue: String) { self.rawValue = rawValue }
        package var description: String { rawValue }

        /// The file could not be read (missing, not permitted, a directory…).
        package static let unreadable = Code(rawValue: "unreadable")
        /// The bytes are not valid UTF-8 text.
        package static let invalidUTF8 = Code(rawValue: "invalidUTF8")
        /// A line is not a field, a field's value is not of its expected form, or a stanza
        /// repeats a field.
        package static let malformedField = Code(rawValue: "malformedField")
        /// A stanza has no `Package` field, or an empty one.
        package static let missingPackageName = Code(rawValue: "missingPackageName")
        /// A relationship field (`Depends`, `Breaks`…) is not a valid list of packages.
        package static let malformedDependency = Code(rawValue: "malformedDependency")

        /// Whether `error` is a ``DebianPackageDatabaseError`` with this code, so that codes
        /// can be used as `catch` patterns.
        package static func ~= (code: Code, error: any Error) -> Bool {
            (error as? DebianPackageDatabaseError)?.code == code
        }
    }

    /// What kind of failure this is.
    package var code: Code
    /// The name of what was being read: a file path, or the `source` given to
    /// `DebianPackageDatabase.parse(_:source:)`.
    package var source: String
    /// The 1-based line the problem is on; `nil` when it concerns the whole source.
    package var line: Int?
    /// What is wrong, and how to fix it where that is not obvious.
    package var message: String
    /// What caused this error, if another error did (for example the file system's error for
    /// ``Code/unreadable``).
    package var underlying: (any Error)?

    /// Creates an error.
    package init(_ code: Code, source: String, line: Int?, _ message: String, underlying: (any Error)? = nil) {
        self.code = code
        self.source = source
        self.line = line
        self.message = message
        self.underlying = underlying
    }

    /// `source:line: message`, as compilers print diagnostics, followed by the underlying
    /// error if there is one.
    package var description: String {
        var text = source
        if let line { text += ":\(line)" }
        text += ": \(message)"
        if let underlying { text += " (\(underlying))" }
        return text
    }
}
