import Foundation
import GRDB
import Loom
import Synchronization

/// W8: one and two reader threads (contexts, for Loom), each running a fixed number of ID
/// lookups, or of W3 queries, with and without a concurrent writer.
///
/// A lookup fetches one object by primary key and reads every attribute: a reused
/// `SELECT … WHERE id = ?` (raw SQLite), a cached statement in `pool.read` (GRDB),
/// `ItemRecord.fetchOne(db, key:)` (GRDB record), `context.existingObject(with:)` (Loom, which
/// reads the row from the store, since the object is not registered). Throughput is all
/// readers' operations ÷ wall time; p99 is over every operation. The writer, when present,
/// changes the score of 100 random objects per save, one save every 5 ms, until the readers are
/// done: through its own connection (raw), `pool.write` with a cached statement (both GRDB
/// paths), or a background context that loads the objects with `existingObject(with:)` (Loom).
final class ConcurrentReaders: SynchronousWorkload {
    let id = "W8"
    var title = "Concurrent readers: ID lookups and W3 queries, 1 and 2 readers, with and without a writer"
    let contenders: [Contender] = [.raw, .grdb, .grdbRecord, .loom]
    private(set) var metrics: [Metric] = []
    private var bench: Bench!

    enum Operation: String, CaseIterable { case lookup, query }

    struct Configuration {
        var operation: Operation
        var readers: Int
        var writer: Bool
        var key: String { "\(operation.rawValue).r\(readers)\(writer ? ".w" : "")" }
        var label: String { "\(operation == .lookup ? "lookups" : "queries") ×\(readers)\(writer ? " + writer" : "")" }
    }

    static let configurations: [Configuration] = Operation.allCases.flatMap { operation in
        [1, 2].flatMap { readers in [false, true].map { Configuration(operation: operation, readers: readers, writer: $0) } }
    }

    init() {
        metrics = Self.configurations.flatMap { configuration in
            [
                Metric(key: configuration.key + ".throughput", label: configuration.label, unit: .operationsPerSecond, target: .atLeastOfRaw(0.7)),
                Metric(key: configuration.key + ".p99", label: "  p99 latency"),
            ]
        }
    }

    func prepare(_ bench: Bench) throws {
        self.bench = bench
        try bench.prepareTemplates()
    }

    func measure(_ contender: Contender, _ round: Round) throws -> [String: Double] {
        let path = try bench.populatedCopy(for: contender, tag: "W8-\(contender.rawValue)")
        defer { bench.remove(path) }
        let sizes = bench.sizes
        let dataset = bench.dataset
        // Dataset ids, or for Loom the keys its template gave those items (not always the same).
        let keys = contender == .loom ? try dataset.lookupKeys.map(bench.loomKey(ofItem:)) : dataset.lookupKeys
        let queries = dataset.queries
        let subject: any ReadSubject = switch contender {
        case .raw: RawReadSubject(path: path, queries: queries)
        case .grdb, .grdbRecord: try GRDBReadSubject(path: path, records: contender == .grdbRecord, queries: queries)
        case .loom: try LoomReadSubject(path: path, queries: queries)
        case .fluent: throw BenchError("W8 has no Fluent contender")
        }
        defer { subject.close() }
        var result: [String: Double] = [:]
        round.meter?.begin()
        for configuration in Self.configurations {
            let count = configuration.operation == .lookup ? sizes.lookupsPerReader : sizes.queriesPerReader
            let samples = SharedSamples()
            let writerDone = DoneFlag()
            let readersDone = DoneFlag()
            if configuration.writer {
                let writer = try subject.makeWriter()
                startThread("W8 writer") {
                    var i = 0
                    do {
                        while !readersDone.isDone {
                            try writer.save((0..<100).map { j in keys[(i * 100 + j * 7_919) % keys.count] }, score: Double(i))
                            i += 1
                            usleep(5_000)
                        }
                        writerDone.finish()
                    } catch {
                        writerDone.finish(error: error)
                    }
                }
            }
            let readers = try (0..<configuration.readers).map { _ in try subject.makeReader() }
            let errors = SharedErrors()
            let wall = runThreads(configuration.readers, name: "W8 reader") { index in
                do {
                    let latencies = try readers[index].run(configuration.operation, count: count) { i in
                        configuration.operation == .lookup
                            ? Int(keys[(index * count + i) % keys.count])
                            : (index * 389 + i) % queries.count
                    }
                    samples.append(contentsOf: latencies)
                } catch {
                    errors.append(error)
                }
            }
            readersDone.finish()
            if configuration.writer {
                while !writerDone.isDone { usleep(1_000) }
                try writerDone.check()
            }
            try errors.check()
            let all = samples.all.sorted()
            result[configuration.key + ".throughput"] = Double(all.count) / wall
            result[configuration.key + ".p99"] = Statistics.percentile(sorted: all, 0.99)
        }
        round.meter?.end()
        return result
    }
}

/// Errors from reader threads.
final class SharedErrors: Sendable {
    private let errors = Mutex<[String]>([])
    func append(_ error: any Error) { errors.withLock { $0.append("\(error)") } }
    func check() throws {
        if let first = errors.withLock({ $0.first }) { throw BenchError("a reader failed: \(first)") }
    }
}

/// One contender's store, opened for W8: it makes readers and a writer.
protocol ReadSubject {
    func makeReader() throws -> any Reader
    func makeWriter() throws -> any Writer
    func close()
}

/// Runs a W8 reader's operations on the calling thread and returns their latencies.
protocol Reader: Sendable {
    func run(_ operation: ConcurrentReaders.Operation, count: Int, argument: (Int) -> Int) throws -> [Double]
}

/// Saves a new score on objects with these keys, in one transaction.
protocol Writer: Sendable {
    func save(_ keys: [Int64], score: Double) throws
}

// MARK: Raw SQLite

final class RawReadSubject: ReadSubject {
    let path: String
    let queries: [RangeQuery]
    init(path: String, queries: [RangeQuery]) {
        self.path = path
        self.queries = queries
    }
    func makeReader() throws -> any Reader { try RawReader(path: path, queries: queries) }
    func makeWriter() throws -> any Writer { try RawWriter(path: path) }
    func close() {}
}

/// `@unchecked Sendable`: made on the main thread, then used by exactly one reader thread,
/// which is joined before the reader is released.
final class RawReader: Reader, @unchecked Sendable {
    let db: RawDatabase
    let byID: RawStatement
    let range: RawStatement
    let queries: [RangeQuery]

    init(path: String, queries: [RangeQuery]) throws {
        self.queries = queries
        db = try RawDatabase(path: path)
        byID = try db.prepare(ItemSQL.selectByID)
        range = try db.prepare(ItemSQL.selectRange)
        _ = try db.scalar(ItemSQL.count)
    }

    func run(_ operation: ConcurrentReaders.Operation, count: Int, argument: (Int) -> Int) throws -> [Double] {
        var latencies: [Double] = []
        latencies.reserveCapacity(count)
        for i in 0..<count {
            let a = argument(i)
            let start = monotonicNanoseconds()
            switch operation {
            case .lookup:
                byID.bind(Int64(a), at: 1)
                guard try byID.step() else { throw BenchError("no item \(a)") }
                blackHole(byID.item().checksum)
                byID.reset()
            case .query:
                blackHole(try range.items(matching: queries[a]).checksum)
            }
            latencies.append(seconds(since: start))
        }
        return latencies
    }
}

/// `@unchecked Sendable`: used by the writer thread only, released after it is done.
final class RawWriter: Writer, @unchecked Sendable {
    let db: RawDatabase
    let update: RawStatement
    init(path: String) throws {
        db = try RawDatabase(path: path)
        update = try db.prepare(ItemSQL.updateScore)
    }
    func save(_ keys: [Int64], score: Double) throws {
        try db.execute("BEGIN IMMEDIATE")
        for key in keys {
            update.bind(score, at: 1)
            update.bind(key, at: 2)
            try update.run()
        }
        try db.execute("COMMIT")
    }
}

// MARK: GRDB

final class GRDBReadSubject: ReadSubject {
    let pool: DatabasePool
    let records: Bool
    let queries: [RangeQuery]
    init(path: String, records: Bool, queries: [RangeQuery]) throws {
        pool = try BenchSettings.openPool(path)
        self.records = records
        self.queries = queries
        _ = try pool.read { try Int.fetchOne($0, sql: ItemSQL.count) }
    }
    func makeReader() throws -> any Reader { GRDBReader(pool: pool, records: records, queries: queries) }
    func makeWriter() throws -> any Writer { GRDBWriter(pool: pool) }
    func close() { try? pool.close() }
}

struct GRDBReader: Reader {
    let pool: DatabasePool
    let records: Bool
    let queries: [RangeQuery]

    func run(_ operation: ConcurrentReaders.Operation, count: Int, argument: (Int) -> Int) throws -> [Double] {
        var latencies: [Double] = []
        latencies.reserveCapacity(count)
        for i in 0..<count {
            let a = argument(i)
            let start = monotonicNanoseconds()
            switch (operation, records) {
            case (.lookup, false):
                let item = try pool.read { db in
                    try Row.fetchOne(db.cachedStatement(sql: ItemSQL.selectByID), arguments: [a]).map(ItemData.init(row:))
                }
                guard let item else { throw BenchError("no item \(a)") }
                blackHole(item.checksum)
            case (.lookup, true):
                guard let record = try pool.read({ try ItemRecord.fetchOne($0, key: a) }) else { throw BenchError("no item \(a)") }
                blackHole(record.checksum)
            case (.query, false):
                let query = queries[a]
                blackHole(try pool.read { try $0.items(matching: query) }.checksum)
            case (.query, true):
                let query = queries[a]
                blackHole(try pool.read { try ItemRecord.matching(query).fetchAll($0) }.checksum)
            }
            latencies.append(seconds(since: start))
        }
        return latencies
    }
}

struct GRDBWriter: Writer {
    let pool: DatabasePool
    func save(_ keys: [Int64], score: Double) throws {
        try pool.write { db in
            let statement = try db.cachedStatement(sql: ItemSQL.updateScore)
            for key in keys {
                statement.setUncheckedArguments([score, key])
                try statement.execute()
            }
        }
    }
}

// MARK: Loom

final class LoomReadSubject: ReadSubject {
    let container: PersistentContainer
    let queries: [RangeQuery]
    init(path: String, queries: [RangeQuery]) throws {
        container = try PersistentContainer.bench(at: path)
        self.queries = queries
        _ = try container.newBackgroundContext(name: "primer").performAndWait { try $0.count(for: FetchRequest<Item>()) }
    }
    func makeReader() throws -> any Reader {
        LoomReader(container: container, context: container.newBackgroundContext(name: "W8 reader"), queries: queries)
    }
    func makeWriter() throws -> any Writer { LoomWriter(container: container, context: container.newBackgroundContext(name: "W8 writer")) }
    func close() { try? container.closeAndWait() }
}

struct LoomReader: Reader {
    let container: PersistentContainer
    let context: BackgroundContext
    let queries: [RangeQuery]

    func run(_ operation: ConcurrentReaders.Operation, count: Int, argument: (Int) -> Int) throws -> [Double] {
        // The arguments are worked out first: `argument` cannot cross to the context's queue.
        let arguments = (0..<count).map(argument)
        let container = self.container
        let queries = self.queries
        return try context.performAndWait { context in
            var latencies: [Double] = []
            latencies.reserveCapacity(count)
            for a in arguments {
                let start = monotonicNanoseconds()
                switch operation {
                case .lookup:
                    blackHole(try context.existingObject(with: container.itemID(Int64(a))).checksum)
                case .query:
                    blackHole(try context.fetch(.matching(queries[a])).checksum)
                }
                latencies.append(seconds(since: start))
            }
            return latencies
        }
    }
}

struct LoomWriter: Writer {
    let container: PersistentContainer
    let context: BackgroundContext
    func save(_ keys: [Int64], score: Double) throws {
        let container = self.container
        try context.performAndWait { context in
            for key in keys { try context.existingObject(with: container.itemID(key)).score = score }
            try context.save()
        }
    }
}
