import Foundation
import Loom
@_spi(LoomStore) import LoomCore
import LoomSQLite
import Synchronization
import Testing

/// The write-ahead log stays bounded while readers never stop (``SQLiteStore/Options/maximumWALSize``):
/// SQLite starts the log over only when no reader uses it, so a store read without pause grew
/// its log without bound (the soak found 820 MB after two minutes).
@Suite("SQLite: the WAL stays bounded under readers that never stop", .serialized, .ownThreads, .timeLimit(.minutes(5)))
struct WALBoundTests {
    /// A save of 50 books with 2 KB titles: about 120 KB of log.
    static func saveBooks(_ container: PersistentContainer, round: Int) throws -> Duration {
        let context = container.newBackgroundContext()
        return try context.performAndWait { context in
            for i in 0..<50 {
                context.insert(Book(isbn: "\(round)-\(i)", title: String(repeating: "t", count: 2_000) + "\(round)"))
            }
            let start = ContinuousClock.now
            try context.save()
            return ContinuousClock.now - start
        }
    }

    static func walSize(_ url: URL) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: url.path + "-wal")[.size]) as? Int) ?? 0
    }

    /// Saves `rounds` times while three contexts read back to back, their snapshots overlapping;
    /// returns the largest size the `-wal` file reached after a save.
    static func largestWAL(maximumWALSize: Int, rounds: Int) async throws -> Int {
        let url = TemporaryDirectory.make().appending(path: "wal.loom")
        var options = SQLiteStore.Options()
        options.maximumWALSize = maximumWALSize
        let container = PersistentContainer(store: try SQLiteStore(url: url, schema: try Schema(Book.self), options: options))
        let stop = Atomic<Bool>(false)
        let readers = (0..<3).map { _ in container.newBackgroundContext() }
        let done = DispatchGroup()
        for reader in readers {
            done.enter()
            Thread {
                while !stop.load(ordering: .relaxed) {
                    // Each holds one moment's snapshot for a few milliseconds, as a request
                    // reading a consistent view does; three of them overlap.
                    try? reader.performAndWait { reader in
                        try reader.setQueryGenerationFrom(.current)
                        _ = try reader.count(for: FetchRequest<Book>())
                        usleep(3_000)
                        try reader.setQueryGenerationFrom(nil)
                    }
                }
                done.leave()
            }.start()
        }
        var largest = 0
        for round in 0..<rounds {
            _ = try saveBooks(container, round: round)
            largest = max(largest, walSize(url))
        }
        stop.store(true, ordering: .relaxed)
        done.wait()
        try await container.close()
        return largest
    }

    @Test("Three contexts reading without pause: the log is started over near its bound; with no bound it grows with every save")
    func readersThatNeverStop() async throws {
        let bounded = try await Self.largestWAL(maximumWALSize: 1 << 20, rounds: 150)
        let unbounded = try await Self.largestWAL(maximumWALSize: .max, rounds: 300)
        print("WAL under readers that never stop, saves of 50 books: largest \(bounded) bytes after 150 with a 1 MiB bound, \(unbounded) bytes after 300 with none")
        #expect(bounded < 4 << 20, "the log reached \(bounded) bytes with a bound of 1 MiB")
        // The starvation itself, shown: without the bound the same load grows the log past
        // what SQLite's own checkpoints every thousand pages (4 MB) would keep it to.
        #expect(unbounded > 8 << 20, "with no bound the log reached only \(unbounded) bytes")
    }

    @Test("A pinned query generation keeps the old log: saves give up on it after a short wait, and the log is emptied soon after its release")
    func pinnedGeneration() async throws {
        let url = TemporaryDirectory.make().appending(path: "pinned.loom")
        var options = SQLiteStore.Options()
        options.maximumWALSize = 1 << 20
        let container = PersistentContainer(store: try SQLiteStore(url: url, schema: try Schema(Book.self), options: options))
        _ = try Self.saveBooks(container, round: 0)
        let pinned = container.newBackgroundContext()
        try pinned.performAndWait { context in
            try context.setQueryGenerationFrom(.current)
            #expect(try context.count(for: FetchRequest<Book>()) == 50)
        }
        var slowest = Duration.zero
        for round in 1...60 { slowest = max(slowest, try Self.saveBooks(container, round: round)) }
        let held = Self.walSize(url)
        #expect(held > 4 << 20, "the pinned generation's snapshot keeps the log: \(held) bytes")
        // A give-up waits 100 ms, and is tried again only after the log grew a quarter bound more.
        #expect(slowest < .seconds(2), "a save took \(slowest) beside the pinned generation")
        try pinned.performAndWait { context in
            #expect(try context.count(for: FetchRequest<Book>()) == 50)
            try context.setQueryGenerationFrom(nil)
        }
        // The next try comes once the log grew a quarter bound past the last give-up.
        for round in 61...64 { _ = try Self.saveBooks(container, round: round) }
        let after = Self.walSize(url)
        #expect(after < 1 << 20, "after the generation's release the log is still \(after) bytes")
        #expect(try pinned.performAndWait { try $0.count(for: FetchRequest<Book>()) } == 65 * 50)
        try await container.close()
    }

    @Test("The bound's default is 64 MiB")
    func defaultBound() {
        #expect(SQLiteStore.Options().maximumWALSize == 64 << 20)
    }
}
