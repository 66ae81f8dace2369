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

// BEGIN README ERRORS
/// Saves a recipe whose name may be taken, saying which it was: an error is matched by its code.
func addRecipe(named name: String, to container: PersistentContainer) async throws -> String {
    try await container.performBackgroundTask { context in
        context.insert(Recipe(name: name, minutes: 10))
        do {
            try context.save()
            return "saved"
        } catch LoomError.Code.uniquenessViolation {
            context.rollback()   // the name is taken: drop the insert
            return "taken"
        } catch StoreErrorCode.sqliteBusy {
            return "busy"        // the store's own code, matched by name
        } catch {
            return "failed: \(error.localizedDescription)"
        }
    }
}
// END README ERRORS

@Suite("README")
struct ReadmeQuickStartTests {
    @Test("The quick start runs and finds what it saved")
    func quickStartRuns() async throws {
        #expect(try await quickStart() == ["Pancakes"])
    }

    @Test("A save's failure is caught by its code, as README shows")
    @MainActor
    func errorsAreCaughtByCode() async throws {
        let container = try PersistentContainer(name: "Cookbook", for: Recipe.self, location: .inMemory)
        #expect(try await addRecipe(named: "Pancakes", to: container) == "saved")
        #expect(try await addRecipe(named: "Pancakes", to: container) == "taken")
        #expect(try container.viewContext.count(for: FetchRequest<Recipe>()) == 1)
    }
}
