import Foundation
import Loom
@_spi(LoomStore) import LoomCore
import LoomStoreTesting
import LoomPostgreSQL
import Testing

/// The store contract (module LoomStoreTesting), run on every store Loom ships. A new store's
/// tests run the same checks with a subject of their own.
@Suite("Store contract", .timeLimit(.minutes(5)))
struct StoreContractTests {
    /// New stores of one kind, each in a folder of its own.
    struct Subject: StoreContractSubject {
        let kind: StoreKind

        func makeStore(schema: Schema) throws -> any PersistentStore {
            switch kind {
            case .inMemory: InMemoryStore(schema: schema)
            case .sqlite: try SQLiteStore(url: TemporaryDirectory.make().appending(path: "contract.loom"), schema: schema)
            case .postgres: try PostgresServer.makeStore(schema)
            }
        }

        func openAgain(_ store: any PersistentStore, schema: Schema) throws -> any PersistentStore {
            if let postgres = store as? PostgreSQLStore { return try PostgreSQLStore(configuration: postgres.configuration, schema: schema) }
            guard let sqlite = store as? SQLiteStore else { throw LoomError(.storeFailure, "An in-memory store cannot be opened twice.") }
            return try SQLiteStore(url: sqlite.url, schema: schema)
        }
    }

    func contract(_ kind: StoreKind) throws -> StoreContract { try StoreContract(Subject(kind: kind)) }

    @Test("A change set whose later statement fails leaves nothing behind, and names its conflicts", arguments: StoreKind.allCases)
    func applyIsAtomic(kind: StoreKind) throws { try contract(kind).applyIsAtomic() }

    @Test("Every commit has the next sequence number; a refused one has none", arguments: StoreKind.allCases)
    func receipts(kind: StoreKind) throws { try contract(kind).receipts() }

    @Test("A write transaction: its thread sees its writes, others see them only once committed", arguments: StoreKind.allCases)
    func writeScope(kind: StoreKind) throws { try contract(kind).writeScope() }

    @Test("A write transaction whose body throws writes nothing and rethrows the error unchanged", arguments: StoreKind.allCases)
    func writeScopeRollsBack(kind: StoreKind) throws { try contract(kind).writeScopeRollsBack() }

    @Test("To-many rows come in owner then key order, by foreign key and through a join table; a deleted object leaves them", arguments: StoreKind.allCases)
    func relatedRows(kind: StoreKind) throws { try contract(kind).relatedRows() }

    @Test("A hierarchy: one key space, relationships to the parent narrowed and whole, uniqueness across its tables", arguments: StoreKind.allCases)
    func hierarchies(kind: StoreKind) throws { try contract(kind).hierarchies() }

    @Test("After close, every call throws closed", arguments: StoreKind.allCases)
    func callsAfterClose(kind: StoreKind) throws { try contract(kind).callsAfterClose() }

    @Test("Two store instances on one file reserve disjoint keys, even at once", arguments: StoreKind.persistentCases)
    func disjointKeys(kind: StoreKind) async throws { try await contract(kind).disjointKeys() }

    @Test("History: one transaction per change set, in order, with its changes; purged and foreign tokens are errors", arguments: StoreKind.persistentCases)
    func history(kind: StoreKind) throws { try contract(kind).history() }

    @Test("Two instances on one file: each observer hears the other's commits once, in order, never its own", arguments: StoreKind.persistentCases)
    func remoteCommits(kind: StoreKind) async throws { try await contract(kind).remoteCommits() }

    @Test("A fetch skipping known values leaves out exactly the known rows' values, on the store and on a snapshot", arguments: StoreKind.allCases)
    func fetchSkippingKnownValues(kind: StoreKind) throws {
        // The in-memory store has nothing to decode: it returns whole rows.
        try contract(kind).fetchSkippingKnownValues(skips: kind != .inMemory)
    }

    @Test("A snapshot reads as of its opening while change sets commit, from any thread; closed, it throws closed", arguments: StoreKind.allCases)
    func snapshots(kind: StoreKind) throws { try contract(kind).snapshots() }

    @Test("A store that breaks the contract fails it, saying what broke")
    func contractCatchesABrokenStore() throws {
        /// Applies a change set's inserts one by one: a refused change set leaves some behind.
        struct Broken: StoreContractSubject {
            func makeStore(schema: Schema) throws -> any PersistentStore { ForgetfulStore(InMemoryStore(schema: schema)) }
            func openAgain(_ store: any PersistentStore, schema: Schema) throws -> any PersistentStore { store }
        }
        let contract = try StoreContract(Broken())
        let failure = try #require(throws: StoreContractFailure.self) { try contract.applyIsAtomic() }
        #expect(failure.description.contains("leaves nothing behind"))
    }
}

/// A store that applies each insert of a change set on its own, so a refused change set leaves
/// its earlier inserts behind: what the contract must catch.
private final class ForgetfulStore: PersistentStore, @unchecked Sendable {
    let base: any PersistentStore
    init(_ base: any PersistentStore) { self.base = base }
    var identifier: UUID { base.identifier }
    var schema: Schema { base.schema }
    func fetch(_ query: StoreQuery) throws(LoomError) -> [StoreRow] { try base.fetch(query) }
    func rows(of entity: EntityDescription, keys: [Int64]) throws(LoomError) -> [StoreRow] { try base.rows(of: entity, keys: keys) }
    func count(_ query: StoreQuery) throws(LoomError) -> Int { try base.count(query) }
    func fetchRelated(_ relationship: ResolvedRelationship, keys: [Int64]) throws(LoomError) -> [RelatedRow] { try base.fetchRelated(relationship, keys: keys) }
    func aggregate(_ query: AggregateQuery) throws(LoomError) -> [[StoredValue]] { try base.aggregate(query) }
    func fetchKeys(_ query: StoreQuery) throws(LoomError) -> [Int64] { try base.fetchKeys(query) }
    func apply(_ changes: StoreChangeSet) throws(LoomError) -> CommitReceipt {
        var last = CommitReceipt(sequence: base.lastCommitSequence)
        for insert in changes.inserts {
            var one = StoreChangeSet()
            one.inserts = [insert]
            last = try base.apply(one)
        }
        var rest = changes
        rest.inserts = []
        return rest.isEmpty ? last : try base.apply(rest)
    }
    func withWriteTransaction<T>(_ body: () throws -> T) throws -> (value: T, receipt: CommitReceipt) { try base.withWriteTransaction(body) }
    var lastCommitSequence: UInt64 { base.lastCommitSequence }
    var writeScope: WriteScope { base.writeScope }
    func allocateKeys(for entity: EntityDescription, count: Int) throws(LoomError) -> Range<Int64> { try base.allocateKeys(for: entity, count: count) }
    func close() throws(LoomError) { try base.close() }
}
