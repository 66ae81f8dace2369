import Loom

/// The demo's model today (2.0.0): the classes below.
enum DemoSchemaV2: VersionedSchema {
    static let versionIdentifier = Schema.Version(2, 0, 0)
    static var models: [any PersistentModel.Type] { [Maintainer.self, InstalledPackage.self, PackageDependency.self] }
}

/// The demo's model before `InstalledPackage.dependencyCount` (1.0.0), kept so that a store an
/// earlier `loom demo --store` made is migrated.
enum DemoSchemaV1: VersionedSchema {
    static let versionIdentifier = Schema.Version(1, 0, 0)
    static var models: [any PersistentModel.Type] { [Maintainer.self, InstalledPackage.self, PackageDependency.self] }

    @Model final class Maintainer {
        var name: String
        var email: String = ""
        @Relationship(inverse: \InstalledPackage.maintainer) var packages: Set<InstalledPackage> = []
        #Unique<Maintainer>([\.name, \.email])

        init(name: String, email: String) {
            self.name = name
            self.email = email
        }
    }

    @Model final class InstalledPackage {
        var name: String
        var architecture: String
        var version: String
        var section: String?
        var priority: String?
        var installedSizeKiB: Int?
        var summary: String?
        var maintainer: Maintainer?
        @Relationship(deleteRule: .cascade, inverse: \PackageDependency.package) var dependencies: Set<PackageDependency> = []
        @Relationship(inverse: \PackageDependency.target) var dependents: Set<PackageDependency> = []
        #Unique<InstalledPackage>([\.name, \.architecture])
        #Index<InstalledPackage>([\.name], [\.section], [\.installedSizeKiB])

        init(name: String, architecture: String, version: String) {
            self.name = name
            self.architecture = architecture
            self.version = version
        }
    }

    @Model final class PackageDependency {
        var kind: String
        var targetName: String
        var alternatives: String
        var package: InstalledPackage?
        var target: InstalledPackage?
        #Index<PackageDependency>([\.targetName])

        init(kind: String, targetName: String, alternatives: String) {
            self.kind = kind
            self.targetName = targetName
            self.alternatives = alternatives
        }
    }
}

/// From each demo model version to the next.
enum DemoMigrationPlan: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { [DemoSchemaV1.self, DemoSchemaV2.self] }
    static var stages: [MigrationStage] {
        [.custom(
            fromVersion: DemoSchemaV1.self, toVersion: DemoSchemaV2.self, willMigrate: nil,
            didMigrate: { context in
                var request = FetchRequest<InstalledPackage>()
                request.relationshipKeyPathsForPrefetching = [\.dependencies]
                for package in try context.fetch(request) { package.dependencyCount = package.dependencies.count }
            })]
    }
}

/// A maintainer from dpkg's `Maintainer:` field. Each is stored once: workers that create the
/// same maintainer at the same time meet at save, and the merge policy joins their packages.
@Model final class Maintainer {
    var name: String
    /// Empty when dpkg gives no address, so that (name, email) identifies a maintainer.
    var email: String = ""
    @Relationship(inverse: \InstalledPackage.maintainer) var packages: Set<InstalledPackage> = []
    #Unique<Maintainer>([\.name, \.email])

    init(name: String, email: String) {
        self.name = name
        self.email = email
    }
}

/// One package from dpkg's database, as the demo stores it.
@Model final class InstalledPackage {
    var name: String
    var architecture: String
    var version: String
    var section: String?
    var priority: String?
    var installedSizeKiB: Int?
    var summary: String?
    /// How many dependencies the package has: new in the demo model's version 2.0.0, filled by
    /// the migration plan's `didMigrate` for stores of version 1.0.0.
    var dependencyCount: Int = 0
    var maintainer: Maintainer?
    /// What this package needs: deleting the package deletes them.
    @Relationship(deleteRule: .cascade, inverse: \PackageDependency.package) var dependencies: Set<PackageDependency> = []
    /// The dependencies of other packages that this one satisfies.
    @Relationship(inverse: \PackageDependency.target) var dependents: Set<PackageDependency> = []
    #Unique<InstalledPackage>([\.name, \.architecture])
    #Index<InstalledPackage>([\.name], [\.section], [\.installedSizeKiB])

    init(name: String, architecture: String, version: String) {
        self.name = name
        self.architecture = architecture
        self.version = version
    }
}

/// One `Depends:`/`Pre-Depends:`/`Recommends:`… entry: a package needs one of some others.
@Model final class PackageDependency {
    var kind: String
    /// The first alternative's package name.
    var targetName: String
    /// The whole entry as dpkg wrote it, e.g. `libc6 (>= 2.34) | musl`.
    var alternatives: String
    /// The package that has this dependency.
    var package: InstalledPackage?
    /// The installed package the first alternative names; `nil` when it is not installed.
    var target: InstalledPackage?
    #Index<PackageDependency>([\.targetName])

    init(kind: String, targetName: String, alternatives: String) {
        self.kind = kind
        self.targetName = targetName
        self.alternatives = alternatives
    }
}
