import Foundation
import Loom
@_spi(LoomTesting) import LoomCore
import Testing

// The code between the markers is README.md's query-generation example, checked line for line
// by scripts/check-readme.py.

// BEGIN README QUERY GENERATIONS
/// A report that reads one moment of the store, however long it takes and whatever is saved
/// meanwhile: its count and its list always agree.
func consistentReport(_ container: PersistentContainer) async throws -> (count: Int, titles: [String]) {
    try await container.performBackgroundTask { context in
        try context.setQueryGenerationFrom(.current)
        let count = try context.count(for: FetchRequest<Book>())
        // Other contexts, coordinators or processes may commit here: this context does not see it.
        let titles = try context.fetch(FetchRequest<Book>(sortBy: [SortDescriptor(\.title)])).map(\.title)
        return (count, titles)
    }
}

/// Apple's recommended set-up for a UI: the view context reads one generation, and moves to the
/// next one each time it merges a save (and on its own saves).
@MainActor
func pinViewContext(of container: PersistentContainer) throws {
    container.viewContext.automaticallyMergesChanges = true
    try container.viewContext.setQueryGenerationFrom(.current)
}
// END README QUERY GENERATIONS

@Test("README: a report pinned to one query generation stays consistent while another context saves")
@MainActor
func readmeQueryGenerations() async throws {
    let container = try PersistentContainer(name: "Library", for: Book.self, location: .file(TemporaryDirectory.make().appending(path: "report.loom")))
    try pinViewContext(of: container)
    let writer = Task.detached {
        for i in 0..<50 {
            try await container.save(mergingIntoViewContext: true) { context in context.insert(Book(isbn: "\(i)", title: "Book \(i)")) }
        }
    }
    for _ in 0..<20 {
        let report = try await consistentReport(container)
        #expect(report.count == report.titles.count)
    }
    try await writer.value
    container.viewContext.mergePendingSaves()
    #expect(try container.viewContext.count(for: FetchRequest<Book>()) == 50)
    #expect(container.viewContext.queryGenerationToken != nil)
}
