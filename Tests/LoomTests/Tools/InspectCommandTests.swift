import Foundation
import Loom
import LoomPostgreSQL
import Testing

/// `loom inspect` and `loom history`, run as the built executable on real stores.
@Suite(.ownThreads) struct InspectCommandTests {
    /// A store with two books, saved by an author.
    private func makeStore() async throws -> URL {
        let url = TemporaryDirectory.make().appending(path: "library.loom")
        let container = PersistentContainer(store: try SQLiteStore(url: url, schema: try Schema([Book.self, Shelf.self])))
        try await container.performBackgroundTask { context in
            context.transactionAuthor = "cataloguer"
            context.insert(Book(isbn: "1", title: "Dune"))
            context.insert(Book(isbn: "2", title: "Emma"))
            try context.save()
        }
        try await container.close()
        return url
    }

    @Test func inspectPrintsTheSavedSchemaAndCountsAsJSON() async throws {
        let url = try await makeStore()
        let output = try await LoomExecutable.run(["inspect", "--json", url.path])
        #expect(output.status == 0, "\(output.standardError)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(output.standardOutput.utf8)) as? [String: Any])
        let entities = try #require(report["entities"] as? [[String: Any]])
        let book = try #require(entities.first { $0["name"] as? String == "Book" })
        #expect(book["count"] as? Int == 2)
        let isbn = try #require((book["attributes"] as? [[String: Any]])?.first { $0["name"] as? String == "isbn" })
        #expect(isbn["unique"] as? Bool == true)
        #expect(isbn["type"] as? String == "string")
        let shelf = try #require(entities.first { $0["name"] as? String == "Shelf" })
        #expect(shelf["uniqueTogether"] as? [[String]] == [["room", "position"]])
        #expect(report["modelVersion"] == nil, "a store opened without a versioned schema has no model version")

        let text = try await LoomExecutable.run(["inspect", url.path])
        #expect(text.standardOutput.contains("Book: 2 objects"))
    }

    @Test(arguments: ["inspect", "history"])
    func readingChangesNothingInTheFile(_ verb: String) async throws {
        let url = try await makeStore()
        let before = try Data(contentsOf: url)
        let modified = try FileManager.default.attributesOfItem(atPath: url.path)[.modificationDate] as? Date
        let output = try await LoomExecutable.run([verb, url.path])
        #expect(output.status == 0)
        #expect(try Data(contentsOf: url) == before)
        #expect(try FileManager.default.attributesOfItem(atPath: url.path)[.modificationDate] as? Date == modified)
    }

    @Test func historyPrintsTransactionsAsJSON() async throws {
        let url = try await makeStore()
        let output = try await LoomExecutable.run(["history", "--json", url.path])
        #expect(output.status == 0, "\(output.standardError)")
        let transactions = try #require(try JSONSerialization.jsonObject(with: Data(output.standardOutput.utf8)) as? [[String: Any]])
        #expect(transactions.count == 1)
        #expect(transactions.first?["author"] as? String == "cataloguer")
        #expect((transactions.first?["changes"] as? [[String: Any]])?.count == 2)
    }

    @Test(arguments: ["inspect", "history"])
    func helpShowsExamples(_ verb: String) async throws {
        let output = try await LoomExecutable.run([verb, "--help"])
        #expect(output.status == 0)
        #expect(output.standardOutput.contains("Examples:"))
        #expect(output.standardOutput.contains("loom \(verb) /tmp/demo.loom"))
    }

    @Test(arguments: ["inspect", "history"])
    func aMissingStoreIsAClearErrorAndNothingIsCreated(_ verb: String) async throws {
        let url = TemporaryDirectory.make().appending(path: "missing.loom")
        let output = try await LoomExecutable.run([verb, url.path])
        #expect(output.status != 0)
        #expect(output.standardError.contains("missing.loom"))
        #expect(!FileManager.default.fileExists(atPath: url.path))
    }
}

/// The reading verbs on a PostgreSQL store, given as a URL (when a test server is there and the
/// tool was built with the `PostgreSQL` trait, as `./scripts/test` builds it).
@Suite(.enabled(if: PostgresServer.isEnabled && LoomExecutable.opensPostgreSQL)) struct PostgreSQLCommandTests {
    @Test func inspectQueryAndHistoryReadAPostgreSQLStore() async throws {
        let configuration = try PostgresServer.configuration()
        let container = PersistentContainer(store: try PostgreSQLStore(configuration: configuration, schema: try Schema([Book.self])))
        try await container.performBackgroundTask { context in
            context.transactionAuthor = "cataloguer"
            context.insert(Book(isbn: "1", title: "Dune", pages: 412))
            context.insert(Book(isbn: "2", title: "Emma", pages: 300))
            try context.save()
        }
        try await container.close()
        let base = try #require(PostgresServer.url)
        let url = base + (base.contains("?") ? "&" : "?") + "schema=" + configuration.schemaName

        let inspect = try await LoomExecutable.run(["inspect", url])
        #expect(inspect.status == 0, "\(inspect.standardError)")
        #expect(inspect.standardOutput.contains("Book: 2 objects"))

        let query = try await LoomExecutable.run(["query", url, #"Book where pages > 400 or title beginswith "E" sort title"#, "--csv"])
        #expect(query.status == 0, "\(query.standardError)")
        let lines = query.standardOutput.split(whereSeparator: \.isNewline)   // CSV ends lines with CRLF
        #expect(lines.count == 3)
        #expect(lines.dropFirst().first?.contains("Dune") == true && lines.last?.contains("Emma") == true)

        let history = try await LoomExecutable.run(["history", url, "--author", "cataloguer"])
        #expect(history.status == 0, "\(history.standardError)")
        #expect(history.standardOutput.contains("+ Book/"))
    }
}
