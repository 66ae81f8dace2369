import BoardLoad
import Foundation
import Synchronization
import Testing
@testable import BoardAPI

/// Faults under load (issue 42 point 5): an app server killed, the database restarted, while the
/// mixed workload runs. Needs `LOOM_TEST_POSTGRES_URL`.
@Suite(
    "Load: faults under load on PostgreSQL", .timeLimit(.minutes(5)),
    .enabled(if: databaseURL != nil, "LOOM_TEST_POSTGRES_URL is not set"))
struct LoadFaultTests {
    @Test("kill -9 of one of two servers mid-load: the other keeps serving, nothing acknowledged is lost, no lock lingers")
    func killOneServerMidLoad() async throws {
        let url = PostgreSQLServerTests.freshSchema(of: try #require(databaseURL))
        try await ServerProcess.with([(["--postgres", url], [:]), (["--postgres", url], [:])]) { servers in
            var plan = LoadRuns.plan(servers, seconds: 5)
            plan.checkServers = [LoadRuns.url(servers[0])]
            let start = Started()
            async let run = LoadGenerator.run(plan, label: "kill -9 of server 2", started: start.signal)
            _ = try await start.wait()
            try await Task.sleep(for: .seconds(1.5))
            let killedAt = ContinuousClock.now - start.instant!
            try await servers[1].killAbruptly()
            let report = try await run.report

            // Only the killed server's requests failed, and only as a dead server's do.
            for (kind, count) in report.errors {
                #expect(["connection refused", "connection closed", "connection reset"].contains { kind.hasSuffix($0) } || kind.hasSuffix(": 503"),
                        "\(kind) ×\(count)\n\(report.text)")
            }
            #expect(report.invariantsHold, "\(report.text)")
            // The survivor served all along: no second without an answer after the kill, so no
            // write of the survivor waited for a lock of the killed server's.
            let after = Array(report.timeline.dropFirst(tenths(killedAt)))
            #expect(!after.isEmpty)
            #expect(longestSilence(after) < 10, "a gap of \(longestSilence(after)) tenths of a second without an answer: \(after)")
            // And its writes go through at once now.
            let clock = ContinuousClock()
            let elapsed = try await clock.measure {
                let board = try await servers[0].client.post("boards", #"{"name": "after the kill"}"#)
                #expect(board.status == 201)
            }
            #expect(elapsed < .seconds(2))
        }
    }

    @Test("A PostgreSQL restart mid-load: 503 while it is down, served again within seconds, the live stream misses nothing")
    func databaseRestartMidLoad() async throws {
        let cluster = try PostgreSQLCluster()
        defer { cluster.remove() }
        try await restartScenario(cluster)
    }

    private func restartScenario(_ cluster: PostgreSQLCluster) async throws {
        let url = PostgreSQLServerTests.freshSchema(of: cluster.url)
        try await ServerProcess.with([(["--postgres", url], [:]), (["--postgres", url], [:])]) { servers in
            let plan = LoadRuns.plan(servers, seconds: 6)
            let start = Started()
            async let run = LoadGenerator.run(plan, label: "PostgreSQL restarted", started: start.signal)
            let boards = try await start.wait()
            // A client of server 2 follows a board that both servers write to.
            var stream = EventStream(port: servers[1].port, path: "boards/\(boards[0])/cards/events")
            let first = try await stream.next()
            var list = LiveCardList(try first.decode(CardResultsJSON.self))

            try await Task.sleep(for: .seconds(1.5))
            let haltedAt = ContinuousClock.now - start.instant!
            try cluster.run("halt")
            try await Task.sleep(for: .seconds(1.5))
            try cluster.run("resume")
            let resumedAt = ContinuousClock.now - start.instant!
            let report = try await run.report

            #expect(report.errors.keys.contains { $0.hasSuffix(": 503") }, "no request failed while the database was down\n\(report.text)")
            #expect(report.invariantsHold, "\(report.text)")
            let timeline = report.timeline
            #expect(timeline.prefix(tenths(haltedAt) - 1).allSatisfy { $0.failed == 0 }, "failures before the database went down")
            for (kind, count) in report.errors {
                #expect(kind.hasSuffix(": 503"), "\(kind) ×\(count)\n\(report.text)")
            }
            // Served again within 5 s of the database's return, and without failures since.
            let back = timeline.indices.dropFirst(tenths(resumedAt)).first { timeline[$0].ok > 0 && timeline[$0...].allSatisfy { $0.failed == 0 } }
            let recovered = try #require(back, "the servers never served without failures again: \(timeline.suffix(30))")
            #expect(recovered - tenths(resumedAt) < 50, "served again \(recovered - tenths(resumedAt)) tenths of a second after the database was back")
            let afterRecovery = Array(timeline.dropFirst(recovered))
            #expect(longestSilence(afterRecovery) < 20, "a stall of \(longestSilence(afterRecovery)) tenths of a second after the recovery")
            #expect(report.seconds < 6 + 10, "the 6 s run took \(report.seconds) s")

            // The stream's changes lead to the board as it is now. A stream whose live query
            // failed to read while the database was down ends with an `error` event; the client
            // then connects again, as EventSource does after `retry`, and starts from the whole list.
            let served = servers[0].client
            var current = try await served.get("boards/\(boards[0])/cards").decode([CardJSON].self)
            var reconnections = 0
            let deadline = ContinuousClock.now + .seconds(30)
            while list.cards != current, ContinuousClock.now < deadline {
                if stream.pending > 0 {
                    let event = try await stream.next()
                    if event.name == "changes" { try list.apply(try event.decode(CardChangesJSON.self)) }
                    #expect(["changes", "error"].contains(event.name), "\(event)")
                } else if stream.hasEnded {
                    #expect(reconnections < 3)
                    reconnections += 1
                    stream.close()
                    stream = EventStream(port: servers[1].port, path: "boards/\(boards[0])/cards/events")
                    list = LiveCardList(try await stream.next().decode(CardResultsJSON.self))
                } else {
                    try await Task.sleep(for: .milliseconds(50))
                }
                current = try await served.get("boards/\(boards[0])/cards").decode([CardJSON].self)
            }
            #expect(list.cards == current)
            stream.close()
        }
    }

    private func tenths(_ duration: Duration) -> Int {
        Int(duration.components.seconds * 10 + duration.components.attoseconds / 100_000_000_000_000_000)
    }

    /// The longest run of tenths of a second in which no request was answered as expected.
    private func longestSilence(_ timeline: [LoadReport.Tenth]) -> Int {
        var longest = 0, current = 0
        for tenth in timeline.dropLast() {
            current = tenth.ok == 0 ? current + 1 : 0
            longest = max(longest, current)
        }
        return longest
    }
}

/// The moment a load run's workers started, and its boards.
final class Started: Sendable {
    private let state = Mutex<(boards: [Int64], at: ContinuousClock.Instant)?>(nil)

    var signal: @Sendable ([Int64]) -> Void {
        { boards in self.state.withLock { $0 = (boards, .now) } }
    }

    var instant: ContinuousClock.Instant? { state.withLock { $0?.at } }

    /// The boards, once the run started (within two minutes).
    func wait() async throws -> [Int64] {
        let deadline = ContinuousClock.now + .seconds(120)
        while true {
            if let boards = state.withLock({ $0?.boards }) { return boards }
            guard ContinuousClock.now < deadline else { throw ServerFailure("The load run did not start") }
            try await Task.sleep(for: .milliseconds(10))
        }
    }
}
