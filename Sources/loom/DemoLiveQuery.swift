import Foundation
import Loom

/// The demo's live query: the largest packages in sections by priority, redrawn in the terminal
/// from each change while the importers save, the way a table view applies them.
@MainActor
final class LargestPackagesView {
    typealias Results = LiveResults<InstalledPackage, String?>

    /// What the terminal shows: sections of package IDs, kept only by applying changes.
    private(set) var shown: [(key: String?, items: [ObjectID<InstalledPackage>])] = []
    private(set) var updates = 0
    private(set) var latest: Results?
    private var reader: Task<Void, any Error>?

    static let request = FetchRequest<InstalledPackage>(
        predicate: #Predicate { ($0.installedSizeKiB ?? 0) >= 10_240 },
        sortBy: [SortDescriptor(\.installedSizeKiB, order: .reverse), SortDescriptor(\.name)])

    /// Starts following the query on the view context.
    func start(_ view: ManagedObjectContext) throws {
        let live = try view.liveQuery(Self.request, sectionedBy: \.priority)
        reader = Task { @MainActor [weak self] in
            for try await results in live { self?.show(results) }
        }
    }

    private func show(_ results: Results) {
        latest = results
        guard let changes = results.changes else {
            shown = results.sections.map { ($0.key, $0.items) }
            return
        }
        Self.apply(changes, to: &shown, from: results)
        updates += 1
        if updates % 5 == 1 {
            let sections = shown.map { "\($0.key ?? "no priority") \($0.items.count)" }.joined(separator: ", ")
            print("  live (≥ 10 MiB, by priority), change \(updates): -\(changes.deletedItems.count) +\(changes.insertedItems.count) moved \(changes.movedItems.count) → \(sections)")
        }
    }

    /// Waits until the query has delivered the view context's current result, then stops.
    /// Whether the list shown, made only from the changes, is what a fetch returns now.
    func finish(_ view: ManagedObjectContext) async throws -> Bool {
        // The same request as a fetch: sections sort first.
        var request = Self.request
        request.sortBy.insert(SortDescriptor(\.priority), at: 0)
        let expected = try view.fetchIDs(request)
        for _ in 0..<10_000 where latest?.items != expected { await Task.yield() }
        reader?.cancel()
        return latest?.items == expected && shown.flatMap(\.items) == expected
    }

    /// Applies a change as a table view does: deletions and moved-away items at their old
    /// positions (from the end), deleted sections, new sections, then insertions and moved-in
    /// items at their new positions (from the start), the IDs taken from the new result.
    static func apply(_ changes: ResultChanges, to shown: inout [(key: String?, items: [ObjectID<InstalledPackage>])], from results: Results) {
        let removed = (changes.deletedItems + changes.movedItems.map(\.from)).sorted(by: >)
        for position in removed { shown[position.section].items.remove(at: position.item) }
        for section in changes.deletedSections.sorted(by: >) { shown.remove(at: section) }
        for section in changes.insertedSections.sorted() { shown.insert((results.sections[section].key, []), at: section) }
        for position in (changes.insertedItems + changes.movedItems.map(\.to)).sorted() {
            shown[position.section].items.insert(results[position], at: position.item)
        }
    }
}
