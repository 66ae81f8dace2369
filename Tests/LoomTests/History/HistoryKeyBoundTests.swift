import Foundation
import GRDB
import Logging
import Loom
@_spi(LoomStore) @testable import LoomCore
import LoomPostgreSQL
import LoomSQL
import LoomTools
import NIOPosix
import PostgresNIO
import Testing

/// A history row's keys are bounded by what the store handed out: a damaged row whose runs of
/// keys claim billions of them (the fuzzer's `history` finding, `Fuzz/Crashes/history/timeout-…`)
/// is refused with `corruptValue` naming the transaction, at once, instead of expanded into
/// minutes and gigabytes.
@Suite("History: a row's keys bounded by the key allocator", .timeLimit(.minutes(2)))
struct HistoryKeyBoundTests {
    /// One insert group of `entity` whose single run claims `count` keys from key 1.
    static func runOfKeys(_ entity: String, count: UInt32) -> Data {
        var bytes: [UInt8] = [4]
        withUnsafeBytes(of: UInt32(entity.utf8.count).littleEndian) { bytes += $0 }
        bytes += entity.utf8
        bytes += [0, 0, 0, 0]   // no properties
        withUnsafeBytes(of: count.littleEndian) { bytes += $0 }
        withUnsafeBytes(of: UInt32(1).littleEndian) { bytes += $0 }
        withUnsafeBytes(of: Int64(1).littleEndian) { bytes += $0 }
        withUnsafeBytes(of: count.littleEndian) { bytes += $0 }
        return Data(bytes)
    }

    @Test("Decoding stops at the limit: a group of exactly the limit reads, one key more does not, across groups too")
    func decodeIsBounded() {
        #expect(HistoryChangeGroup.decode(Self.runOfKeys("Book", count: 10), keyLimit: 10)?.first?.keys == Array(1...10))
        #expect(HistoryChangeGroup.decode(Self.runOfKeys("Book", count: 11), keyLimit: 10) == nil)
        #expect(HistoryChangeGroup.decode(Self.runOfKeys("Book", count: .max), keyLimit: 1 << 20) == nil)
        // Two groups of 6 keys: 12 in all.
        let two = Self.runOfKeys("Book", count: 6) + Self.runOfKeys("Tag", count: 6)
        #expect(HistoryChangeGroup.decode(two, keyLimit: 12)?.count == 2)
        #expect(HistoryChangeGroup.decode(two, keyLimit: 11) == nil)
        // Keys one by one count too; a row of no keys needs none.
        let listed = HistoryChangeGroup.encode([HistoryChangeGroup(entityName: "Book", kind: .update, properties: "title", keys: [3, 9])])
        #expect(HistoryChangeGroup.decode(listed, keyLimit: 2)?.first?.keys == [3, 9])
        #expect(HistoryChangeGroup.decode(listed, keyLimit: 1) == nil)
        #expect(HistoryChangeGroup.decode(Data(), keyLimit: 0) == [])
    }

    @Test("The limit is every key handed out, three times; it saturates on damaged marks")
    func limitFromMarks() {
        #expect(SQLHistory.keyLimit(marks: []) == 0)
        #expect(SQLHistory.keyLimit(marks: [1, 1]) == 0)   // nothing handed out yet
        #expect(SQLHistory.keyLimit(marks: [11, 6]) == 45)
        #expect(SQLHistory.keyLimit(marks: [-5, 0, 3]) == 6)   // damaged marks count for nothing
        #expect(SQLHistory.keyLimit(marks: [.max, .max]) == .max)
        #expect(SQLHistory.keyLimit(marks: [Int64.max / 2]) == .max)
    }

    @Test("A damaged row claiming two billion keys is corruptValue naming its transaction; the rows before it still read", arguments: StoreKind.persistentCases)
    func runLengthBombIsRefused(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        // A second save, whose history row is then damaged.
        try await fixture.container.performBackgroundTask { context in
            context.insert(Book(isbn: "978-5", title: "Ulysses"))
            try context.save()
        }
        let transactions = try await fixture.container.performBackgroundTask { context in try context.fetchHistory(HistoryDescriptor()) }
        let (first, last) = (try #require(transactions.first), try #require(transactions.last))
        #expect(transactions.count == 2)
        try await Self.replaceChanges(of: last.token.transactionNumber, with: Self.runOfKeys("Book", count: 0x7FFF_FFFF), in: fixture)

        let start = ContinuousClock.now
        let error = await #expect(throws: LoomError.self) {
            try await fixture.container.performBackgroundTask { context in try context.fetchHistory(HistoryDescriptor()) }
        }
        #expect(ContinuousClock.now - start < .seconds(20))
        #expect(error?.code == .corruptValue, "\(String(describing: error))")
        #expect(error?.message.contains("History transaction #\(last.token.transactionNumber) ") == true, "\(String(describing: error))")
        // Only the damaged row is refused: the history before it reads.
        let before = try await fixture.container.performBackgroundTask { context in
            try context.fetchHistory(HistoryDescriptor(fetchLimit: 1))
        }
        #expect(before.map(\.token) == [first.token])
        #expect(before.first?.changes.count == first.changes.count)
    }

    /// Writes `changes` over the packed changes of history transaction `number`, with the store's
    /// own SQL dialect, outside Loom.
    static func replaceChanges(of number: Int64, with changes: Data, in fixture: BadInputFixture) async throws {
        switch fixture.kind {
        case .sqlite:
            let queue = try DatabaseQueue(path: try #require(fixture.sqliteURL).path)
            try await queue.write { db in
                try db.execute(sql: "UPDATE loom_history SET changes = ? WHERE number = ?", arguments: [changes, number])
            }
            try queue.close()
        case .postgres:
            let configuration = try #require(fixture.postgresConfiguration)
            let logger = Logger(label: "test")
            let connection = try await PostgresConnection.connect(
                on: MultiThreadedEventLoopGroup.singleton.next(), configuration: try configuration.connectionConfiguration, id: 1, logger: logger)
            let hex = changes.map { String(format: "%02x", $0) }.joined()
            _ = try await connection.query("""
                UPDATE \(unescaped: configuration.schemaName).loom_history SET changes = '\\x\(unescaped: hex)'::bytea WHERE number = \(unescaped: String(number))
                """, logger: logger)
            try await connection.close()
        case .inMemory:
            Issue.record("the in-memory store keeps no history rows")
        }
    }
}
