import Dispatch
import Foundation
@testable import LoomPostgreSQL
import NIOCore
import PostgresNIO
import Testing

/// A statement sent on a connection that closes under it ends its wait at once, not at the
/// response timeout: postgres-nio drops a statement that reaches a closed channel without
/// completing its future, which held a save (and with it every save of an app server) for the
/// whole timeout after a PostgreSQL restart under load (issue 42, point 5).
extension PostgreSQLConnectionFaultTests {
    @Test("A statement on a connection closed under it, or closing as it is sent, ends its wait within a second, as a lost connection")
    func statementOnClosedConnectionEndsAtOnce() async throws {
        let result = await #expect(processExitsWith: .success, observing: [\.standardOutputContent, \.standardErrorContent]) {
            try PostgreSQLConnectionFaultTests.statementOnClosedConnectionScenario()
        }
        Self.report(result)
    }

    /// Run in a child process by ``statementOnClosedConnectionEndsAtOnce()`` (a dropped statement
    /// must not trap the test run either): prints its figures, and exits 1 with the problems it
    /// found on standard error.
    nonisolated static func statementOnClosedConnectionScenario() throws {
        var configuration = try PostgresServer.configuration()
        // Long, so that a wait that runs to it cannot pass for a quick one.
        configuration.responseTimeout = .seconds(20)
        let bound: Duration = .seconds(1)
        let clock = ContinuousClock()
        var problems: [String] = []

        // Closed by postgres-nio beneath the store's connection, which does not know it yet.
        for sql in ["SELECT 1", "BEGIN"] {
            let connection = try PGConnection.open(configuration)
            try connection.connection.close().wait()
            let start = clock.now
            do {
                try connection.query(sql)
                problems.append("\(sql) on a closed connection succeeded")
            } catch {
                if !PGConnection.isLost(error) { problems.append("\(sql) on a closed connection: \(error), not a lost connection") }
            }
            if clock.now - start > bound { problems.append("\(sql) on a closed connection waited \(clock.now - start)") }
            if !connection.isClosed { problems.append("the connection is not known closed after \(sql)") }
        }

        // Closed from another thread at every moment around the statement: each ends, answered
        // or as a lost connection, within the bound.
        var answered = 0, lost = 0, slowest: Duration = .zero
        for attempt in 0..<100 {
            let connection = try PGConnection.open(configuration)
            let postgres = connection.connection
            DispatchQueue.global().asyncAfter(deadline: .now() + .microseconds(attempt % 25 * 40)) {
                postgres.close().whenComplete { _ in withExtendedLifetime(postgres) {} }
            }
            let start = clock.now
            do {
                try connection.query("SELECT 1")
                answered += 1
            } catch {
                lost += 1
                if !PGConnection.isLost(error) { problems.append("attempt \(attempt): \(error), not a lost connection") }
            }
            slowest = max(slowest, clock.now - start)
            _ = try? postgres.closeFuture.wait()
        }
        if slowest > bound { problems.append("a statement on a closing connection waited \(slowest)") }
        if lost == 0 { problems.append("no statement met a closed connection: that path was not tried") }
        print("postgres faults: statements on closing connections: \(answered) answered, \(lost) lost, slowest \(slowest)")
        if !problems.isEmpty {
            FileHandle.standardError.write(Data(problems.joined(separator: "\n").utf8))
            exit(1)
        }
    }
}
