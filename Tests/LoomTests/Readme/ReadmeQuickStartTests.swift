import Testing

// The code between the markers is README.md's quick start, checked line for line by
// scripts/check-readme.py (blocks marked `compiled`), so that the README always shows code that compiles and runs.

// BEGIN README QUICK START
import Foundation
import Loom

@Model final class Recipe {
    @Attribute(.unique) var name: String
    var minutes: Int = 30
    var rating: Double?

    init(name: String, minutes: Int) {
        self.name = name
        self.minutes = minutes
    }
}

@MainActor
func quickStart() async throws -> [String] {
    // Omit `location:` for a SQLite file in ~/.local/share/Loom, or pass `.file(url)`.
    let container = try PersistentContainer(name: "Cookbook", for: Recipe.self, location: .inMemory)

    // Write on a background context; only Sendable values, such as IDs, come back.
    let id: ObjectID<Recipe> = try await container.performBackgroundTask { context in
        let recipe = Recipe(name: "Pancakes", minutes: 20)
        context.insert(recipe)
        try context.save()
        return recipe.objectID
    }

    // Read and edit on the main actor, through the view context.
    let context = container.viewContext
    let pancakes = try context.existingObject(with: id)
    pancakes.rating = 4.5
    try context.save()

    let quick = try context.fetch(FetchRequest<Recipe>(
        predicate: #Predicate { $0.minutes <= 30 },
        sortBy: [SortDescriptor(\.name)]))
    return quick.map(\.name)   // ["Pancakes"]
}
// END README QUICK START

@Suite("README")
struct ReadmeQuickStartTests {
    @Test("The quick start runs and finds what it saved")
    func quickStartRuns() async throws {
        #expect(try await quickStart() == ["Pancakes"])
    }
}
