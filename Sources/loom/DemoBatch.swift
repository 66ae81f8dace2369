import DebianPackages
import Foundation
import Loom
@_spi(LoomTesting) import LoomCore

extension DemoCommand {
    /// Batch requests on the imported store, with no objects made: the package list imported
    /// again as one uniqued batch insert (matched by name and architecture: updated where a
    /// value differs, unchanged elsewhere), a batch update, and a batch delete whose cascade
    /// rule removes the deleted packages' dependencies in the store. The view context follows
    /// each request without merge code; its counts are checked against a fresh context.
    @MainActor
    static func showBatchRequests(of packages: [DebianPackage], in container: PersistentContainer) async throws {
        let view = container.viewContext
        let rows = packages.map { package -> [BatchValue<InstalledPackage>] in
            [.set(\.name, to: package.name), .set(\.architecture, to: package.architecture ?? "all"),
             .set(\.version, to: package.version ?? ""), .set(\.section, to: package.section), .set(\.priority, to: package.priority),
             .set(\.installedSizeKiB, to: package.installedSizeKiB), .set(\.summary, to: package.summary)]
        }
        let start = ContinuousClock.now
        let again = try await container.performBackgroundTask { context in
            try context.execute(BatchInsertRequest(rows: rows, uniquing: .update))
        }
        let took = (ContinuousClock.now - start).formatted(.units(allowed: [.milliseconds]))
        print("Batch requests: the \(rows.count) packages imported again as one uniqued batch insert (matched by name and architecture) in \(took): \(again.inserted.count) inserted, \(again.updated.count) updated, \(again.unchanged) unchanged")

        let unprioritized = try await container.performBackgroundTask { context in
            try context.execute(BatchUpdateRequest<InstalledPackage>(predicate: #Predicate { $0.priority == nil }, set: [.set(\.priority, to: "unknown")]))
        }
        // The smallest section, with its packages' dependencies (cascade).
        let sections = try view.fetch(PropertyFetchRequest<InstalledPackage>(
            predicate: #Predicate { $0.section != nil }, properties: [.value(\.section, as: "section"), .count(as: "packages")], groupBy: [\.section]))
        let smallest = try sections.map { row in (try row["section", as: String.self], try row["packages", as: Int.self]) }
            .min { ($0.1, $0.0) < ($1.1, $1.0) }?.0 ?? "none"
        let removed = try await container.performBackgroundTask { context in
            try context.execute(BatchDeleteRequest<InstalledPackage>(predicate: #Predicate { $0.section == smallest }))
        }
        view.mergePendingSaves()   // automatic merging has it scheduled; done now, to count
        let packagesLeft = try view.count(for: FetchRequest<InstalledPackage>())
        let fresh = try await container.performBackgroundTask { try $0.count(for: FetchRequest<InstalledPackage>()) }
        let packagesRemoved = removed.deleted.count { $0.entityName == "InstalledPackage" }
        print("A batch update gave \(unprioritized.updated.count) packages without a priority the priority \"unknown\"; a batch delete removed the package\(packagesRemoved == 1 ? "" : "s") of section \(smallest) (\(packagesRemoved)) and, by the cascade rule, their \(removed.deleted.count - packagesRemoved) dependencies; the view context, with no merge code, counts \(packagesLeft) packages (a fresh context: \(fresh))")
        if packagesLeft != fresh { throw LoomError(.storeFailure, "The view context counts \(packagesLeft) packages after the batch requests, a fresh context \(fresh).") }
    }
}
