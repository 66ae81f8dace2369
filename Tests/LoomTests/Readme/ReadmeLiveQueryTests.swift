import Foundation
import Loom
@_spi(LoomTesting) import LoomCore
import Testing

// The code between the markers is README.md's live-query example (on the object graph's
// models), checked line for line by scripts/check-readme.py.

// BEGIN README LIVE QUERIES
/// Dishes in sections by chef, quickest first, kept current on the main actor: the first
/// result, then after every change the new result with exactly what changed, as a table view
/// applies it (or a WebSocket sends it: results hold IDs, and are Sendable).
@MainActor
func followDishes(in container: PersistentContainer, show: (LiveResults<Dish, String?>) -> Void) async throws {
    let dishes = try container.viewContext.liveQuery(
        FetchRequest<Dish>(sortBy: [SortDescriptor(\.minutes)]), sectionedBy: \.chef?.name)
    for try await results in dishes {
        if let changes = results.changes {
            print("sections -\(changes.deletedSections) +\(changes.insertedSections);",
                  "items -\(changes.deletedItems.count) +\(changes.insertedItems.count)",
                  "moved \(changes.movedItems.count) updated \(changes.updatedItems.count)")
        }
        show(results)
    }
}

/// For SwiftUI-style code: an @Observable result that changes only when the IDs, their order
/// or sections change, or an observed property of one of them.
@MainActor
func quickDishes(in container: PersistentContainer) throws -> LiveResultsObserver<Dish, NoSection> {
    try LiveResultsObserver(FetchRequest<Dish>(predicate: #Predicate { $0.minutes < 20 }, sortBy: [SortDescriptor(\.title)]),
                            observing: [\Dish.title], in: container.viewContext)
}
// END README LIVE QUERIES

@Test("README: a live query follows a background save into the view context; renaming a chef moves their dishes", .timeLimit(.minutes(5)))
@MainActor
func readmeLiveQueries() async throws {
    let container = try PersistentContainer(name: "Kitchen", for: Chef.self, Dish.self, Ingredient.self, Step.self, location: .inMemory)
    let view = container.viewContext
    let ann = Chef(name: "Ann")
    view.insert(ann)
    let soup = Dish(title: "Soup", minutes: 15)
    soup.chef = ann
    view.insert(soup)
    try view.save()
    let quick = try quickDishes(in: container)
    #expect(quick.results.items == [soup.objectID])

    let shown = Shown()
    let follower = Task { @MainActor in try await followDishes(in: container) { shown.results.append($0) } }
    while shown.results.isEmpty { await Task.yield() }
    #expect(shown.results[0].sections.map(\.key) == ["Ann"])

    let chefID = ann.objectID
    try await container.performBackgroundTask { context in
        try context.existingObject(with: chefID).name = "Bea"
        context.insert(Dish(title: "Salad", minutes: 5))
        try context.save()
    }
    view.mergePendingSaves()
    while shown.results.count < 2 { await Task.yield() }
    let latest = shown.results[1]
    #expect(latest.sections.map(\.key) == [nil, "Bea"])
    #expect(latest.changes?.deletedSections == [0])
    #expect(latest.changes?.insertedSections == [0, 1])
    #expect(quick.results.count == 2)
    follower.cancel()
}

@MainActor
final class Shown {
    var results: [LiveResults<Dish, String?>] = []
}
