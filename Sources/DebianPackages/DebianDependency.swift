/// One entry of a relationship field: a package, or alternatives separated by `|`.
///
/// `Depends: libc6 (>= 2.34), debconf | debconf-2.0` holds two dependencies of kind
/// ``Kind/depends``; the second has two ``alternatives``, any one of which satisfies it.
///
/// ```swift
/// for dependency in package.dependencies(.depends) where dependency.alternatives.count > 1 {
///     print(dependency.alternatives.map(\.name))   // ["debconf", "debconf-2.0"]
/// }
/// ```
package struct DebianDependency: Sendable, Hashable, CustomStringConvertible {
    /// The relationship field a dependency comes from.
    ///
    /// The raw value is the field name as dpkg writes it.
    package enum Kind: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
        /// `Pre-Depends`: must be installed and configured before this package is unpacked.
        case preDepends = "Pre-Depends"
        /// `Depends`: must be installed for this package to be configured.
        case depends = "Depends"
        /// `Recommends`: found with this package in all but unusual installations.
        case recommends = "Recommends"
        /// `Suggests`: may make this package more useful.
        case suggests = "Suggests"
        /// `Enhances`: this package makes the named one more useful.
        case enhances = "Enhances"
        /// `Breaks`: the named packages break while this one is installed.
        case breaks = "Breaks"
        /// `Conflicts`: cannot be unpacked while this package is installed.
        case conflicts = "Conflicts"
        /// `Replaces`: this package overwrites files of, or replaces, the named ones.
        case replaces = "Replaces"
        /// `Provides`: virtual (or real) packages this one stands in for.
        case provides = "Provides"

        /// The field name as dpkg writes it (`"Pre-Depends"`).
        package var fieldName: String { rawValue }
        package var description: String { rawValue }
    }

    /// The field this dependency was written in.
    package var kind: Kind
    /// The packages any one of which satisfies the dependency; never empty when parsed.
    package var alternatives: [DebianPackageReference]

    /// Creates a dependency.
    package init(_ kind: Kind, alternatives: [DebianPackageReference]) {
        self.kind = kind
        self.alternatives = alternatives
    }

    /// The entry as written in its field: `debconf (>= 0.5) | debconf-2.0`.
    package var description: String {
        alternatives.map(\.description).joined(separator: " | ")
    }
}
