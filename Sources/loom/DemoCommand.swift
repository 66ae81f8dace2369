import ArgumentParser
import DebianPackages
import Foundation
import Loom
import Synchronization

/// `loom demo`: imports this machine's Debian package database into a Loom store in a
/// background context while the view context reports progress, then queries it.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Import dpkg's package database into a Loom store and query it.")

    @Option(help: "Where to create the store (a file path). Default: a new temporary folder.")
    var store: String?

    @Option(help: "A dpkg status file to import instead of /var/lib/dpkg/status.")
    var source: String?

    @Option(help: "Packages per background save.")
    var batchSize: Int = 100

    @MainActor
    func run() async throws {
        let started = ContinuousClock.now
        let storeURL = try storeLocation()
        let (packages, sourceName) = try loadPackages()
        print("Loom demo: importing \(packages.count) packages from \(sourceName)")
        print("Store: \(storeURL.path)")

        let container = try PersistentContainer(name: "LoomDemo", for: InstalledPackage.self, PackageDependency.self, location: .file(storeURL))
        let view = container.viewContext
        let existing = try view.count(for: FetchRequest<InstalledPackage>())
        if existing > 0 {
            print("The store already holds \(existing) packages; replacing them.")
            try await container.performBackgroundTask { context in
                for package in try context.fetch(FetchRequest<InstalledPackage>()) { context.delete(package) }
                for dependency in try context.fetch(FetchRequest<PackageDependency>()) { context.delete(dependency) }
                try context.save()
            }
        }

        // Import on a background context; the main actor watches through the view context.
        let importer = container.newBackgroundContext(name: "dpkg import")
        let finished = Atomic<Bool>(false)
        let batchSize = max(1, self.batchSize)
        let importStarted = ContinuousClock.now
        async let imported: Int = importer.perform { context in
            defer { finished.store(true, ordering: .releasing) }
            var count = 0
            for batch in stride(from: 0, to: packages.count, by: batchSize) {
                for package in packages[batch..<min(batch + batchSize, packages.count)] {
                    Self.insert(package, into: context)
                    count += 1
                }
                try context.save()
            }
            return count
        }
        var reported = -1
        while true {
            let done = finished.load(ordering: .acquiring)
            let count = try view.count(for: FetchRequest<InstalledPackage>())
            if count != reported {
                print("  view context sees \(count)/\(packages.count) packages")
                reported = count
            }
            if done { break }
            try await Task.sleep(for: .milliseconds(5))
        }
        let total = try await imported
        let importTime = ContinuousClock.now - importStarted
        print("Imported \(total) packages and \(try view.count(for: FetchRequest<PackageDependency>())) dependencies in \(importTime.formatted(.units(allowed: [.milliseconds])))")

        try printQueries(view)
        try container.close()
        print("Done in \((ContinuousClock.now - started).formatted(.units(allowed: [.milliseconds]))). The store is at \(storeURL.path)")
    }

    private func storeLocation() throws -> URL {
        if let store { return URL(filePath: store) }
        let folder = FileManager.default.temporaryDirectory.appending(path: "loom-demo-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder.appending(path: "packages.loom")
    }

    private func loadPackages() throws -> ([DebianPackage], String) {
        if let source {
            return (try DebianPackageDatabase.load(contentsOf: URL(filePath: source)), source)
        }
        let (packages, name) = try DebianPackageDatabase.loadSystemOrSample()
        return (packages, name)
    }

    private static func insert(_ package: DebianPackage, into context: ManagedObjectContext) {
        let record = InstalledPackage(name: package.name, architecture: package.architecture ?? "all", version: package.version ?? "")
        record.section = package.section
        record.priority = package.priority
        record.installedSizeKiB = package.installedSizeKiB
        record.maintainerName = package.maintainer?.name
        record.maintainerEmail = package.maintainer?.email
        record.summary = package.summary
        record.dependencyCount = package.dependencies.count
        context.insert(record)
        for dependency in package.dependencies {
            guard let first = dependency.alternatives.first else { continue }
            let alternatives = dependency.alternatives.map(\.description).joined(separator: " | ")
            context.insert(PackageDependency(packageName: package.name, kind: dependency.kind.rawValue, target: first.name, alternatives: alternatives))
        }
    }

    @MainActor
    private func printQueries(_ view: ManagedObjectContext) throws {
        print("\nThe five largest packages:")
        var largest = FetchRequest<InstalledPackage>(
            predicate: #Predicate { $0.installedSizeKiB != nil },
            sortBy: [SortDescriptor(\.installedSizeKiB, order: .reverse)])
        largest.fetchLimit = 5
        for package in try view.fetch(largest) {
            print("  \(package.name.padding(toLength: 28, withPad: " ", startingAt: 0)) \(String(format: "%8.1f", Double(package.installedSizeKiB ?? 0) / 1024)) MiB  \(package.section ?? "-")")
        }

        let libraries = try view.count(for: FetchRequest<InstalledPackage>(predicate: #Predicate { $0.summary.flatMap { $0.localizedStandardContains("library") } == true }))
        print("\nPackages whose summary mentions \"library\" (any case): \(libraries)")

        let target = "libc6"
        let libcUsers = try view.fetch(FetchRequest<PackageDependency>(
            predicate: #Predicate { $0.target == target && ($0.kind == "Depends" || $0.kind == "Pre-Depends") },
            sortBy: [SortDescriptor(\.packageName)]))
        print("Packages that depend on libc6: \(libcUsers.count) (first: \(libcUsers.prefix(5).map(\.packageName).joined(separator: ", ")))")

        let sections = try view.fetch(FetchRequest<InstalledPackage>(predicate: #Predicate { $0.section != nil }))
        let bySection = Dictionary(grouping: sections, by: { $0.section ?? "" }).mapValues(\.count).sorted { ($0.value, $1.key) > ($1.value, $0.key) }
        print("Largest sections: " + bySection.prefix(5).map { "\($0.key) (\($0.value))" }.joined(separator: ", "))

        let required = try view.count(for: FetchRequest<InstalledPackage>(predicate: #Predicate { $0.priority == "required" }))
        print("Priority \"required\": \(required) packages")
    }
}
