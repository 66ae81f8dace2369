import Foundation
import Loom
import Testing

// The Performance article's example (Sources/Loom/Loom.docc/Performance.md), checked line for
// line by scripts/check-readme.py. It uses the models of the object-graph example
// (ReadmeObjectGraphTests.swift).

// BEGIN README PERFORMANCE
/// A kitchen's daily chores, each in its cheaper form.
func dailyChores(in container: PersistentContainer) async throws -> [String] {
    try await container.performBackgroundTask { context in
        // Walking every chef's dishes: one query for all of them, not one per chef.
        var chefs = FetchRequest<Chef>(sortBy: [SortDescriptor(\.name)])
        chefs.relationshipKeyPathsForPrefetching = [\.dishes]
        let lines = try context.fetch(chefs).map { "\($0.name): \($0.dishes.count) dishes" }

        // Reading many objects once: 500 rows a query, only the current batch kept alive.
        var minutes = 0
        for dish in try context.fetch(FetchRequest<Dish>(), batchSize: 500) { minutes += dish.minutes }

        // Many new objects: a save every 1,000 keeps each save's work and memory bounded.
        for index in 1...2_500 {
            context.insert(Dish(title: "Special \(index)", minutes: 15))
            if index.isMultiple(of: 1_000) { try context.save() }
        }
        try context.save()

        // A change to many rows: in SQL, with no object made; merging contexts still see it.
        var cap = BatchUpdateRequest<Dish>(predicate: #Predicate { $0.minutes > 120 }, set: [.set(\.minutes, to: 120)])
        cap.resultType = .counts
        try context.execute(cap)
        return lines + ["\(minutes) minutes"]
    }
}
// END README PERFORMANCE

@Suite("README performance")
struct ReadmePerformanceTests {
    @Test("The Performance article's chores run as it says, and the view context sees their saves and batch update")
    @MainActor func dailyChoresRun() async throws {
        let container = try PersistentContainer(name: "Chores", for: Chef.self, Dish.self, Ingredient.self, Step.self, location: .inMemory)
        let view = container.viewContext
        let ann = Chef(name: "Ann"), bob = Chef(name: "Bob")
        view.insert(ann)
        view.insert(bob)
        for (title, minutes, chef) in [("Soup", 40, ann), ("Roast", 240, ann), ("Stew", 90, bob)] {
            Dish(title: title, minutes: minutes).chef = chef
        }
        try view.save()

        #expect(try await dailyChores(in: container) == ["Ann: 2 dishes", "Bob: 1 dishes", "370 minutes"])
        try await settle { (try? view.count(for: FetchRequest<Dish>())) == 2_503 }
        // The batch update capped the roast in the store, and the view context merged it.
        try await settle {
            (try? view.fetch(FetchRequest<Dish>(predicate: #Predicate { $0.title == "Roast" })).first?.minutes) == 120
        }
        #expect(try view.count(for: FetchRequest<Dish>(predicate: #Predicate { $0.minutes > 120 })) == 0)
    }
}
