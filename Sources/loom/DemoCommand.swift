import ArgumentParser
import DebianPackages
import Foundation
import Loom
@_spi(LoomTesting) import LoomCore
#if PostgreSQL
import LoomPostgreSQL
#endif
import LoomTools

/// `loom demo`: imports this machine's Debian package database into a Loom store as an object
/// graph (packages, their maintainers, and dependencies linking packages to the packages they
/// need) on background contexts while the view context reports progress, then queries across
/// the relationships.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Import dpkg's package database into a Loom store and query it.")

    @Option(help: "Where to create the store (a file path). Default: a new temporary folder.")
    var store: String?

    @Option(help: "Run on PostgreSQL instead: a URL such as postgres://user@localhost:5432/db?schema=loom_demo (a Unix socket folder: ?host=/run/postgresql). Needs the tool built with the PostgreSQL trait: swift run --traits PostgreSQL loom demo --postgres URL.")
    var postgres: String?

    @Option(help: "A dpkg status file to import instead of /var/lib/dpkg/status.")
    var source: String?

    @Option(help: "Packages per background save.")
    var batchSize: Int = 50

    @Option(help: "How many background contexts import at once.")
    var workers: Int = 3

    @MainActor
    func run() async throws {
        let started = ContinuousClock.now
        let storeURL = try location()
        let (packages, sourceName) = try loadPackages()
        print("Loom demo: importing \(packages.count) packages from \(sourceName)")
        print("Store: \(storeURL)")

        // A store an earlier demo made (--store) is migrated to this model first, with progress.
        let container = try await Self.open(storeURL)
        let view = container.viewContext
        let existing = try view.count(for: FetchRequest<InstalledPackage>())
        if existing > 0 {
            // A store an earlier run made: updated in place, then queried as on a first run.
            print("The store already holds \(existing) packages; updating it.")
            try await Self.updateImport(packages, into: container)
            try printQueries(view)
            try await Self.showBatchRequests(of: packages, in: container)
            try await Self.showUndo(in: container)
            try await Self.showInheritance(of: packages, beside: storeURL)
            try await container.close()
            print("Done in \((ContinuousClock.now - started).formatted(.units(allowed: [.milliseconds]))). The store is at \(storeURL)")
            return
        }

        // Import on several background contexts at once. The view context merges each of their
        // saves on the main actor and counts the packages from its own objectsDidChange events.
        let workers = max(1, min(self.workers, packages.count))
        let batchSize = max(1, self.batchSize)
        let total = packages.count

        // A second container on the same file (another coordinator, as another process would
        // have) learns of every importer commit from the store's history.
        let observer = try await Self.open(storeURL)
        let remote = observer.remoteChanges()
        let reporter = Task { () -> (transactions: Int, packages: Int, authors: [String: Int], first: Duration?) in
            var transactions = 0, inserted = 0, authors: [String: Int] = [:], first: Duration?
            let start = ContinuousClock.now
            for await change in remote {
                first = first ?? ContinuousClock.now - start
                for transaction in change.transactions {
                    transactions += 1
                    authors[transaction.author ?? "-", default: 0] += 1
                    inserted += transaction.changes.count { $0.kind == .insert && $0.objectID.entityName == "InstalledPackage" }
                }
                if inserted >= total { break }
            }
            return (transactions, inserted, authors, first)
        }
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
        // A live query on the view context: the largest packages by priority, redrawn from its
        // changes as the importers' saves are merged.
        let largest = LargestPackagesView()
        try largest.start(view)
        // A report context pinned to the store's query generation before the import: whatever
        // the importers commit, it keeps reading the store as it was.
        let report = container.newBackgroundContext(name: "report")
        try await report.perform { context in
            context.automaticallyMergesChanges = false
            try context.setQueryGenerationFrom(.current)
        }
        let importStarted = ContinuousClock.now
        let slices = (0..<workers).map { w in Array(packages[(total * w / workers)..<(total * (w + 1) / workers)]) }
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (w, slice) in slices.enumerated() {
                    let importer = container.newBackgroundContext(name: "dpkg import \(w + 1)")
                    group.addTask {
                        try await importer.perform { context in
                            context.transactionAuthor = "importer \(w + 1)"
                            // Two workers may create the same maintainer at once; the save that
                            // comes second keeps the saved one and moves its packages to it.
                            context.mergePolicy = .mergeByPropertyStoreTrump
                            var maintainers: [String: Maintainer] = [:]
                            for batch in stride(from: 0, to: slice.count, by: batchSize) {
                                for package in slice[batch..<min(batch + batchSize, slice.count)] {
                                    try Self.insert(package, into: context, maintainers: &maintainers)
                                }
                                try context.save()
                                maintainers = [:]   // a merged duplicate is gone: look them up again
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
        // Every package is in now: point each dependency at the installed package it names.
        let linked = try await container.save(mergingIntoViewContext: false) { context in try Self.linkTargets(in: context) }
        let importTime = ContinuousClock.now - importStarted
        print("Imported \(try view.count(for: FetchRequest<InstalledPackage>())) packages, \(try view.count(for: FetchRequest<Maintainer>())) maintainers and \(try view.count(for: FetchRequest<PackageDependency>())) dependencies (\(linked) of them to installed packages) with \(workers) background contexts in \(importTime.formatted(.units(allowed: [.milliseconds])))")

        let exact = try await largest.finish(view)
        let final = largest.shown.map { "\($0.key ?? "no priority") \($0.items.count)" }.joined(separator: ", ")
        print("The live query of packages of 10 MiB or more, by priority, changed \(largest.updates) times during the import; its changes, applied to the list shown, \(exact ? "give exactly" : "DO NOT give") what a fetch returns now: \(final)")
        let (pinned, current) = try await report.perform { context in
            let pinned = try context.count(for: FetchRequest<InstalledPackage>())
            try context.setQueryGenerationFrom(.current)
            return (pinned, try context.count(for: FetchRequest<InstalledPackage>()))
        }
        print("A report context pinned to the query generation before the import still counts \(pinned) packages; moved to the current one, \(current)")

        try printQueries(view)
        try await Self.showBatchRequests(of: packages, in: container)
        try await Self.showUndo(in: container)
        try await Self.showInheritance(of: packages, beside: storeURL)
        try await Self.showSQLLogging(at: storeURL)
        try await container.close()
        // The other coordinator has seen every import commit by now, or will within moments.
        let timeout = Task {
            try await Task.sleep(for: .seconds(10))
            reporter.cancel()
        }
        let seen = await reporter.value
        timeout.cancel()
        try await observer.close()
        let byAuthor = seen.authors.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", ")
        print("A second coordinator on the store saw \(seen.transactions) transactions of the others (\(byAuthor)) inserting \(seen.packages) packages, merged as they committed (the first \(seen.first.map { $0.formatted(.units(allowed: [.milliseconds])) } ?? "-") after it started listening)")
        try Self.showTools(at: storeURL)
        try await Self.showMigration(of: Array(packages.prefix(500)), beside: storeURL)
        print("Done in \((ContinuousClock.now - started).formatted(.units(allowed: [.milliseconds]))). The store is at \(storeURL)")
    }

    /// Where the demo's store is: a SQLite file, or a schema of a PostgreSQL database (with the
    /// `PostgreSQL` trait only, like every PostgreSQL case below).
    enum Location: CustomStringConvertible {
        case file(URL)
        #if PostgreSQL
        case postgres(PostgreSQLStore.Configuration, url: String)
        #endif

        var description: String {
            switch self {
            case .file(let url): url.path
            #if PostgreSQL
            case .postgres(let configuration, let url): "\(CredentialRedaction.redacting(url)) (PostgreSQL schema \(configuration.schemaName))"
            #endif
            }
        }
    }

    /// Opens the store with the current demo model, migrating one an earlier demo made through
    /// the plan and printing each step, on SQLite and on PostgreSQL alike.
    static func open(_ location: Location) async throws -> PersistentContainer {
        switch location {
        case .file(let url):
            let opening = PersistentContainer.opening(name: "LoomDemo", for: DemoSchemaV2.self, migrationPlan: DemoMigrationPlan.self, location: .file(url))
            for await step in opening.progress { print("  migrating: \(step)") }
            return try await opening.container
        #if PostgreSQL
        case .postgres(let configuration, _):
            return try await PersistentContainer(
                for: DemoSchemaV2.self, migrationPlan: DemoMigrationPlan.self, postgres: configuration,
                progress: { step in print("  migrating: \(step)") })
        #endif
        }
    }

    /// Makes a store with the previous demo model (1.0.0) from some packages, next to the demo's
    /// own (a temporary file, or a schema of the same PostgreSQL database), then opens it with the
    /// current one: the plan's custom stage fills the attribute version 2.0.0 added.
    private static func showMigration(of packages: [DebianPackage], beside location: Location) async throws {
        let old = try scratch(beside: location, named: "v1")
        defer { destroy(old) }
        let previous = switch old {
        case .file(let url): try await PersistentContainer(name: "LoomDemo", for: DemoSchemaV1.self, location: .file(url))
        #if PostgreSQL
        case .postgres(let configuration, _): try await PersistentContainer(for: DemoSchemaV1.self, postgres: configuration)
        #endif
        }
        try await previous.save { context in
            for package in packages {
                let record = DemoSchemaV1.InstalledPackage(name: package.name, architecture: package.architecture ?? "all", version: package.version ?? "")
                context.insert(record)
                for dependency in package.dependencies {
                    guard let first = dependency.alternatives.first else { continue }
                    let entry = DemoSchemaV1.PackageDependency(kind: dependency.kind.rawValue, targetName: first.name, alternatives: dependency.alternatives.map(\.description).joined(separator: " | "))
                    entry.package = record
                }
            }
        }
        try await previous.close()
        print("\nA store of the previous demo model (\(DemoSchemaV1.versionIdentifier), \(packages.count) packages) opened with the current one:")
        let forecast = switch old {
        case .file(let url): try PersistentContainer.requiredMigrationStages(forStoreAt: url, version: DemoSchemaV2.self, migrationPlan: DemoMigrationPlan.self)
        #if PostgreSQL
        case .postgres(let configuration, _):
            try PersistentContainer.requiredMigrationStages(postgres: configuration, version: DemoSchemaV2.self, migrationPlan: DemoMigrationPlan.self)
        #endif
        }
        print("  forecast: \(forecast)")
        let started = ContinuousClock.now
        let container = try await open(old)
        let most = try await container.performBackgroundTask { context in
            var request = FetchRequest<InstalledPackage>(sortBy: [SortDescriptor(\.dependencyCount, order: .reverse), SortDescriptor(\.name)])
            request.fetchLimit = 3
            return try context.fetch(request).map { "\($0.name) (\($0.dependencyCount))" }
        }
        try await container.close()
        print("  migrated in \((ContinuousClock.now - started).formatted(.units(allowed: [.milliseconds]))); most dependencies, from the new attribute: \(most.joined(separator: ", "))")
    }

    /// An empty store place of the demo's own next to `location`: a file in a new temporary
    /// folder, or a schema of the same PostgreSQL database whose name ends in `_` + `suffix`.
    static func scratch(beside location: Location, named suffix: String) throws -> Location {
        switch location {
        case .file:
            let folder = FileManager.default.temporaryDirectory.appending(path: "loom-demo-\(suffix)-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            return .file(folder.appending(path: "\(suffix).loom"))
        #if PostgreSQL
        case .postgres(var configuration, let url):
            configuration.schemaName += "_\(suffix)"
            try PostgreSQLStore.destroy(configuration: configuration)
            return .postgres(configuration, url: url)
        #endif
        }
    }

    /// Removes a place ``scratch(beside:named:)`` made, with what it holds.
    static func destroy(_ location: Location) {
        switch location {
        case .file(let url): try? FileManager.default.removeItem(at: url.deletingLastPathComponent())
        #if PostgreSQL
        case .postgres(let configuration, _): try? PostgreSQLStore.destroy(configuration: configuration)
        #endif
        }
    }

    private func location() throws -> Location {
        if let postgres {
            #if PostgreSQL
            var configuration = try PostgreSQLStore.Configuration(url: postgres)
            if !postgres.contains("schema=") { configuration.schemaName = "loom_demo" }
            return .postgres(configuration, url: postgres)
            #else
            throw PostgreSQLLocation.unavailable(postgres)
            #endif
        }
        return .file(try storeLocation())
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

    private static func insert(_ package: DebianPackage, into context: ManagedObjectContext, maintainers: inout [String: Maintainer]) throws {
        let record = InstalledPackage(name: package.name, architecture: package.architecture ?? "all", version: package.version ?? "")
        record.section = package.section
        record.priority = package.priority
        record.installedSizeKiB = package.installedSizeKiB
        record.summary = package.summary
        record.dependencyCount = package.dependencies.count { !$0.alternatives.isEmpty }
        context.insert(record)
        if let maintainer = package.maintainer {
            record.maintainer = try Self.maintainer(named: maintainer.name, email: maintainer.email ?? "", in: context, cache: &maintainers)
        }
        for dependency in package.dependencies {
            guard let first = dependency.alternatives.first else { continue }
            let alternatives = dependency.alternatives.map(\.description).joined(separator: " | ")
            let entry = PackageDependency(kind: dependency.kind.rawValue, targetName: first.name, alternatives: alternatives)
            entry.package = record   // inserts the entry into the package's context
        }
    }

    /// The maintainer with this name and address: one this worker made or fetched, one already
    /// saved, or a new one.
    private static func maintainer(named name: String, email: String, in context: ManagedObjectContext, cache: inout [String: Maintainer]) throws -> Maintainer {
        let key = "\(name)\u{0}\(email)"
        if let known = cache[key] { return known }
        let found = try context.fetch(FetchRequest<Maintainer>(predicate: #Predicate { $0.name == name && $0.email == email })).first
        let maintainer = found ?? Maintainer(name: name, email: email)
        if found == nil { context.insert(maintainer) }
        cache[key] = maintainer
        return maintainer
    }

    /// Sets every dependency's target to the installed package its first alternative names
    /// (of the same architecture when there are several). Returns how many it linked.
    static func linkTargets(in context: ManagedObjectContext) throws -> Int {
        var byName: [String: [InstalledPackage]] = [:]
        for package in try context.fetch(FetchRequest<InstalledPackage>()) { byName[package.name, default: []].append(package) }
        var request = FetchRequest<PackageDependency>(predicate: #Predicate { $0.target == nil })
        request.relationshipKeyPathsForPrefetching = [\.package]
        var linked = 0
        for dependency in try context.fetch(request) {
            guard let candidates = byName[dependency.targetName] else { continue }
            let architecture = dependency.package?.architecture
            dependency.target = candidates.first { $0.architecture == architecture } ?? candidates[0]
            linked += 1
        }
        return linked
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

        // Queries that cross relationships.
        let target = "libc6"
        var libcUsers = FetchRequest<InstalledPackage>(
            predicate: #Predicate { $0.dependencies.contains { $0.targetName == target && ($0.kind == "Depends" || $0.kind == "Pre-Depends") } },
            sortBy: [SortDescriptor(\.name)])
        libcUsers.relationshipKeyPathsForPrefetching = [\.maintainer]
        let users = try view.fetch(libcUsers)
        print("Packages that depend on libc6: \(users.count) (first: \(users.prefix(3).map { "\($0.name) by \($0.maintainer?.name ?? "?")" }.joined(separator: ", ")))")

        let teams = try view.fetch(FetchRequest<InstalledPackage>(
            predicate: #Predicate { $0.maintainer?.email.contains("lists.") == true && $0.dependencies.contains { $0.target?.section == "libs" } },
            sortBy: [SortDescriptor(\.maintainer?.name), SortDescriptor(\.name)]))
        print("Packages maintained by a team (a lists. address) that need a package of section libs: \(teams.count) (first: \(teams.prefix(3).map { "\($0.name) (\($0.maintainer?.name ?? "?"))" }.joined(separator: ", ")))")

        var popular = FetchRequest<InstalledPackage>(predicate: #Predicate { $0.dependents.count >= 40 })
        popular.relationshipKeyPathsForPrefetching = [\.dependents]
        let mostNeeded = try view.fetch(popular).sorted { ($0.dependents.count, $1.name) > ($1.dependents.count, $0.name) }
        print("Most depended-on packages: " + mostNeeded.prefix(5).map { "\($0.name) (\($0.dependents.count))" }.joined(separator: ", "))

        var busy = FetchRequest<Maintainer>(predicate: #Predicate { $0.packages.count >= 10 })
        busy.relationshipKeyPathsForPrefetching = [\.packages]
        let maintainers = try view.fetch(busy).sorted { ($0.packages.count, $1.name) > ($1.packages.count, $0.name) }
        print("Maintainers with the most packages: " + maintainers.prefix(3).map { "\($0.name) (\($0.packages.count))" }.joined(separator: ", "))

        let orphans = try view.count(for: FetchRequest<InstalledPackage>(predicate: #Predicate { $0.dependents.isEmpty && $0.priority != "required" }))
        print("Packages nothing installed depends on (not required): \(orphans)")

        let sections = try view.fetch(FetchRequest<InstalledPackage>(predicate: #Predicate { $0.section != nil }))
        let bySection = Dictionary(grouping: sections, by: { $0.section ?? "" }).mapValues(\.count).sorted { ($0.value, $1.key) > ($1.value, $0.key) }
        print("Largest sections: " + bySection.prefix(5).map { "\($0.key) (\($0.value))" }.joined(separator: ", "))

        let required = try view.count(for: FetchRequest<InstalledPackage>(predicate: #Predicate { $0.priority == "required" }))
        print("Priority \"required\": \(required) packages")
    }
}
