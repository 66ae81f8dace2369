import Dispatch
import Foundation
@testable import LoomPostgreSQL
import NIOCore
import PostgresNIO
import Synchronization
import Testing

/// `PGConnection.addListener(channel:handler:)`, the way Loom's listener adds postgres-nio's
/// notification handler without its trap: on connections closed, closing and being lost at
/// every moment around the call. Each runs in a child process, so that a trap fails one test
/// rather than ending the run (`addListenerOnLostConnectionTraps` shows the trap itself).
extension PostgreSQLConnectionFaultTests {
    @Test("Adding the listener on a connection closed, closing, or closed at the same moment never traps, and says whether it listens")
    func addListenerOnLosingConnection() async throws {
        let result = await #expect(processExitsWith: .success, observing: [\.standardOutputContent, \.standardErrorContent]) {
            try PostgreSQLConnectionFaultTests.addListenerOnLosingConnectionScenario()
        }
        Self.report(result)
    }

    /// Run in a child process by ``addListenerOnLosingConnection()``: prints its figures, and
    /// exits 1 with the problems it found on standard error.
    nonisolated static func addListenerOnLosingConnectionScenario() throws {
        var configuration = try PostgresServer.configuration()
        configuration.responseTimeout = timeout
        configuration.connectTimeout = timeout
        let channel = "loom_trap_probe"
        var problems: [String] = []

        // Closed, and known closed: refused, no listener made.
        let closed = try PGConnection.open(configuration)
        closed.close()
        if try closed.addListener(channel: channel, handler: { _ in }) { problems.append("a closed connection took a listener") }

        // Closing: a graceful close asked for while a statement runs, so the channel is still
        // active and the connection already refuses new work; the listener reaches postgres-nio's
        // handler then, which must fail it (its LISTEN refused), not drop it.
        var closingTaken = 0
        for _ in 0..<10 {
            let closing = try PGConnection.open(configuration)
            let postgres = closing.connection
            let running = closing.send("SELECT pg_sleep(0.3)", PostgresBindings())
            let closed = DispatchSemaphore(value: 0)
            Task { try? await postgres.closeGracefully(); closed.signal() }
            Thread.sleep(forTimeInterval: 0.1)
            if try closing.addListener(channel: channel, handler: { _ in }) { closingTaken += 1 }
            _ = try? running.wait()
            if closed.wait(timeout: .now() + 5) == .timedOut { problems.append("a graceful close did not end within 5 s") }
        }
        if closingTaken == 0 { problems.append("no listener reached a closing connection's handler: that path was not tried") }

        // Lost at every moment around the call: closed from another thread after a delay that
        // sweeps across the call.
        var listened = 0, refused = 0, heard = 0
        let notified = Atomic<Int>(0)
        for attempt in 0..<200 {
            let connection = try PGConnection.open(configuration)
            let postgres = connection.connection
            let delay = attempt % 50 * 20
            DispatchQueue.global().asyncAfter(deadline: .now() + .microseconds(delay)) {
                let closing: EventLoopFuture<Void> = postgres.close()
                closing.whenComplete { _ in withExtendedLifetime(postgres) {} }
            }
            do {
                if try connection.addListener(channel: channel, handler: { _ in notified.add(1, ordering: .relaxed) }) { listened += 1 } else { refused += 1 }
            } catch {
                refused += 1
            }
            _ = try? postgres.closeFuture.wait()
        }

        // Open: the listener hears a notification.
        let open = try PGConnection.open(configuration)
        let before = notified.load(ordering: .relaxed)
        if try !open.addListener(channel: channel, handler: { _ in notified.add(1, ordering: .relaxed) }) { problems.append("an open connection took no listener") }
        try open.query("LISTEN \(channel)")
        try open.query("NOTIFY \(channel)")
        let deadline = ContinuousClock.now + .seconds(5)
        while notified.load(ordering: .relaxed) == before, ContinuousClock.now < deadline { Thread.sleep(forTimeInterval: 0.01) }
        heard = notified.load(ordering: .relaxed) - before
        if heard != 1 { problems.append("the open connection's listener heard \(heard) notifications, expected 1") }
        open.close()
        // A trap would come on the event loop after the calls returned: give it time.
        Thread.sleep(forTimeInterval: 0.5)
        print("postgres faults, addListener: \(closingTaken)/10 reached a closing connection's handler; connections closed around the call: \(listened) listened, \(refused) refused; \(problems.count) violations")
        if !problems.isEmpty {
            FileHandle.standardError.write(Data(problems.joined(separator: "\n").utf8))
            exit(1)
        }
    }
}
