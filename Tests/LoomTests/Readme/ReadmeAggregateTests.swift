import Foundation
import Loom
import Testing

// README.md's values-and-batches example, checked line for line by scripts/check-readme.py.
// It uses the models of the object-graph example (ReadmeObjectGraphTests.swift).

// BEGIN README AGGREGATES
@MainActor
func kitchenFigures() throws -> [String] {
    let container = try PersistentContainer(name: "Figures", for: Chef.self, Dish.self, Ingredient.self, Step.self, location: .inMemory)
    let context = container.viewContext
    let ann = Chef(name: "Ann"), bob = Chef(name: "Bob")
    context.insert(ann)
    context.insert(bob)
    for (title, minutes, chef) in [("Soup", 40, ann), ("Salad", 10, ann), ("Stew", 90, bob)] {
        Dish(title: title, minutes: minutes).chef = chef  // inserts the dish
    }
    try context.save()

    // Dishes and minutes per chef, most minutes first: one GROUP BY query, no objects made.
    let perChef = try context.fetch(PropertyFetchRequest<Dish>(
        properties: [.value(\.chef?.name, as: "chef"), .count(as: "dishes"), .sum(\.minutes, as: "minutes")],
        groupBy: [\.chef?.name],
        sortBy: [ResultSort("minutes", order: .reverse)]))
    let lines = try perChef.map { row in
        "\(try row["chef", as: String.self]): \(try row["dishes", as: Int.self]) dishes, \(try row["minutes", as: Int.self]) min"
    }   // ["Bob: 1 dishes, 90 min", "Ann: 2 dishes, 50 min"]

    // Unsaved changes count too (Core Data's dictionary results ignore them).
    Dish(title: "Toast", minutes: 5).chef = bob
    let average = try context.fetch(PropertyFetchRequest<Dish>(
        properties: [.average(\.minutes, as: "average")]))[0]["average", as: Double.self]   // 36.25

    // A large result read 100 objects per query; only the current batch is kept alive.
    var titles: [String] = []
    for dish in try context.fetch(FetchRequest<Dish>(sortBy: [SortDescriptor(\.title)]), batchSize: 100) {
        titles.append(dish.title)
    }
    return lines + ["\(average)"] + titles
}
// END README AGGREGATES

@Suite("README aggregates")
struct ReadmeAggregateTests {
    @Test("The values-and-batches example runs as the README says")
    @MainActor func kitchenFiguresRun() throws {
        #expect(try kitchenFigures() == ["Bob: 1 dishes, 90 min", "Ann: 2 dishes, 50 min", "36.25", "Salad", "Soup", "Stew", "Toast"])
    }
}
