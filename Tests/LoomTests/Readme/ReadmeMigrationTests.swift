import Testing

// The code between the markers is README.md's migration example, checked line for line by
// scripts/check-readme.py.

// BEGIN README MIGRATION
import Foundation
import Loom

enum PantryV1 {
    @Model final class Item {
        var name: String
        var count: Int = 0
        init(name: String) { self.name = name }
    }
}

enum PantryV2 {
    @Model final class Item {
        @Attribute(originalName: "name") var title: String   // renamed: values are kept
        var count: Int = 0
        var expires: Date?                                   // new and optional
        var unit: String = "piece"                           // new and required, with a default
        init(title: String) { self.title = title }
    }
}

func openWithTheNextModel(at url: URL) async throws -> [String] {
    let v1 = try PersistentContainer(name: "Pantry", for: PantryV1.Item.self, location: .file(url))
    try await v1.save { context in context.insert(PantryV1.Item(name: "Rice")) }
    try await v1.close()

    // Opened with the next model, the store is migrated, in one transaction, before first use.
    let v2 = try PersistentContainer(name: "Pantry", for: PantryV2.Item.self, location: .file(url))
    let items = try await v2.performBackgroundTask { context in
        try context.fetch(FetchRequest<PantryV2.Item>()).map { "\($0.title): \($0.unit)" }
    }
    try await v2.close()
    return items   // ["Rice: piece"]
}
// END README MIGRATION

@Test("README: a store opened with the next model is migrated")
func readmeMigration() async throws {
    let url = TemporaryDirectory.make().appending(path: "pantry.loom")
    #expect(try await openWithTheNextModel(at: url) == ["Rice: piece"])
}
