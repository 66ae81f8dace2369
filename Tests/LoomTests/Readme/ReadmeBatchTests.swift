import Foundation
import Loom
import Testing

// The code between the markers is README.md's batch-request example (on the object graph's
// models), checked line for line by scripts/check-readme.py.

// BEGIN README BATCH REQUESTS
/// A menu feed imported with batch requests — chefs uniqued by their unique name, then their
/// dishes related to them by ID — then corrected and pruned in the store, with no objects made.
/// Every context that merges automatically (the view context too) reflects each request.
func importMenu(_ feed: [(chef: String, dish: String, minutes: Int)], into container: PersistentContainer) async throws -> BatchResult {
    try await container.performBackgroundTask { context in
        // One row per chef: a chef already saved is matched by name (and updated), others inserted.
        let names = Array(Set(feed.map(\.chef))).sorted()
        let chefs = try context.execute(BatchInsertRequest<Chef>(rows: names.map { [.set(\.name, to: $0)] }, uniquing: .update))
        let chefIDs = Dictionary(uniqueKeysWithValues: zip(names, chefs.objectIDs.compactMap(ObjectID<Chef>.init)))
        // Dishes related to their chef by ID: no fetch, no object.
        try context.execute(BatchInsertRequest<Dish>(rows: feed.map { item in
            [.set(\.title, to: item.dish), .set(\.minutes, to: item.minutes), .relate(\.chef, to: chefIDs[item.chef])]
        }))
        // In the store: no dish takes more than two hours… (the changed dishes counted, not
        // listed: a request over millions of objects need not hold their IDs)
        var cap = BatchUpdateRequest<Dish>(predicate: #Predicate { $0.minutes > 120 }, set: [.set(\.minutes, to: 120)])
        cap.resultType = .counts
        try context.execute(cap)
        // …and chefs without a dish leave, their delete rules applied in the store.
        return try context.execute(BatchDeleteRequest<Chef>(predicate: #Predicate { $0.dishes.isEmpty }))
    }
}
// END README BATCH REQUESTS

@Test("README: a menu imported, corrected and pruned with batch requests reaches the view context")
@MainActor
func readmeBatchRequests() async throws {
    let container = try PersistentContainer(name: "Menu", for: Chef.self, Dish.self, Ingredient.self, Step.self, location: .inMemory)
    let view = container.viewContext
    view.insert(Chef(name: "Idle"))
    try view.save()
    let feed = [(chef: "Ann", dish: "Soup", minutes: 40), ("Ann", "Roast", 240), ("Bob", "Salad", 10)]
    let pruned = try await importMenu(feed, into: container)
    #expect(pruned.deleted.count == 1)   // Idle
    try await settle { (try? view.fetch(FetchRequest<Chef>()).map(\.name).sorted()) == ["Ann", "Bob"] }
    let dishes = try view.fetch(FetchRequest<Dish>(sortBy: [SortDescriptor(\.title)])).map { "\($0.title) \($0.minutes) \($0.chef?.name ?? "-")" }
    #expect(dishes == ["Roast 120 Ann", "Salad 10 Bob", "Soup 40 Ann"])
    // Again: the chefs are matched, not duplicated.
    _ = try await importMenu(feed, into: container)
    try await settle { (try? view.count(for: FetchRequest<Dish>())) == 6 }
    #expect(try view.count(for: FetchRequest<Chef>()) == 2)
}

// BEGIN README IMPORT
/// A dish as a recipe site's JSON gives it.
struct DishJSON: Codable, Sendable {
    let title: String
    let minutes: Int
    let chef: String   // the chef's unique name
}

/// Imports a JSON feed of dishes, 5,000 per committed chunk: each dish inserted or updated by
/// its title (`uniquingBy`), linked to its chef by the chef's name with one lookup per chunk.
func importDishes(_ json: Data, into container: PersistentContainer) async throws -> ImportProgress {
    let dishes = try JSONDecoder().decode([DishJSON].self, from: json)
    return try await container.performBackgroundTask { context in
        let request = ImportRequest<Dish, DishJSON>(dishes, uniquingBy: [\Dish.title]) { dish in
            [.set(\.title, to: dish.title), .set(\.minutes, to: dish.minutes)]
        }.linking(\.chef, to: \Chef.name, by: \.chef)
        return try context.execute(request) { progress in print("\(progress.completed) of \(progress.total) dishes") }
    }
}
// END README IMPORT

@Test("README: a JSON feed of dishes imported, uniqued by title and linked to chefs by name")
@MainActor
func readmeImport() async throws {
    let container = try PersistentContainer(name: "Menu", for: Chef.self, Dish.self, Ingredient.self, Step.self, location: .inMemory)
    let view = container.viewContext
    view.insert(Chef(name: "Ann"))
    view.insert(Chef(name: "Bob"))
    view.insert(Dish(title: "Soup", minutes: 10))
    try view.save()
    let json = try JSONEncoder().encode([DishJSON(title: "Soup", minutes: 40, chef: "Ann"), DishJSON(title: "Salad", minutes: 10, chef: "Bob")])
    let done = try await importDishes(json, into: container)
    #expect(done.inserted == 1 && done.updated == 1 && done.completed == 2)
    try await settle { (try? view.fetch(FetchRequest<Dish>(sortBy: [SortDescriptor(\.title)])).map { "\($0.title) \($0.minutes) \($0.chef?.name ?? "-")" }) == ["Salad 10 Bob", "Soup 40 Ann"] }
}
