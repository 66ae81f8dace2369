import Foundation
import Loom
import Testing

// The code between the markers is README.md's two-coordinator example, checked line for line
// by scripts/check-readme.py.

// BEGIN README TWO COORDINATORS
@MainActor
func showWhatTheImporterCommits(storeAt url: URL) async throws -> String {
    // Two containers on one file: two coordinators, as two processes would have.
    let app = try PersistentContainer(name: "Library", for: Book.self, location: .file(url))
    let importer = try PersistentContainer(name: "Library", for: Book.self, location: .file(url))
    let book = Book(isbn: "978-1", title: "Draft")
    app.viewContext.insert(book)
    try app.viewContext.save()
    let id = book.objectID

    let changes = app.remoteChanges()
    try await importer.save { context in
        context.transactionAuthor = "importer"
        try context.existingObject(with: id).title = "Final"
    }
    // The app's view context has merged the importer's commit by the time the event arrives.
    for await change in changes {
        if change.transactions.contains(where: { $0.author == "importer" }) { break }
    }
    try await importer.close()
    return book.title   // "Final", without a fetch
}
// END README TWO COORDINATORS

@Test("README: a second coordinator's commit reaches the view context")
@MainActor
func readmeTwoCoordinators() async throws {
    let title = try await showWhatTheImporterCommits(storeAt: TemporaryDirectory.make().appending(path: "two.loom"))
    #expect(title == "Final")
}
