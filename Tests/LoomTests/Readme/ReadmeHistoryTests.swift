import Foundation
import Testing

// The code between the markers is README.md's history example, checked line for line by
// scripts/check-readme.py.

// BEGIN README HISTORY
import Loom

func changesSinceLastTime(_ container: PersistentContainer, after token: HistoryToken?) async throws -> ([String], HistoryToken?) {
    try await container.save { context in
        context.transactionAuthor = "importer"
        context.insert(Book(isbn: "978-0", title: "Threads"))
    }
    return try await container.performBackgroundTask { context in
        // Everything committed after our token, oldest first, by anyone but ourselves.
        let transactions = try context.fetchHistory(HistoryDescriptor(after: token))
        let changes = transactions.flatMap { transaction in
            transaction.changes.map { "\(transaction.author ?? "-"): \($0.kind == .insert ? "inserted" : "changed") \($0.objectID)" }
        }
        // Keep the newest token; delete history only once every consumer has read it.
        return (changes, transactions.last?.token ?? token)
    }
}
// END README HISTORY

@Test("README: reading the history after a token")
func readmeHistory() async throws {
    let container = PersistentContainer(store: try SQLiteStore(url: TemporaryDirectory.make().appending(path: "h.loom"), schema: try Schema(Book.self)))
    let (changes, token) = try await changesSinceLastTime(container, after: nil)
    #expect(changes == ["importer: inserted Book/1"])
    #expect(token?.transactionNumber == 1)
    try await container.close()
}
