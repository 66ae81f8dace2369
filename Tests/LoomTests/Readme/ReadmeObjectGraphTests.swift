import Testing

// README.md's object-graph example, checked line for line by scripts/check-readme.py.

// BEGIN README OBJECT GRAPH
import Foundation
import Loom

@Model final class Chef {
    @Attribute(.unique) var name: String
    @Relationship(deleteRule: .cascade, inverse: \Dish.chef) var dishes: Set<Dish> = []   // to-many

    init(name: String) { self.name = name }
}

@Model final class Dish {
    var title: String
    var minutes: Int
    var chef: Chef?                                       // to-one, the inverse of Chef.dishes
    @Relationship(inverse: \Ingredient.dishes) var ingredients: Set<Ingredient> = []   // many-to-many
    @Relationship(deleteRule: .cascade) var steps: [Step] = []   // ordered to-many

    init(title: String, minutes: Int) {
        self.title = title
        self.minutes = minutes
    }
}

@Model final class Ingredient {
    @Attribute(.unique) var name: String
    var dishes: Set<Dish> = []

    init(name: String) { self.name = name }
}

@Model final class Step {
    var text: String
    @Relationship(inverse: \Dish.steps) var dish: Dish?

    init(_ text: String) { self.text = text }
}

@MainActor
func objectGraph() throws -> [String] {
    let container = try PersistentContainer(name: "Kitchen", for: Chef.self, Dish.self, Ingredient.self, Step.self, location: .inMemory)
    let context = container.viewContext
    let ann = Chef(name: "Ann")
    context.insert(ann)
    let soup = Dish(title: "Soup", minutes: 40)
    soup.chef = ann                                       // inserts the soup; ann.dishes == [soup]
    soup.ingredients = [Ingredient(name: "leek")]         // inserts the leek; its dishes == [soup]
    soup.steps = [Step("Chop"), Step("Simmer")]           // kept in this order
    try context.save()

    // Predicates and sorts cross relationships, in SQL and over unsaved changes alike.
    var request = FetchRequest<Chef>(predicate: #Predicate { $0.dishes.contains { $0.minutes > 30 } })
    request.relationshipKeyPathsForPrefetching = [\.dishes]   // one query for every chef's dishes
    let slowCooks = try context.fetch(request).map(\.name)   // ["Ann"]

    let leeky = try context.fetch(FetchRequest<Dish>(
        predicate: #Predicate { $0.chef?.name == "Ann" && $0.ingredients.contains { $0.name == "leek" } },
        sortBy: [SortDescriptor(\.chef?.name), SortDescriptor(\.title)])).map(\.title)   // ["Soup"]

    context.delete(ann)                                   // cascade: the soup and its steps go too
    try context.save()
    return slowCooks + leeky + ["\(try context.count(for: FetchRequest<Step>()))"]
}
// END README OBJECT GRAPH

@Suite("README object graph")
struct ReadmeObjectGraphTests {
    @Test("The object-graph example runs as the README says")
    @MainActor func objectGraphRuns() throws {
        #expect(try objectGraph() == ["Ann", "Soup", "0"])
    }
}
