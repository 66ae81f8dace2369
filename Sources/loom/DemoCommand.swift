import ArgumentParser
import DebianPackages
import Foundation
import Loom

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
    var batchSize: Int = 50

    @Option(help: "How many background contexts import at once.")
    var workers: Int = 3

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

        // Import on several background contexts at once. The view context merges each of their
        // saves on the main actor and counts the packages from its own objectsDidChange events.
        let workers = max(1, min(self.workers, packages.count))
        let batchSize = max(1, self.batchSize)
        let total = packages.count
        let events = view.events()
        let watcher = Task { @MainActor in
            guard total > 0 else { return }
            var live = 0, reported = -1
            for await event in events {
                guard case .objectsDidChange(let changes) = event else { continue }
                live += changes.inserted.count { $0.entityName == "InstalledPackage" }
                if live != reported, live == total || live - reported >= total / 10 {
                    print("  view context merged \(live)/\(total) packages")
                    reported = live
                }
                if live >= total { break }
            }
        }
        let importStarted = ContinuousClock.now
        let slices = (0..<workers).map { w in Array(packages[(total * w / workers)..<(total * (w + 1) / workers)]) }
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (w, slice) in slices.enumerated() {
                    let importer = container.newBackgroundContext(name: "dpkg import \(w + 1)")
                    group.addTask {
                        try await importer.perform { context in
                            for batch in stride(from: 0, to: slice.count, by: batchSize) {
                                for package in slice[batch..<min(batch + batchSize, slice.count)] { Self.insert(package, into: context) }
                                try context.save()
                            }
                        }
                    }
                }
                try await group.waitForAll()
            }
        } catch {
            watcher.cancel()
            throw error
        }
        view.mergePendingSaves()
        await watcher.value
        let importTime = ContinuousClock.now - importStarted
        print("Imported \(try view.count(for: FetchRequest<InstalledPackage>())) packages and \(try view.count(for: FetchRequest<PackageDependency>())) dependencies with \(workers) background contexts in \(importTime.formatted(.units(allowed: [.milliseconds])))")

        try printQueries(view)
        try await container.close()
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
