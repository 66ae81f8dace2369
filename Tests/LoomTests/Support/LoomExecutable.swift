import Foundation
import Loom
import Testing

/// The built `loom` tool, run as a child process: the command-line tests drive the real
/// executable on real stores, as a user would.
///
/// `swift build --build-tests` builds it beside the test bundle (`.build/debug/loom`).
enum LoomExecutable {
    /// What one run printed and how it ended.
    struct Output: Sendable {
        var status: Int32
        var standardOutput: String
        var standardError: String
    }

    /// Whether the tool opens PostgreSQL stores: it was built with the package's `PostgreSQL`
    /// trait, as these tests were (a trait is a compilation condition of every target of the
    /// package, so the tests and the tool beside them agree).
    #if PostgreSQL
    static let opensPostgreSQL = true
    #else
    static let opensPostgreSQL = false
    #endif

    /// Why a test of the tool on PostgreSQL is skipped in a build without the trait.
    static let withoutTraitReason: Comment = "the tool was built without the PostgreSQL trait (./scripts/test builds with --traits PostgreSQL)"

    /// Returns when the tool opens PostgreSQL stores; otherwise records a warning that says why
    /// and cancels the current test case, as ``PostgresServer/requireServer()`` does.
    static func requirePostgreSQLTrait() throws {
        guard !opensPostgreSQL else { return }
        Issue.record(withoutTraitReason, severity: .warning)
        try Test.cancel(withoutTraitReason)
    }

    /// The executable beside the running test bundle.
    static var url: URL {
        URL(filePath: CommandLine.arguments[0]).deletingLastPathComponent().appending(path: "loom")
    }

    /// Runs `loom arguments…`, feeding `input` to its standard input, and waits for it to end
    /// (through ``ChildProcess``, not Foundation's `Process`: see there why) on a thread of its
    /// own: the caller suspends, so neither its actor (a main-actor suite's main actor) nor a
    /// thread of the cooperative pool is held while the tool runs.
    static func run(_ arguments: [String], input: Data? = nil, environment: [String: String] = [:]) async throws -> Output {
        let path = url.path, environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let output = try await onThreadOfItsOwn { try ChildProcess.run(path, arguments, input: input, environment: environment) }
        return Output(status: output.status,
                      standardOutput: String(decoding: output.standardOutput, as: UTF8.self),
                      standardError: String(decoding: output.standardError, as: UTF8.self))
    }

    /// A SQLite store at `url` holding one book, for a verb to run on.
    static func makeStore(at url: URL) async throws {
        let container = PersistentContainer(store: try SQLiteStore(url: url, schema: try Schema([Book.self])))
        try await container.performBackgroundTask { context in
            context.insert(Book(isbn: "1", title: "Dune"))
            try context.save()
        }
        try await container.close()
    }
}

@Suite(.ownThreads) struct LoomExecutableTests {
    @Test func helpListsTheVerbs() async throws {
        let output = try await LoomExecutable.run(["--help"])
        #expect(output.status == 0)
        #expect(output.standardOutput.contains("inspect"))
    }
}
