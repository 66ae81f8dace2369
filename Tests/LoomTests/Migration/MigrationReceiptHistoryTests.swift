import Foundation
import GRDB
import Logging
import Loom
@_spi(LoomStore) import LoomCore
@_spi(LoomStore) import LoomPostgreSQL
@_spi(LoomStore) import LoomSQLite
import NIOPosix
import PostgresNIO
import Testing

/// A migration made on opening is a commit of the store instance that made it, as a save is: its
/// history row carries the instance and the commit number its receipt reports, so that the
/// history orders it among that instance's commits.
@Suite("Migration: the history row carries the receipt")
struct MigrationReceiptHistoryTests {
    /// One history row's place: which instance committed it (`origin`) and as which of its
    /// commits (`originCommit`), with its author.
    struct HistoryRow: Equatable, CustomStringConvertible {
        var number: Int64
        var origin: Int64?
        var commit: Int64?
        var author: String?
        var description: String { "#\(number) \(origin.map(String.init) ?? "nil")/\(commit.map(String.init) ?? "nil") \(author ?? "nil")" }
    }

    @Test("A migration's history row is its instance's commit 1, before the next save's commit 2", arguments: StoreKind.persistentCases)
    func migrationRowCarriesItsReceipt(kind: StoreKind) async throws {
        let (open, history) = try Self.store(kind)
        try await NotesV1.fill(PersistentContainer(store: try open(try NotesV1.schema()).store))
        let migrated = try open(try NotesV2.schema())
        let receipt = try #require(migrated.receipt)
        let container = PersistentContainer(store: migrated.store)
        try await container.performBackgroundTask { context in
            context.insert(NotesV2.Note(heading: "After"))
            try context.save()
        }
        try await container.close()

        let rows = try await history()
        try #require(rows.count == 2, "\(rows)")
        let (migration, save) = (rows[0], rows[1])
        #expect(migration.author == "Loom migration")
        #expect(migration.commit == Int64(receipt.sequence))
        #expect(migration.commit == 1)
        // The same instance made both, in this order.
        #expect(migration.origin != nil)
        #expect(migration.origin == save.origin)
        #expect(save.commit == 2)
        #expect(migration.number < save.number)
    }

    /// Opens a store of `kind` (the same one at every call) with a model, and reads its history
    /// rows in number order.
    private static func store(_ kind: StoreKind) throws -> (open: (Schema) throws -> (store: any PersistentStore, receipt: CommitReceipt?), history: () async throws -> [HistoryRow]) {
        switch kind {
        case .sqlite:
            let url = TemporaryDirectory.make().appending(path: "notes.loom")
            return ({ schema in
                let store = try SQLiteStore(url: url, schema: schema)
                return (store, store.migrationReceipt)
            }, {
                let queue = try DatabaseQueue(path: url.path)
                defer { try? queue.close() }
                return try queue.read { db in
                    try Row.fetchAll(db, sql: "SELECT number, origin, originCommit, author FROM loom_history ORDER BY number").map {
                        HistoryRow(number: $0["number"], origin: $0["origin"], commit: $0["originCommit"], author: $0["author"])
                    }
                }
            })
        case .postgres:
            let configuration = try PostgresServer.configuration()
            return ({ schema in
                let store = try PostgreSQLStore(configuration: configuration, schema: schema)
                return (store, store.migrationReceipt)
            }, {
                let logger = Logger(label: "test")
                let connection = try await PostgresConnection.connect(
                    on: MultiThreadedEventLoopGroup.singleton.next(), configuration: try configuration.connectionConfiguration, id: 1, logger: logger)
                do {
                    var rows: [HistoryRow] = []
                    let table = "\"\(configuration.schemaName)\".loom_history"
                    let found = try await connection.query(
                        "SELECT number, origin, origincommit, author FROM \(unescaped: table) ORDER BY number", logger: logger)
                    for try await (number, origin, commit, author) in found.decode((Int64, Int64?, Int64?, String?).self) {
                        rows.append(HistoryRow(number: number, origin: origin, commit: commit, author: author))
                    }
                    try await connection.close()
                    return rows
                } catch {
                    try? await connection.close()
                    throw error
                }
            })
        case .inMemory:
            throw LoomError(.storeFailure, "An in-memory store is never migrated.")
        }
    }
}
