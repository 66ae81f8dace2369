/// One package named in a relationship field: a name, optionally an architecture qualifier and
/// a version constraint.
///
/// `python3:any (>= 3.11)` is read as:
///
/// ```swift
/// DebianPackageReference(
///     name: "python3", architecture: "any",
///     versionConstraint: DebianVersionConstraint(.laterOrEqual, "3.11"))
/// ```
package struct DebianPackageReference: Sendable, Hashable, CustomStringConvertible {
    /// The package name (which may be a virtual package, such as `mail-transport-agent`).
    package var name: String
    /// The architecture qualifier after a colon (`any`, `native`, `amd64`…), if any.
    package var architecture: String?
    /// The version restriction in parentheses, if any.
    package var versionConstraint: DebianVersionConstraint?

    /// Creates a reference.
    package init(name: String, architecture: String? = nil, versionConstraint: DebianVersionConstraint? = nil) {
        self.name = name
        self.architecture = architecture
        self.versionConstraint = versionConstraint
    }

    /// The reference as written in a control file: `python3:any (>= 3.11)`.
    package var description: String {
        var text = name
        if let architecture { text += ":\(architecture)" }
        if let versionConstraint { text += " (\(versionConstraint))" }
        return text
    }
}
