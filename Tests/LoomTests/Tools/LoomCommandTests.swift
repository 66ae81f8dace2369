import Foundation
import Loom
@_spi(LoomStore) import LoomCore
import Testing

/// What every verb of the `loom` tool does when it fails, as a user sees it: one `Error: …`
/// message on standard error, by its message and never its Swift type, and the exit status of
/// the table in `loom --help` (2 when the verb fails, 64 for a wrong command line).
@Suite(.ownThreads) struct LoomCommandTests {
    /// The arguments that run `verb` on `store` (and a second path where it takes one).
    private static func arguments(_ verb: String, store: String, folder: URL) -> [String] {
        switch verb {
        case "query": [verb, store, "Book"]
        case "load": [verb, store, folder.appending(path: "copy.loom").path]
        default: [verb, store]
        }
    }

    static let verbs = ["inspect", "history", "query", "dump", "load", "verify"]

    /// A store with one book.
    private func makeStore(in folder: URL) async throws -> URL {
        let url = folder.appending(path: "library.loom")
        try await LoomExecutable.makeStore(at: url)
        return url
    }

    @Test(arguments: verbs)
    func aMissingFileIsOneErrorLineAndExitsTwo(_ verb: String) async throws {
        let folder = TemporaryDirectory.make()
        let missing = folder.appending(path: verb == "load" ? "absent.ndjson" : "absent.loom").path
        let output = try await LoomExecutable.run(Self.arguments(verb, store: missing, folder: folder))
        #expect(output.status == 2)
        let expected = verb == "load" ? "Error: The dump \(missing) does not exist; nothing was loaded.\n" : "Error: There is no store at \(missing).\n"
        #expect(output.standardError == expected)
        #expect(output.standardOutput.isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).isEmpty, "a failed verb leaves nothing behind")
    }

    @Test(arguments: verbs)
    func aFileThatIsNotAStoreIsAnErrorByItsMessageAndExitsTwo(_ verb: String) async throws {
        let folder = TemporaryDirectory.make()
        let url = folder.appending(path: "notes.txt")
        try Data("not a database\n".utf8).write(to: url)
        let output = try await LoomExecutable.run(Self.arguments(verb, store: url.path, folder: folder))
        #expect(output.status == 2)
        let lines = output.standardError.split(separator: "\n")
        #expect(lines.count == 1 && lines[0].hasPrefix("Error: "), "\(output.standardError)")
        // The store's path, or for load the dump's line.
        #expect(output.standardError.contains(verb == "load" ? "Error: line 1: " : url.path))
        #expect(!output.standardError.contains("LoomError") && !output.standardError.contains("LoomToolError"), "a message, not a Swift type name")
    }

    @Test(arguments: verbs)
    func aStoreErrorIsAnErrorByItsMessageAndExitsTwo(_ verb: String) async throws {
        let folder = TemporaryDirectory.make()
        let store = try await makeStore(in: folder)
        // What each verb cannot do with a sound store: a query it cannot read, a load over an
        // existing store, a PostgreSQL store for verify, a SQLite database that is not Loom's.
        let arguments: [String]
        let expected: String
        switch verb {
        case "query":
            arguments = ["query", store.path, #"Book where pages contains "x""#]
            expected = "Error: Book.pages is an integer64 attribute; 'contains' tests text (column 12)\n"
                + #"Book where pages contains "x""# + "\n" + String(repeating: " ", count: 11) + "^\n"
        case "load":
            let dump = try await LoomExecutable.run(["dump", store.path])
            try #require(dump.status == 0)
            try Data(dump.standardOutput.utf8).write(to: folder.appending(path: "library.ndjson"))
            arguments = ["load", folder.appending(path: "library.ndjson").path, store.path]
            expected = "Error: \(store.path) exists; load makes a new store: remove it or choose another path.\n"
        default:
            let foreign = folder.appending(path: "people.sqlite")
            try SQLiteStore.unsafeExecuteRawSQL("CREATE TABLE people (name TEXT)", at: foreign)
            arguments = [verb, foreign.path]
            expected = verb == "dump" ? "Error: \(foreign.path) is not a Loom store (it has no loom_metadata table).\n" : "Error: \(foreign.path) is not a Loom store (no saved schema).\n"
        }
        let output = try await LoomExecutable.run(arguments)
        #expect(output.status == 2)
        #expect(output.standardError == expected)
    }

    /// A PostgreSQL store no server answers for: nothing listens on port 1.
    @Test(.enabled(if: LoomExecutable.opensPostgreSQL, LoomExecutable.withoutTraitReason), arguments: ["inspect", "history", "query", "dump", "verify"])
    func aPostgreSQLServerThatIsNotThereIsAnErrorByItsMessageAndExitsTwo(_ verb: String) async throws {
        let url = "postgres://app@127.0.0.1:1/db?schema=library"
        let output = try await LoomExecutable.run(verb == "query" ? [verb, url, "Book"] : [verb, url])
        #expect(output.status == 2)
        #expect(output.standardError.hasPrefix("Error: The PostgreSQL store at 127.0.0.1:1/db, schema library could not be opened"), "\(output.standardError)")
        #expect(!output.standardError.contains("LoomError"))
        #expect(output.standardOutput.isEmpty)
    }

    /// The tool's default build links no PostgreSQL driver (`swift run loom demo` builds no TLS
    /// stack): a PostgreSQL URL is refused, saying how to get a tool that opens it.
    @Test(.disabled(if: LoomExecutable.opensPostgreSQL, "the tool was built with the PostgreSQL trait"), arguments: ["inspect", "history", "query", "dump", "verify", "load", "demo"])
    func withoutThePostgreSQLTraitAPostgreSQLURLIsRefusedSayingHowToBuildIt(_ verb: String) async throws {
        let url = "postgres://app@127.0.0.1:1/db?schema=library"
        let arguments = switch verb {
        case "query": [verb, url, "Book"]
        case "demo": [verb, "--postgres", url]
        case "load": [verb, "-", url]
        default: [verb, url]
        }
        let output = try await LoomExecutable.run(arguments)
        #expect(output.status == 2)
        #expect(output.standardError == "Error: \(url) is a PostgreSQL URL, and this loom was built without PostgreSQL support: build or run it with the PostgreSQL trait (swift run --traits PostgreSQL loom …).\n")
        #expect(output.standardOutput.isEmpty)
    }

    @Test(arguments: verbs)
    func aWrongCommandLineIsAUsageErrorAndExits64(_ verb: String) async throws {
        for arguments in [[verb], [verb, "--no-such-option", "x", "y"]] {
            let output = try await LoomExecutable.run(arguments)
            #expect(output.status == 64, "\(arguments)")
            #expect(output.standardError.hasPrefix("Error: "), "\(output.standardError)")
            #expect(output.standardError.contains("Usage: loom \(verb)"))
        }
    }

    @Test func verifyExitsOneForProblemsFoundAndZeroForNone() async throws {
        let store = try await makeStore(in: TemporaryDirectory.make())
        #expect(try await LoomExecutable.run(["verify", store.path]).status == 0)
        try SQLiteStore.unsafeExecuteRawSQL(#"UPDATE "Book" SET "Z_OPT" = 0"#, at: store)
        let damaged = try await LoomExecutable.run(["verify", store.path])
        #expect(damaged.status == 1)
        #expect(damaged.standardError.isEmpty, "findings are the output, not an error")
    }

    @Test func helpShowsTheExitStatusTable() async throws {
        let output = try await LoomExecutable.run(["--help"])
        #expect(output.status == 0)
        for line in ["0   done", "1   verify found problems", "2   the verb failed", "64  the command line is wrong"] {
            #expect(output.standardOutput.contains(line), "\(line)")
        }
    }

    @Test func generatedMessagesTakeTheArticleOfTheWordsSound() {
        #expect(English.a("integer64") == "an integer64")
        #expect(English.a("Author") == "an Author")
        #expect(English.a("Int") == "an Int")
        #expect(English.a("string") == "a string")
        #expect(English.a("UUID") == "a UUID")
        #expect(English.a("URL") == "a URL")
        #expect(English.a("url") == "a url")
        #expect(English.a("User") == "a User")
        #expect(English.a("Umbrella") == "an Umbrella")
        #expect(English.a(Int.self) == "an Int")
        #expect(English.a("") == "a ")
    }
}
