import Foundation
import Testing

// The code between the markers is README.md's versioned-migration example, checked line for line
// by scripts/check-readme.py.

// BEGIN README VERSIONED MIGRATION
import Loom

enum RecipesV1: VersionedSchema {
    static let versionIdentifier = Schema.Version(1, 0, 0)
    static var models: [any PersistentModel.Type] { [Recipe.self] }

    @Model final class Recipe {
        var name: String
        var minutes: Int
        init(name: String, minutes: Int) { self.name = name; self.minutes = minutes }
    }
}

enum RecipesV2: VersionedSchema {
    static let versionIdentifier = Schema.Version(2, 0, 0)
    static var models: [any PersistentModel.Type] { [Recipe.self] }

    @Model final class Recipe {
        @Attribute(.unique, originalName: "name") var title: String   // renamed, and now unique
        var minutes: Int
        var isQuick: Bool = false                                     // filled by didMigrate
        init(title: String, minutes: Int) { self.title = title; self.minutes = minutes }
    }
}

enum RecipesPlan: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { [RecipesV1.self, RecipesV2.self] }
    static var stages: [MigrationStage] {
        [.custom(
            fromVersion: RecipesV1.self, toVersion: RecipesV2.self,
            willMigrate: { context in   // the old model: remove what the new one refuses
                var seen: Set<String> = []
                for recipe in try context.fetch(FetchRequest<RecipesV1.Recipe>(sortBy: [SortDescriptor(\.minutes)])) {
                    if !seen.insert(recipe.name).inserted { context.delete(recipe) }
                }
            },
            didMigrate: { context in    // the new model: fill what it adds
                for recipe in try context.fetch(FetchRequest<RecipesV2.Recipe>()) { recipe.isQuick = recipe.minutes <= 15 }
            })]
    }
}

func openTheNextVersion(at url: URL) async throws -> [String] {
    let v1 = try await PersistentContainer(name: "Recipes", for: RecipesV1.self, location: .file(url))
    try await v1.save { context in
        context.insert(RecipesV1.Recipe(name: "Omelette", minutes: 10))
        context.insert(RecipesV1.Recipe(name: "Omelette", minutes: 12))   // a duplicate name
        context.insert(RecipesV1.Recipe(name: "Stew", minutes: 120))
    }
    try await v1.close()

    // What would run, without touching the file: ["custom 1.0.0 → 2.0.0"]
    print(try PersistentContainer.requiredMigrationStages(forStoreAt: url, version: RecipesV2.self, migrationPlan: RecipesPlan.self))

    // Each step commits on its own: killed half-way, the next open resumes where it stopped.
    let opening = PersistentContainer.opening(name: "Recipes", for: RecipesV2.self, migrationPlan: RecipesPlan.self, location: .file(url))
    for await step in opening.progress { print(step) }   // "custom 1.0.0 → 2.0.0: willMigrate (0/1 stages, 0%)" …
    let v2 = try await opening.container
    let recipes = try await v2.performBackgroundTask { context in
        try context.fetch(FetchRequest<RecipesV2.Recipe>(sortBy: [SortDescriptor(\.title)])).map { "\($0.title) \($0.isQuick)" }
    }
    try await v2.close()
    return recipes   // ["Omelette true", "Stew false"]
}
// END README VERSIONED MIGRATION

@Test("README: a store migrated through a plan with a custom stage")
func readmeVersionedMigration() async throws {
    let url = TemporaryDirectory.make().appending(path: "recipes.loom")
    #expect(try await openTheNextVersion(at: url) == ["Omelette true", "Stew false"])
}
