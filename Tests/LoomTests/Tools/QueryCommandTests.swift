import Foundation
import Loom
import Testing

/// `loom query`, run as the built executable on real stores that this test process keeps open.
@MainActor
@Suite("loom query", .ownThreads)
struct QueryCommandTests {
    let store: FilledGraphStore

    init() throws { store = try FilledGraphStore() }

    func query(_ arguments: String...) async throws -> LoomExecutable.Output {
        try await LoomExecutable.run(["query", store.url.path] + arguments)
    }

    /// The objects of a JSON array the tool printed.
    func objects(_ text: String) throws -> [[String: Any]] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: Any]])
    }

    @Test func printsAnAlignedTableWithURIsAttributesAndToOneRelationships() async throws {
        let output = try await query(#"Novel where author.name == "Ann" sort title"#)
        #expect(output.status == 0, "\(output.standardError)")
        let lines = output.standardOutput.split(separator: "\n").map(String.init)
        try #require(lines.count == 5, "\(output.standardOutput)")
        #expect(lines[0].split(separator: " ") == ["uri", "title", "pages", "year", "author"])
        #expect(lines[1].allSatisfy { $0 == "-" || $0 == " " })
        #expect(lines[2].hasPrefix("loom://") && lines[2].contains("Dune") && lines[2].contains("1965"))
        #expect(lines[3].contains("Émile") && lines[3].contains("nil"))
        #expect(lines[4] == "(2 objects)")
        // Aligned: every column starts at the header's offset.
        let titleColumn = lines[0].distance(from: lines[0].startIndex, to: lines[0].firstRange(of: "title")!.lowerBound)
        #expect(lines[2].dropFirst(titleColumn).hasPrefix("Dune"))
        #expect(lines[3].dropFirst(titleColumn).hasPrefix("Émile"))
    }

    @Test func printsJSONThatDecodes() async throws {
        let output = try await query(#"Author where any novels.pages > 100 or name == "Bob" sort name"#, "--json")
        #expect(output.status == 0, "\(output.standardError)")
        let authors = try objects(output.standardOutput)
        #expect(authors.map { $0["name"] as? String } == ["Ann", "Bob"])
        #expect(authors[0]["rating"] as? Int == 5)
        #expect(authors[0]["born"] as? String == "1940-03-01T00:00:00.000Z")
        #expect(authors[0]["mentor"] is NSNull)
        let ann = try #require(authors[0]["uri"] as? String)
        let annKey = try annKey()
        #expect(ann.hasPrefix("loom://") && ann.hasSuffix("/Author/\(annKey)"))
        #expect(authors[1]["mentor"] as? String == ann)
        #expect(try objects(try await query("Author where name == \"Zed\"", "--json").standardOutput).isEmpty)
    }

    func annKey() throws -> Int64 {
        try store.container.viewContext.fetch(FetchRequest<Author>(predicate: #Predicate { $0.name == "Ann" }))[0].objectID.primaryKey
    }

    @Test func encodesEveryAttributeTypeInJSON() async throws {
        let sampleURL = TemporaryDirectory.make().appending(path: "sample.loom")
        let samples = PersistentContainer(store: try SQLiteStore(url: sampleURL, schema: try Schema(Sample.self)))
        let sample = Sample()
        sample.flag = true
        sample.int = -7
        sample.double = 2.5
        sample.string = "a \"quoted\"\nline"
        sample.date = try #require(ISO8601DateFormatter().date(from: "2024-05-01T12:30:00Z"))
        sample.data = Data([1, 2, 3])
        sample.uuid = try #require(UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F"))
        sample.decimal = try #require(Decimal(string: "12.50"))
        sample.dimensions = Dimensions(width: 2, height: 3)
        samples.viewContext.insert(sample)
        try samples.viewContext.save()
        let output = try await LoomExecutable.run(["query", sampleURL.path, "Sample where flag and uuid == \"E621E1F8-C36C-495A-93FC-0C247A3E6E5F\"", "--json"])
        #expect(output.status == 0, "\(output.standardError)")
        let object = try #require(try objects(output.standardOutput).first)
        #expect(object["flag"] as? Bool == true)
        #expect(object["int"] as? Int == -7)
        #expect(object["double"] as? Double == 2.5)
        #expect(object["string"] as? String == "a \"quoted\"\nline")
        #expect(object["date"] as? String == "2024-05-01T12:30:00.000Z")
        #expect(object["data"] as? String == "AQID")
        #expect(object["uuid"] as? String == "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")
        #expect(object["decimal"] as? String == "12.5")
        #expect((object["dimensions"] as? [String: Any])?["width"] as? Double == 2)
        #expect(object["optionalString"] is NSNull)
    }

    @Test func printsTextHoldingANULCharacterWhole() async throws {
        let sampleURL = TemporaryDirectory.make().appending(path: "nul.loom")
        let samples = PersistentContainer(store: try SQLiteStore(url: sampleURL, schema: try Schema(Sample.self)))
        let sample = Sample()
        sample.string = "before\u{0}after"
        samples.viewContext.insert(sample)
        try samples.viewContext.save()
        let output = try await LoomExecutable.run(["query", sampleURL.path, "Sample", "--json"])
        #expect(output.status == 0, "\(output.standardError)")
        #expect(try objects(output.standardOutput).first?["string"] as? String == "before\u{0}after")
    }

    @Test func printsOneJSONObjectPerLineWithNDJSON() async throws {
        let output = try await query("Novel sort pages", "--ndjson")
        #expect(output.status == 0, "\(output.standardError)")
        let lines = output.standardOutput.split(separator: "\n")
        #expect(lines.count == 4)
        let titles = try lines.map { line in try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])["title"] as? String }
        #expect(titles == ["Fog", "Émile", "Gulf", "Dune"])
    }

    @Test func printsCSVQuotedAsRFC4180() async throws {
        let novel = Novel(title: "Hello, \"World\"", pages: 7)
        store.container.viewContext.insert(novel)
        try store.container.viewContext.save()
        let output = try await query("Novel where pages == 7", "--csv")
        #expect(output.status == 0, "\(output.standardError)")
        let key = novel.objectID.primaryKey
        let uri = novel.objectID.uriRepresentation.absoluteString
        #expect(key > 0)
        #expect(output.standardOutput == "uri,title,pages,year,author\r\n\(uri),\"Hello, \"\"World\"\"\",7,,\r\n")
    }

    @Test func aSyntaxErrorExitsNonZeroWithACaretUnderTheColumn() async throws {
        let output = try await query("Novel where pages > 1 sortt title")
        #expect(output.status == 2)
        #expect(output.standardOutput.isEmpty)
        let lines = output.standardError.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines[0].hasPrefix("Error: expected 'and', 'or', 'sort'") && lines[0].hasSuffix("(column 23)"))
        #expect(lines[1] == "Novel where pages > 1 sortt title")
        #expect(lines[2] == String(repeating: " ", count: 22) + "^")
        let unknown = try await query(#"Novel where titel == "x""#)
        #expect(unknown.status == 2 && unknown.standardError.contains("(did you mean 'title'?)"))
    }

    @Test func aMissingStoreIsAClearError() async throws {
        let missing = store.url.deletingLastPathComponent().appending(path: "missing.loom").path
        let output = try await LoomExecutable.run(["query", missing, "Novel"])
        #expect(output.status == 2)
        #expect(output.standardError == "Error: There is no store at \(missing).\n")
        #expect(!FileManager.default.fileExists(atPath: missing))
    }

    @Test func readsAStoreAnotherProcessHasOpenWithoutChangingIt() async throws {
        let files = ["", "-wal"].map { store.url.path + $0 }
        let before = files.map { FileManager.default.contents(atPath: $0) }
        let output = try await query("Novel where pages > 0")
        #expect(output.status == 0, "\(output.standardError)")
        #expect(output.standardOutput.hasSuffix("(4 objects)\n"))
        #expect(files.map { FileManager.default.contents(atPath: $0) } == before)
        // The store is still usable by its owner.
        store.container.viewContext.insert(Tag(name: "after"))
        try store.container.viewContext.save()
    }

    @Test func readsAClosedStoreWithoutChangingTheFile() async throws {
        let closedURL = TemporaryDirectory.make().appending(path: "closed.loom")
        let closed = PersistentContainer(store: try SQLiteStore(url: closedURL, schema: try Schema(StoreKind.graphTypes)))
        closed.viewContext.insert(Tag(name: "solo"))
        try closed.viewContext.save()
        try await closed.close()
        let before = FileManager.default.contents(atPath: closedURL.path)
        let output = try await LoomExecutable.run(["query", closedURL.path, "Tag", "--ndjson"])
        #expect(output.status == 0, "\(output.standardError)")
        #expect(output.standardOutput.contains(#""name":"solo""#))
        #expect(FileManager.default.contents(atPath: closedURL.path) == before)
    }

    @Test func helpShowsTheGrammarAndExamples() async throws {
        let output = try await LoomExecutable.run(["query", "--help"])
        #expect(output.status == 0)
        #expect(output.standardOutput.contains("Entity [where PREDICATE]"))
        #expect(output.standardOutput.contains("Examples:"))
        #expect(output.standardOutput.contains("--ndjson"))
    }
}
