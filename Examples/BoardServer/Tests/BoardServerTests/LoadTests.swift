import BoardLoad
import Foundation
import Testing
@testable import BoardAPI

/// The load generator's small form: a few seconds of the mixed workload against real server
/// processes, with its invariants asserted (the full form is `scripts/load`, with figures).
@Suite("Load: a short mixed run on SQLite", .timeLimit(.minutes(5)))
struct SQLiteLoadTests {
    @Test("One server on SQLite keeps every acknowledged write and every increment, and the check catches a lost one")
    func shortRunOnSQLite() async throws {
        let folder = FileManager.default.temporaryDirectory.appending(path: "boards-load-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        try await ServerProcess.with([(["--store", folder.appending(path: "boards.loom").path], [:])]) { servers in
            let result = try await LoadGenerator.run(LoadRuns.plan(servers, seconds: 3), label: "Loom on SQLite")
            LoadRuns.expectClean(result.report)

            // The check is not a formality: damage what the run wrote, behind its back, and it
            // must say what is missing.
            let client = servers[0].client
            let counter = try await client.get("cards/\(result.ledger.counter)").decode(CardJSON.self)
            #expect(try await client.patch("cards/\(counter.id)", #"{"position": \#(counter.position - 1)}"#).status == 200)
            let cards = result.ledger.cards.keys.sorted()
            #expect(try await client.delete("cards/\(cards[0])").status == 204)
            #expect(try await client.patch("cards/\(cards[1])", #"{"details": "overwritten"}"#).status == 200)
            let check = await LoadGenerator.verify(result.ledger, servers: servers.map(LoadRuns.url))
            #expect(check.violations.contains { $0.hasPrefix("Lost update: the counter is \(counter.position - 1)") })
            #expect(check.violations.contains { $0.hasPrefix("Card \(cards[0]), acknowledged, was answered 404") })
            #expect(check.violations.contains { $0.hasPrefix("Lost write: card \(cards[1])'s details are 'overwritten'") })
            #expect(check.violations.contains { $0.hasPrefix("Board \(result.ledger.cards[cards[0]]!.board)'s list lacks 1 acknowledged cards") })
        }
    }

    @Test("A plan out of range is refused before any request, saying which value")
    func plansOutOfRange() async throws {
        var plan = LoadPlan(servers: ["http://127.0.0.1:1"], bound: .operations(10))
        plan.concurrency = 0
        #expect(throws: LoadError.self) { try plan.validate() }
        #expect(throwsDescription(plan).contains("concurrency"))
        plan = LoadPlan(servers: [], bound: .operations(10))
        #expect(throwsDescription(plan).contains("no server"))
        plan = LoadPlan(servers: ["127.0.0.1:8080"], bound: .operations(10))
        #expect(throwsDescription(plan).contains("base URL"))
        plan = LoadPlan(servers: ["http://127.0.0.1:1"], bound: .duration(.zero))
        #expect(throwsDescription(plan).contains("duration"))
        plan = LoadPlan(servers: ["http://127.0.0.1:1"], bound: .operations(10), name: "a b")
        #expect(throwsDescription(plan).contains("name"))
        // A server that is not there: the setup fails with the address, nothing is reported.
        plan = LoadPlan(servers: ["http://127.0.0.1:1"], bound: .operations(1))
        plan.requestTimeout = .seconds(2)
        let unreachable = plan
        let error = await #expect(throws: LoadError.self) { try await LoadGenerator.run(unreachable, label: "none") }
        #expect(error?.description.contains("http://127.0.0.1:1 got no answer") == true)
    }

    private func throwsDescription(_ plan: LoadPlan) -> String {
        do { try plan.validate() } catch { return error.description }
        return ""
    }
}

/// The small form on PostgreSQL: Loom's servers and the raw postgres-nio baseline, one and two
/// processes on one database. Needs `LOOM_TEST_POSTGRES_URL`.
@Suite(
    "Load: short mixed runs on PostgreSQL", .timeLimit(.minutes(5)),
    .enabled(if: databaseURL != nil, "LOOM_TEST_POSTGRES_URL is not set"))
struct PostgreSQLLoadTests {
    @Test("Two Loom servers on one database: the load spread over both, nothing acknowledged lost")
    func twoLoomServers() async throws {
        let url = PostgreSQLServerTests.freshSchema(of: try #require(databaseURL))
        try await ServerProcess.with([(["--postgres", url], [:]), (["--postgres", url], [:])]) { servers in
            let result = try await LoadGenerator.run(LoadRuns.plan(servers, seconds: 3), label: "Loom on PostgreSQL, 2 servers")
            LoadRuns.expectClean(result.report)
            #expect(result.report.successesByServer.allSatisfy { $0 > 0 })
            #expect(Set(result.report.check.counterValues).count == 1)
        }
    }

    @Test("Two raw postgres-nio servers: the same workload, the same invariants")
    func twoRawServers() async throws {
        let url = PostgreSQLServerTests.freshSchema(of: try #require(databaseURL))
        try await ServerProcess.with([(["--postgres", url], [:]), (["--postgres", url], [:])], executable: "board-server-raw") { servers in
            let result = try await LoadGenerator.run(LoadRuns.plan(servers, seconds: 2), label: "raw postgres-nio, 2 servers")
            LoadRuns.expectClean(result.report)
            #expect(result.report.successesByServer.allSatisfy { $0 > 0 })
        }
    }

    @Test("The raw server answers the load's requests as board-server does: JSON, ETags, 404, 409, 412, 422")
    func rawServerSpeaksTheSameAPI() async throws {
        let database = try #require(databaseURL)
        try await ServerProcess.with([(["--postgres", PostgreSQLServerTests.freshSchema(of: database)], [:])]) { loom in
            try await ServerProcess.with([(["--postgres", PostgreSQLServerTests.freshSchema(of: database)], [:])], executable: "board-server-raw") { raw in
                let loomAnswers = try await LoadRuns.exchange(loom[0].client)
                let rawAnswers = try await LoadRuns.exchange(raw[0].client)
                #expect(rawAnswers.count == loomAnswers.count)
                for (step, (mine, theirs)) in zip(rawAnswers, loomAnswers).enumerated() {
                    #expect(mine == theirs, "step \(step)")
                }
            }
        }
    }
}

/// What the load tests share.
enum LoadRuns {
    static func url(_ server: ServerProcess) -> String { "http://127.0.0.1:\(server.port)" }

    /// A short plan against `servers`: 8 workers, a few boards.
    static func plan(_ servers: [ServerProcess], seconds: Int) -> LoadPlan {
        var plan = LoadPlan(servers: servers.map(url), bound: .duration(.seconds(seconds)))
        plan.concurrency = 8
        plan.boards = 4
        plan.cardsPerBoard = 4
        return plan
    }

    /// A run with no failed request, every kind of operation made, and its invariants holding.
    static func expectClean(_ report: LoadReport, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(report.errors.isEmpty, "\(report.text)", sourceLocation: sourceLocation)
        #expect(report.invariantsHold, "\(report.text)", sourceLocation: sourceLocation)
        #expect(report.unknownOutcomes == 0, sourceLocation: sourceLocation)
        #expect(Set(report.latencies.filter { $0.count > 0 }.map(\.kind)) == Set(OperationKind.allCases), "\(report.text)", sourceLocation: sourceLocation)
        #expect(report.check.acknowledgedIncrements > 0, sourceLocation: sourceLocation)
        #expect(report.check.counterValues.allSatisfy { $0 == report.check.acknowledgedIncrements }, sourceLocation: sourceLocation)
        #expect(report.check.cardsChecked > 0 && report.check.boardsChecked == 4 * report.servers, sourceLocation: sourceLocation)
        #expect(report.requests >= report.operations, sourceLocation: sourceLocation)
    }

    /// `{"error":{"message":"…"}}`, the API's errors.
    struct ErrorBody: Decodable {
        struct Detail: Decodable { var message: String }
        struct Identified: Decodable { var id: Int64 }
        var error: Detail
    }

    /// One answer, with what differs between two fresh stores (IDs) left out.
    struct Answer: Equatable, CustomStringConvertible {
        var status: Int
        var etag: String?
        var body: String
        var description: String { "\(status) \(etag ?? "-") \(body)" }
    }

    /// The load's requests and their edge cases, sent to `client`; IDs in bodies are replaced
    /// by `#`, messages kept to their first words (the servers word some differently).
    static func exchange(_ client: HTTPClient) async throws -> [Answer] {
        var answers: [Answer] = []
        func record(_ reply: HTTPReply) -> HTTPReply {
            var body = String(decoding: reply.body, as: UTF8.self)
            body = body.replacingOccurrences(of: #""(id|board)":\d+"#, with: "\"$1\":#", options: .regularExpression)
            // Error messages are worded by each server; their shape is the API's.
            if reply.status >= 400 { body = (try? reply.decode(ErrorBody.self)).map { _ in "an error message" } ?? body }
            answers.append(Answer(status: reply.status, etag: reply.header("ETag"), body: body))
            return reply
        }
        let board = try record(await client.post("boards", #"{"name": "Parity"}"#)).decode(ErrorBody.Identified.self).id
        _ = record(try await client.post("boards", #"{"name": "Parity"}"#))              // 409
        _ = record(try await client.get("boards/\(board)/cards"))                      // []
        let card = try record(await client.post("boards/\(board)/cards", #"{"title": "One", "position": 2}"#)).decode(CardJSON.self)
        _ = record(try await client.post("boards/\(board)/cards", #"{"details": "no title"}"#))   // 422
        _ = record(try await client.post("boards/\(board)/cards", #"{"title": "  "}"#))    // 422
        _ = record(try await client.post("boards/\(board)/cards", #"{"title": 3}"#))      // 400
        _ = record(try await client.post("boards/999999/cards", #"{"title": "Nowhere"}"#))  // 404
        _ = record(try await client.get("boards/999999/cards"))                         // 404
        _ = record(try await client.get("boards/x/cards"))                              // 400
        _ = record(try await client.get("cards/\(card.id)"))
        _ = record(try await client.patch("cards/\(card.id)", #"{"details": "changed"}"#, ifMatch: #""1""#))
        _ = record(try await client.patch("cards/\(card.id)", #"{"details": "stale"}"#, ifMatch: #""1""#))  // 412
        _ = record(try await client.patch("cards/\(card.id)", #"{"details": "changed"}"#, ifMatch: #""2""#)) // no change: revision stays
        _ = record(try await client.patch("cards/\(card.id)", #"{"position": 5}"#, ifMatch: #"W/"2", "7""#))
        _ = record(try await client.patch("cards/\(card.id)", #"{"position": 6}"#, ifMatch: "*"))
        _ = record(try await client.patch("cards/\(card.id)", #"{"position": 7}"#, ifMatch: #""abc""#))     // 412
        _ = record(try await client.patch("cards/\(card.id)", #"{"title": ""}"#))                           // 422
        _ = record(try await client.patch("cards/999999", #"{"details": "none"}"#, ifMatch: #""1""#))       // 404
        _ = record(try await client.get("cards/999999"))                                                    // 404
        _ = record(try await client.get("boards/\(board)/cards"))
        return answers
    }
}
