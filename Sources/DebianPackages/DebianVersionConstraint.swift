/// A version restriction in a relationship, such as the `(>= 2.34)` in `libc6 (>= 2.34)`.
///
/// Versions are kept as written; comparing them needs dpkg's ordering rules (epochs, `~`…),
/// which this library does not implement.
package struct DebianVersionConstraint: Sendable, Hashable, CustomStringConvertible {
    /// How a package's version must compare with ``version``.
    package enum Relation: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
        /// `<<`: strictly earlier.
        case strictlyEarlier = "<<"
        /// `<=`: earlier or equal. dpkg's obsolete `<` is read as this too.
        case earlierOrEqual = "<="
        /// `=`: exactly equal.
        case exactlyEqual = "="
        /// `>=`: later or equal. dpkg's obsolete `>` is read as this too.
        case laterOrEqual = ">="
        /// `>>`: strictly later.
        case strictlyLater = ">>"

        /// The operator as written in a control file (`">="`).
        package var description: String { rawValue }
    }

    /// How the version must compare.
    package var relation: Relation
    /// The version compared with, as written (for example `"2.34"` or `"1:2.0~rc1-1"`).
    package var version: String

    /// Creates a constraint.
    package init(_ relation: Relation, _ version: String) {
        self.relation = relation
        self.version = version
    }

    /// The constraint as written in a control file, without parentheses: `">= 2.34"`.
    package var description: String { "\(relation.rawValue) \(version)" }
}
