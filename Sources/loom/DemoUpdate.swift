import DebianPackages
import Foundation
import Loom
@_spi(LoomTesting) import LoomCore

extension DemoCommand {
    /// A second run on the same store: the package list imported as uniqued batch inserts that
    /// update the store in place — maintainers matched by name and address, packages by name and
    /// architecture (inserted when new, updated where a value differs, left alone otherwise) —
    /// then the dependencies of the new and changed packages rebuilt on a background context, and
    /// the packages no longer installed deleted (their dependencies by the cascade rule).
    @MainActor
    static func updateImport(_ packages: [DebianPackage], into container: PersistentContainer) async throws {
        let started = ContinuousClock.now
        let summary = try await container.performBackgroundTask { context in
            context.transactionAuthor = "dpkg update"
            // Maintainers: one uniqued batch insert; the IDs come back in row order.
            var maintainerKeys: [String] = []
            var maintainerRows: [[BatchValue<Maintainer>]] = []
            for package in packages {
                guard let maintainer = package.maintainer else { continue }
                let key = "\(maintainer.name)\u{0}\(maintainer.email ?? "")"
                if maintainerKeys.contains(key) { continue }
                maintainerKeys.append(key)
                maintainerRows.append([.set(\.name, to: maintainer.name), .set(\.email, to: maintainer.email ?? "")])
            }
            let maintainers = try context.execute(BatchInsertRequest(rows: maintainerRows, uniquing: .update))
            var maintainerIDs: [String: ObjectID<Maintainer>] = [:]
            for (key, id) in zip(maintainerKeys, maintainers.objectIDs) { maintainerIDs[key] = ObjectID<Maintainer>(id) }

            // Packages: one uniqued batch insert, related to their maintainers by ID.
            let rows = packages.map { package -> [BatchValue<InstalledPackage>] in
                let maintainer = package.maintainer.flatMap { maintainerIDs["\($0.name)\u{0}\($0.email ?? "")"] }
                return [.set(\.name, to: package.name), .set(\.architecture, to: package.architecture ?? "all"),
                        .set(\.version, to: package.version ?? ""), .set(\.section, to: package.section),
                        .set(\.priority, to: package.priority), .set(\.installedSizeKiB, to: package.installedSizeKiB),
                        .set(\.summary, to: package.summary),
                        .set(\.dependencyCount, to: package.dependencies.count { !$0.alternatives.isEmpty }),
                        .relate(\.maintainer, to: maintainer)]
            }
            let result = try context.execute(BatchInsertRequest(rows: rows, uniquing: .update))

            // New and changed packages get their dependencies anew (merged into this context
            // already, like every batch request's changes).
            let changed = Set(result.inserted).union(result.updated)
            for (package, id) in zip(packages, result.objectIDs) where changed.contains(id) {
                guard let id = ObjectID<InstalledPackage>(id) else { continue }
                let record = try context.existingObject(with: id)
                for old in record.dependencies { context.delete(old) }
                for dependency in package.dependencies {
                    guard let first = dependency.alternatives.first else { continue }
                    let entry = PackageDependency(kind: dependency.kind.rawValue, targetName: first.name,
                                                  alternatives: dependency.alternatives.map(\.description).joined(separator: " | "))
                    entry.package = record
                }
            }
            try context.save()
            // Packages no longer installed; the cascade rule takes their dependencies.
            let installed = Set(result.objectIDs)
            let gone = try context.fetchIDs(FetchRequest<InstalledPackage>()).filter { !installed.contains($0.erased) }
            let removed = try context.execute(BatchDeleteRequest<InstalledPackage>(objectIDs: gone))
            let linked = try linkTargets(in: context)
            try context.save()
            return (result.inserted.count, result.updated.count, result.unchanged, removed.deleted.count { $0.entityName == "InstalledPackage" },
                    maintainers.inserted.count, linked)
        }
        container.viewContext.mergePendingSaves()
        let took = (ContinuousClock.now - started).formatted(.units(allowed: [.milliseconds]))
        print("Updated in place by uniqued batch inserts in \(took): \(summary.0) packages inserted, \(summary.1) updated, \(summary.2) unchanged, \(summary.3) no longer installed deleted; \(summary.4) new maintainers; dependencies rebuilt for the \(summary.0 + summary.1) new and changed packages (\(summary.5) linked to their targets)")
    }
}
