import Foundation
import Testing
@testable import BoardAPI

/// The throwaway database `./scripts/test` starts; `nil` outside it.
let databaseURL = ProcessInfo.processInfo.environment["LOOM_TEST_POSTGRES_URL"]

/// `board-server` processes on one PostgreSQL database, as app servers behind a load balancer
/// would run. Needs `LOOM_TEST_POSTGRES_URL` (`./scripts/test` starts a throwaway server and sets
/// it); skipped without it.
@Suite(
    "Board servers on PostgreSQL", .timeLimit(.minutes(5)),
    .enabled(if: databaseURL != nil, "LOOM_TEST_POSTGRES_URL is not set"))
struct PostgreSQLServerTests {
    /// A URL of the test database with a schema of its own, so that each test starts empty.
    static func freshSchema(of url: String) -> String {
        let schema = "board_" + UUID().uuidString.prefix(8).lowercased()
        return url + (url.contains("?") ? "&" : "?") + "schema=" + schema
    }

    @Test("A write through one server is read through the other, and If-Match holds across both")
    func twoServersOneDatabase() async throws {
        let url = Self.freshSchema(of: try #require(databaseURL))
        // Server A reads the URL from the environment, as a deployment passes a password.
        try await ServerProcess.with([([], ["BOARD_SERVER_POSTGRES_URL": url]), (["--postgres", url], [:])]) { servers in
            let (a, b) = (servers[0].client, servers[1].client)
            let board = try await a.post("boards", #"{"name": "Shared"}"#).decode(BoardJSON.self)
            #expect(try await b.get("boards/\(board.id)").decode(BoardJSON.self) == board)
            let label = try await b.post("boards/\(board.id)/labels", #"{"name": "bug"}"#).decode(LabelJSON.self)
            let card = try await a.post("boards/\(board.id)/cards", #"{"title": "Crash on start", "labels": [\#(label.id)]}"#).decode(CardJSON.self)
            #expect(try await b.get("labels/\(label.id)/cards").decode([CardJSON].self) == [card])

            // B changes the card; A serves the change and B's ETag.
            let changed = try await b.patch("cards/\(card.id)", #"{"details": "since 2.1"}"#, ifMatch: #""1""#)
            #expect(changed.status == 200)
            let seen = try await a.get("cards/\(card.id)")
            #expect(try seen.decode(CardJSON.self).details == "since 2.1")
            #expect(seen.header("ETag") == #""2""#)
            // A's client still holding the first ETag is refused.
            #expect(try await a.patch("cards/\(card.id)", #"{"details": "stale"}"#, ifMatch: #""1""#).status == 412)

            // A uniqueness conflict between servers: Loom's message, 409.
            let taken = try await b.post("boards", #"{"name": "Shared"}"#)
            #expect(taken.status == 409)
        }
    }

    @Test("Two servers racing to change one card with the same If-Match: one wins, the other gets 412")
    func racingWritesAcrossServers() async throws {
        let url = Self.freshSchema(of: try #require(databaseURL))
        try await ServerProcess.with([(["--postgres", url], [:]), (["--postgres", url], [:])]) { servers in
            let (a, b) = (servers[0].client, servers[1].client)
            let board = try await a.post("boards", #"{"name": "Race"}"#).decode(BoardJSON.self)
            for round in 0..<8 {
                let card = try await a.post("boards/\(board.id)/cards", #"{"title": "Card \#(round)"}"#).decode(CardJSON.self)
                async let first = a.patch("cards/\(card.id)", #"{"details": "from A"}"#, ifMatch: #""1""#)
                async let second = b.patch("cards/\(card.id)", #"{"details": "from B"}"#, ifMatch: #""1""#)
                let statuses = try await [first.status, second.status].sorted()
                #expect(statuses == [200, 412], "round \(round)")
                let kept = try await b.get("cards/\(card.id)").decode(CardJSON.self)
                #expect(kept.revision == 2 && ["from A", "from B"].contains(kept.details))
            }
        }
    }

    @Test("While the database is down requests fail with 503; the server serves again once it is back")
    func storeFailureIs503() async throws {
        // A PostgreSQL server of this test's own, stopped and started again under the server.
        let cluster = try PostgreSQLCluster()
        defer { cluster.remove() }
        try await ServerProcess.with([(["--postgres", Self.freshSchema(of: cluster.url)], [:])]) { servers in
            let server = servers[0]
            let board = try await server.client.post("boards", #"{"name": "Outage"}"#).decode(BoardJSON.self)
            try cluster.run("halt")
            let down = try await server.client.get("boards/\(board.id)")
            #expect(down.status == 503)
            #expect(!down.message.isEmpty)
            #expect(try await server.client.post("boards", #"{"name": "Lost"}"#).status == 503)
            try cluster.run("resume")
            var status = 0
            let deadline = ContinuousClock.now + .seconds(30)
            while status != 200, ContinuousClock.now < deadline {
                status = try await server.client.get("boards/\(board.id)").status
                if status != 200 { try await Task.sleep(for: .milliseconds(200)) }
            }
            #expect(status == 200)
            #expect(try await server.client.get("boards").decode([BoardJSON].self).map(\.name) == ["Outage"])
        }
    }
}

/// A throwaway PostgreSQL cluster from Loom's `scripts/postgres-cluster`.
struct PostgreSQLCluster {
    let folder: URL
    let url: String
    private static let script = URL(filePath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()
        .appending(path: "scripts/postgres-cluster")

    init() throws {
        folder = FileManager.default.temporaryDirectory.appending(path: "board-postgres-\(UUID().uuidString)")
        url = try Self.run(["start", folder.path]).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Runs `postgres-cluster command` on this cluster (`halt`, `resume`).
    func run(_ command: String) throws { _ = try Self.run([command, folder.path]) }

    /// Stops the cluster and deletes its folder.
    func remove() { _ = try? Self.run(["stop", folder.path]) }

    private static func run(_ arguments: [String]) throws -> String {
        // posix_spawn and waitpid, not Foundation's Process: the PostgreSQL server that `start`
        // leaves running inherits the descriptor Process watches for its child's exit, so
        // `waitUntilExit` would never return. The output goes to a file for the same reason.
        let output = FileManager.default.temporaryDirectory.appending(path: "postgres-cluster-\(UUID().uuidString).out")
        defer { try? FileManager.default.removeItem(at: output) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, output.path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        let argv = ([script.path] + arguments).map { strdup($0) } + [nil]
        defer { for argument in argv { free(argument) } }
        var pid: pid_t = 0
        guard posix_spawn(&pid, script.path, &actions, nil, argv, environ) == 0 else {
            throw ServerFailure("postgres-cluster could not be started")
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        guard status == 0 else {
            throw ServerFailure("postgres-cluster \(arguments.joined(separator: " ")) failed (wait status \(status))")
        }
        return try String(contentsOf: output, encoding: .utf8)
    }
}
