/// One package as dpkg records it in its status database.
///
/// A value holds the fields Loom's demo uses, already interpreted: the size is a number, the
/// maintainer is split into name and address, and the relationship fields are parsed into
/// ``DebianDependency`` values.
///
/// ```swift
/// let packages = try DebianPackageDatabase.bundledSample()
/// if let adduser = packages.first(where: { $0.name == "adduser" }) {
///     print(adduser.summary ?? "")                              // "add and remove users and groups"
///     print(adduser.dependencies(.depends).map(\.description))  // ["passwd"]
/// }
/// ```
///
/// Fields that Loom does not interpret (`Conffiles`, `Multi-Arch`, …) are not kept.
package struct DebianPackage: Sendable, Hashable {
    /// The package name, from the `Package` field; never empty.
    package var name: String
    /// The version, from `Version` (for example `"2.36.1-8+deb11u1"`).
    package var version: String?
    /// The architecture, from `Architecture` (`"amd64"`, `"all"`, …).
    package var architecture: String?
    /// dpkg's want, error flag and state, from `Status` (for example `"install ok installed"`).
    package var status: String?
    /// The priority, from `Priority` (`"required"`, `"important"`, `"optional"`, …).
    package var priority: String?
    /// The archive section, from `Section` (`"admin"`, `"libs"`, …).
    package var section: String?
    /// The estimated disk space the installed package takes, in KiB, from `Installed-Size`.
    package var installedSizeKiB: Int?
    /// The person or team responsible for the package, from `Maintainer`.
    package var maintainer: DebianMaintainer?
    /// The name of the source package this binary package was built from, from `Source`.
    ///
    /// dpkg omits the field when the source package has the binary package's name; this
    /// property is `nil` then.
    package var sourcePackage: String?
    /// The source package's version, when `Source` gives one because it differs from
    /// ``version`` (`Source: bash (5.2.15-2)`).
    package var sourceVersion: String?
    /// The upstream project's web site, from `Homepage`.
    package var homepage: String?
    /// The one-line synopsis: the first line of `Description`.
    package var summary: String?
    /// The extended description: the lines of `Description` after the first.
    ///
    /// The one leading space of each continuation line is removed and dpkg's `" ."` lines
    /// become empty lines, so paragraphs are separated by `"\n\n"`. Lines dpkg shows verbatim
    /// keep their extra indentation. Empty when the description is only a synopsis.
    package var descriptionBody: String
    /// The package's relationships, in field order (`Pre-Depends`, `Depends`, `Recommends`, …)
    /// and, within a field, in the order written.
    package var dependencies: [DebianDependency]

    /// Creates a package from already-interpreted values.
    package init(
        name: String,
        version: String? = nil,
        architecture: String? = nil,
        status: String? = nil,
        priority: String? = nil,
        section: String? = nil,
        installedSizeKiB: Int? = nil,
        maintainer: DebianMaintainer? = nil,
        sourcePackage: String? = nil,
        sourceVersion: String? = nil,
        homepage: String? = nil,
        summary: String? = nil,
        descriptionBody: String = "",
        dependencies: [DebianDependency] = []
    ) {
        self.name = name
        self.version = version
        self.architecture = architecture
        self.status = status
        self.priority = priority
        self.section = section
        self.installedSizeKiB = installedSizeKiB
        self.maintainer = maintainer
        self.sourcePackage = sourcePackage
        self.sourceVersion = sourceVersion
        self.homepage = homepage
        self.summary = summary
        self.descriptionBody = descriptionBody
        self.dependencies = dependencies
    }

    /// Whether dpkg records the package as fully installed (its status ends in `installed`).
    ///
    /// Packages that were removed but kept their configuration files (`config-files`), or
    /// whose installation failed half-way, are in the database too.
    package var isInstalled: Bool {
        status?.hasSuffix(" installed") ?? false
    }

    /// The relationships of one kind, in the order written.
    ///
    /// ```swift
    /// for dependency in package.dependencies(.depends) {
    ///     print(dependency)   // "libc6 (>= 2.34)", "debconf | debconf-2.0"
    /// }
    /// ```
    package func dependencies(_ kind: DebianDependency.Kind) -> [DebianDependency] {
        dependencies.filter { $0.kind == kind }
    }
}
