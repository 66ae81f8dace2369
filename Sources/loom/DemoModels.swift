import Loom

/// One package from dpkg's database, as the demo stores it.
@Model final class InstalledPackage {
    var name: String
    var architecture: String
    var version: String
    var section: String?
    var priority: String?
    var installedSizeKiB: Int?
    var maintainerName: String?
    var maintainerEmail: String?
    var summary: String?
    var dependencyCount: Int = 0
    #Unique<InstalledPackage>([\.name, \.architecture])
    #Index<InstalledPackage>([\.section], [\.installedSizeKiB])

    init(name: String, architecture: String, version: String) {
        self.name = name
        self.architecture = architecture
        self.version = version
    }
}

/// One `Depends:`/`Pre-Depends:`/`Recommends:`… entry: a package needs one of some others.
@Model final class PackageDependency {
    var packageName: String
    var kind: String
    /// The first alternative's package name.
    var target: String
    /// The whole entry as dpkg wrote it, e.g. `libc6 (>= 2.34) | musl`.
    var alternatives: String
    #Index<PackageDependency>([\.target], [\.packageName])

    init(packageName: String, kind: String, target: String, alternatives: String) {
        self.packageName = packageName
        self.kind = kind
        self.target = target
        self.alternatives = alternatives
    }
}
