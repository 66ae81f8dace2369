import Foundation
import Synchronization
import Loom
@_spi(LoomTesting) import LoomPostgreSQL

/// The Loom contender's model: the same attributes as ``ItemData``, and the same index.
@Model final class Item {
    var serial: Int
    var category: Int
    var quantity: Int
    var score: Double
    var price: Double
    var title: String
    var notes: String
    var createdAt: Date
    var rating: Double?
    #Index<Item>([\.category, \.score])

    init(_ item: ItemData) {
        serial = item.serial
        category = item.category
        quantity = item.quantity
        score = item.score
        price = item.price
        title = item.title
        notes = item.notes
        createdAt = item.createdAt
        rating = item.rating
    }

    /// Reads every attribute through the generated accessors.
    var checksum: Int {
        serial &+ category &+ quantity &+ Int(score) &+ Int(price) &+ title.utf8.count &+ notes.utf8.count
            &+ Int(createdAt.timeIntervalSinceReferenceDate) &+ Int(rating ?? 0)
    }
}

extension FetchRequest where Model == Item {
    /// The W3 query: one category, a score range, ordered by score.
    static func matching(_ query: RangeQuery) -> FetchRequest<Item> {
        let category = query.category, low = query.low, high = query.high
        return FetchRequest<Item>(
            predicate: #Predicate<Item> { $0.category == category && $0.score >= low && $0.score < high },
            sortBy: [SortDescriptor(\Item.score)])
    }
}

extension PersistentContainer {
    /// A container over a SQLite file, as every Loom run opens it.
    /// `LOOM_BENCH_HISTORY=off` opens the stores without history (and so without the
    /// remote-change watcher), to measure what they cost.
    static func bench(at path: String, synchronous: SQLiteStore.Synchronous = .normal) throws -> PersistentContainer {
        try PersistentContainer(
            name: "LoomBench", for: Item.self, location: .file(URL(filePath: path)),
            options: SQLiteStore.Options(synchronous: synchronous, recordsHistory: ProcessInfo.processInfo.environment["LOOM_BENCH_HISTORY"] != "off"))
    }

    /// A container over Loom's PostgreSQL store in `schemaName` of the server at `url`, with
    /// the same history switch; `trace` sees every statement the store runs.
    static func bench(postgres url: String, schemaName: String, trace: (@Sendable (String) -> Void)? = nil) throws -> PersistentContainer {
        var configuration = try PostgreSQLStore.Configuration(url: url)
        configuration.schemaName = schemaName
        configuration.recordsHistory = ProcessInfo.processInfo.environment["LOOM_BENCH_HISTORY"] != "off"
        configuration.trace = trace
        if ProcessInfo.processInfo.environment["LOOM_BENCH_PG_SAVES"] == "statement-by-statement" {
            // Saves as before issue 42's point 6 (BEGIN … COMMIT), for a before/after in one build.
            configuration.insideSaveTransaction = { _ in }
        }
        return PersistentContainer(store: try PostgreSQLStore(configuration: configuration, schema: try Schema(Item.self)))
    }

    /// Closes the container from the harness's synchronous code: runs the async `close()` on
    /// another thread and waits for it. Used only where no helper save is in flight, so the
    /// close never needs the thread that waits.
    func closeAndWait() throws {
        final class Outcome: Sendable {
            let result = Mutex<Result<Void, any Error>?>(nil)
        }
        let outcome = Outcome()
        let finished = DispatchSemaphore(value: 0)
        Task.detached {
            do { try await self.close(); outcome.result.withLock { $0 = .success(()) } } catch { outcome.result.withLock { $0 = .failure(error) } }
            finished.signal()
        }
        finished.wait()
        try outcome.result.withLock { $0 }?.get()
    }

    /// The ID of the object with primary key `key`.
    func itemID(_ key: Int64) -> ObjectID<Item> {
        ObjectID<Item>(AnyObjectID(storeIdentifier: coordinator.storeIdentifier, entityName: "Item", primaryKey: key))!
    }
}
