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
public struct DebianPackageDatabaseError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is. Extensible: new codes may be added.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The file could not be read (missing, not permitted, a directory…).
        public static let unreadable = Code(rawValue: "unreadable")
        /// The bytes are not valid UTF-8 text.
        public static let invalidUTF8 = Code(rawValue: "invalidUTF8")
        /// A line is not a field, a field's value is not of its expected form, or a stanza
        /// repeats a field.
        public static let malformedField = Code(rawValue: "malformedField")
        /// A stanza has no `Package` field, or an empty one.
        public static let missingPackageName = Code(rawValue: "missingPackageName")
        /// A relationship field (`Depends`, `Breaks`…) is not a valid list of packages.
        public static let malformedDependency = Code(rawValue: "malformedDependency")

        /// Whether `error` is a ``DebianPackageDatabaseError`` with this code, so that codes
        /// can be used as `catch` patterns.
        public static func ~= (code: Code, error: any Error) -> Bool {
            (error as? DebianPackageDatabaseError)?.code == code
        }
    }

    /// What kind of failure this is.
    public var code: Code
    /// The name of what was being read: a file path, or the `source` given to
    /// `DebianPackageDatabase.parse(_:source:)`.
    public var source: String
    /// The 1-based line the problem is on; `nil` when it concerns the whole source.
    public var line: Int?
    /// What is wrong, and how to fix it where that is not obvious.
    public var message: String
    /// What caused this error, if another error did (for example the file system's error for
    /// ``Code/unreadable``).
    public var underlying: (any Error)?

    /// Creates an error.
    public init(_ code: Code, source: String, line: Int?, _ message: String, underlying: (any Error)? = nil) {
        self.code = code
        self.source = source
        self.line = line
        self.message = message
        self.underlying = underlying
    }

    /// `source:line: message`, as compilers print diagnostics, followed by the underlying
    /// error if there is one.
    public var description: String {
        var text = source
        if let line { text += ":\(line)" }
        text += ": \(message)"
        if let underlying { text += " (\(underlying))" }
        return text
    }
}
