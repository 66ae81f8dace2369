import Foundation
import Loom

extension DemoCommand {
    /// Undo and redo on the view context: the package with the most dependencies renamed in one
    /// named step and deleted in another (its dependencies go by the cascade rule), both undone
    /// in memory, the deletion redone and undone again; then a save, which leaves the store as it
    /// was, checked against a fresh context.
    @MainActor
    static func showUndo(in container: PersistentContainer) async throws {
        let view = container.viewContext
        var request = FetchRequest<InstalledPackage>(sortBy: [SortDescriptor(\.name)])
        request.relationshipKeyPathsForPrefetching = [\.dependencies]
        guard let package = try view.fetch(request).max(by: { $0.dependencies.count < $1.dependencies.count }) else { return }
        let name = package.name, dependencies = package.dependencies.count
        let stack = UndoStack()
        view.undoManager = stack
        defer { view.undoManager = nil }

        view.undoGroup("Describe \(name)") { package.summary = "renamed by the demo" }
        view.undoGroup("Remove \(name)") { view.delete(package) }
        view.processPendingChanges()                    // the delete rules run at the end of the event
        let deleted = view.deleted.count
        let named = stack.undoActionName
        view.undo()                                     // the package and its dependencies are back
        let back = !package.isDeleted && package.dependencies.count == dependencies
        view.undo()                                     // and its summary
        let redoName = stack.redoActionName
        view.redo()
        view.undo()
        try view.save()                                 // nothing left to save: the store is unchanged
        let fresh = try await container.performBackgroundTask { context in
            try context.fetch(FetchRequest<InstalledPackage>(predicate: #Predicate { $0.name == name })).first.map { ($0.summary, $0.dependencies.count) }
        }
        print("Undo: \"\(named)\" deleted \(deleted) objects (\(name) and, by the cascade rule, its \(dependencies) dependencies) in memory; undone, \(back ? "all are back" : "NOT ALL ARE BACK"); \"\(redoName)\" undone too, the deletion redone and undone again; after a save a fresh context reads \(name) with \(fresh?.1 ?? 0) dependencies and its summary \(fresh?.0 == package.summary ? "as it was" : "CHANGED")")
        if fresh?.1 != dependencies || fresh?.0 != package.summary || !back {
            throw LoomError(.storeFailure, "Undo in the demo did not restore \(name).")
        }
    }
}
