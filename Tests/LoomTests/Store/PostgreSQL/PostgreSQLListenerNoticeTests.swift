import Foundation
import Loom
@_spi(LoomStore) import LoomCore
@_spi(LoomTesting) @testable import LoomPostgreSQL
import PostgresNIO
import Synchronization
import Testing

/// The notifications of a store's history carry their row (number, origin, commit), so that a
/// listener skips reading the history for its own instance's commits and reads it for every
/// other one, and a store made before that gets the new notification function when opened.
@Suite("PostgreSQL listener notices", .serialized, PostgresServer.required, .timeLimit(.minutes(2)))
struct PostgreSQLListenerNoticeTests {
    /// How often an instance's listener read the history or skipped a read.
    final class Reads: Sendable {
        let reads = Atomic<Int>(0)
        let skips = Atomic<Int>(0)
        var read: Int { reads.load(ordering: .relaxed) }
        var skipped: Int { skips.load(ordering: .relaxed) }
    }

    /// A configuration whose listener only reads when woken (no poll during the test) and
    /// counts into `reads`.
    static func counted(_ configuration: PostgreSQLStore.Configuration, _ reads: Reads) -> PostgreSQLStore.Configuration {
        var configuration = configuration
        configuration.listenerReconnection.pollInterval = .seconds(600)
        configuration.listenerReadHistory = { reads.reads.add(1, ordering: .relaxed) }
        configuration.listenerSkippedRead = { reads.skips.add(1, ordering: .relaxed) }
        return configuration
    }

    /// Waits (up to 10 s) until `condition` holds.
    static func eventually(_ condition: () -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return condition()
    }

    @Test("A payload reads as a notice: number, origin, commit, '-' for none; anything else is no notice")
    func noticePayloads() {
        #expect(HistoryNotice(payload: "12 34 5") == HistoryNotice(number: 12, origin: 34, commit: 5))
        #expect(HistoryNotice(payload: "7 - -") == HistoryNotice(number: 7, origin: nil, commit: nil))
        #expect(HistoryNotice(payload: "-9 -3 2") == HistoryNotice(number: -9, origin: -3, commit: 2))
        for bad in ["", "12", "12 34", "12 34 5 6", "x 34 5", "12 y 5", "12 34 z", "12  5", " 12 34 5"] {
            #expect(HistoryNotice(payload: bad) == nil, "\(bad)")
        }
    }

    @Test("A server's own saves neither wake its listener nor cost it a read of the history; another server's saves are read, each heard once, in order, and never its own")
    func ownCommitsSkipTheRead() async throws {
        let schema = try Schema(Book.self)
        let configuration = try PostgresServer.configuration()
        let reads = Reads()
        let mine = PersistentContainer(store: try PostgreSQLStore(configuration: Self.counted(configuration, reads), schema: schema))
        let other = PersistentContainer(store: try PostgreSQLStore(configuration: configuration, schema: schema))
        let heard = mine.remoteChanges()
        // The listener read once when it connected.
        #expect(await Self.eventually { reads.read >= 1 })
        try await Task.sleep(for: .milliseconds(200))
        let before = reads.read

        for i in 0..<10 {
            try await mine.save { context in
                context.transactionAuthor = "mine"
                context.insert(Book(isbn: "m\(i)", title: "Mine \(i)"))
            }
        }
        try await Task.sleep(for: .milliseconds(300))
        #expect(reads.read == before, "the listener read the history \(reads.read - before) times for its own 10 saves")
        #expect(reads.skipped == 0, "the listener's thread was woken for its own saves")
        // A few dozen wait at most: then they wake the thread, which only moves over them.
        for i in 0..<PostgreSQLListener.ownNoticesWithoutWakeUp {
            try await mine.save { context in context.insert(Book(isbn: "w\(i)", title: "Waiting \(i)")) }
        }
        #expect(await Self.eventually { reads.skipped >= 1 })
        #expect(reads.read == before, "the listener read the history \(reads.read - before) times for its own saves")

        // Another instance's saves, interleaved with more of this one's.
        for i in 0..<3 {
            try await other.save { context in
                context.transactionAuthor = "other"
                context.insert(Book(isbn: "o\(i)", title: "Other \(i)"))
            }
            try await mine.save { context in
                context.transactionAuthor = "mine"
                context.insert(Book(isbn: "n\(i)", title: "Mine again \(i)"))
            }
        }
        let transactions = await RemoteChangeTests.collect(heard, count: 3)
        #expect(transactions.map(\.author) == ["other", "other", "other"])
        #expect(transactions.map(\.token.transactionNumber) == transactions.map(\.token.transactionNumber).sorted())
        #expect(reads.read > before)
        // Nothing more arrives: its own saves were never handed on.
        try await mine.save { context in context.insert(Book(isbn: "last", title: "Last")) }
        try await other.save { context in
            context.transactionAuthor = "other"
            context.insert(Book(isbn: "o-last", title: "Other last"))
        }
        #expect(await RemoteChangeTests.collect(heard, count: 1).map(\.author) == ["other"])
        #expect(mine.coordinator.remoteChangesFailure == nil)
        try await other.close()
        try await mine.close()
    }

    @Test("A store whose notifications carry no row (made before they did) gets the new function when opened; until then its listeners read after every notification and miss nothing")
    func oldNotifyFunctionIsReplaced() async throws {
        let schema = try Schema(Book.self)
        let configuration = try PostgresServer.configuration()
        let first = PersistentContainer(store: try PostgreSQLStore(configuration: configuration, schema: schema))
        try await first.save { context in context.insert(Book(isbn: "1", title: "First")) }
        let store = try #require(first.coordinator.store as? PostgreSQLStore)
        let channel = store.channel
        let connection = try PGConnection.open(configuration)
        defer { connection.close() }
        func source() throws -> String? {
            var bindings = PostgresBindings()
            bindings.append("\(configuration.schemaName).loom_history_notify()")
            return try connection.query("SELECT prosrc FROM pg_proc WHERE oid = to_regprocedure($1)", bindings).first.map { try $0.decode(String.self) }
        }
        #expect(try source() == PostgreSQLStore.notifyFunctionBody(channel: channel))
        // The function as stores made before had it: an empty payload.
        try connection.query("CREATE OR REPLACE FUNCTION \(configuration.schemaName).loom_history_notify() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_notify('\(channel)', ''); RETURN NULL; END $$")
        #expect(try source() != PostgreSQLStore.notifyFunctionBody(channel: channel))

        // Empty payloads: the listener reads, and hears the other instance's save.
        let reads = Reads()
        let listening = PersistentContainer(store: try PostgreSQLStore(configuration: Self.counted(configuration, reads), schema: schema))
        #expect(try source() == PostgreSQLStore.notifyFunctionBody(channel: channel), "opening replaced it")
        try connection.query("CREATE OR REPLACE FUNCTION \(configuration.schemaName).loom_history_notify() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_notify('\(channel)', ''); RETURN NULL; END $$")
        let heard = listening.remoteChanges()
        #expect(await Self.eventually { reads.read >= 1 })
        let before = reads.read
        try await listening.save { context in context.insert(Book(isbn: "2", title: "Own")) }
        #expect(await Self.eventually { reads.read > before }, "an empty payload is read")
        #expect(reads.skipped == 0)
        try await first.save { context in
            context.transactionAuthor = "first"
            context.insert(Book(isbn: "3", title: "From the first"))
        }
        #expect(await RemoteChangeTests.collect(heard, count: 1).map(\.author) == ["first"])
        try await listening.close()
        try await first.close()
    }
}
