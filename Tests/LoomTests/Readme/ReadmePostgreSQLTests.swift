import Foundation
import Loom
import LoomPostgreSQL
import Testing

// The code between the markers is README.md's PostgreSQL example, checked line for line by
// scripts/check-readme.py.

// BEGIN README POSTGRESQL
/// Two app servers on one database: each opens its own container on the same schema.
@MainActor
func twoAppServers(databaseURL: String) async throws -> String {
    let configuration = try PostgreSQLStore.Configuration(url: databaseURL)   // postgres://app@db:5432/library?schema=books
    let schema = try Schema(Book.self)
    let serverA = PersistentContainer(store: try PostgreSQLStore(configuration: configuration, schema: schema))
    let serverB = PersistentContainer(store: try PostgreSQLStore(configuration: configuration, schema: schema))

    // Server A's view context holds a book; server B changes it.
    let book = Book(isbn: "978-2", title: "Draft")
    serverA.viewContext.insert(book)
    try serverA.viewContext.save()
    let id = book.objectID
    let changes = serverA.remoteChanges()
    try await serverB.save { context in
        context.transactionAuthor = "server B"
        try context.existingObject(with: id).title = "Final"
    }
    // A's view context has merged B's commit (read from the history, woken by NOTIFY).
    for await change in changes where change.transactions.contains(where: { $0.author == "server B" }) { break }
    try await serverB.close()
    return book.title   // "Final", without a fetch
}
// END README POSTGRESQL

@Test("README: two app servers on one PostgreSQL database", PostgresServer.required)
@MainActor
func readmePostgreSQL() async throws {
    // A schema of its own on the test server.
    let url = try #require(PostgresServer.url) + "&schema=" + (try PostgresServer.configuration().schemaName)
    let title = try await twoAppServers(databaseURL: url)
    #expect(title == "Final")
}
