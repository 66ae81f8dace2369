import Foundation
import Loom
@_spi(LoomStore) import LoomCore
@testable import LoomSQLite
import Synchronization
import Testing

/// The SQLite store's read connections go back to the thread that used them last
/// (``ReaderConnections``): a connection that moves between threads reads from another core's
/// caches, and readers on two threads swapped connections whenever one returned its connection
/// just before the other asked.
@Suite("SQLite: a reading thread gets back the connection it used last", .serialized, .ownThreads, .timeLimit(.minutes(1)))
struct ReaderConnectionsTests {
    /// The prepared statement a read ran on, as a number: each connection prepares its own, so
    /// it names the connection.
    static func statementUsed(_ readers: ReaderConnections, while body: () -> Void = {}) throws -> UInt {
        try readers.read("SELECT 1") { statement in
            body()
            return UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(statement.handle)))
        }
    }

    static func makeReaders() throws -> (ReaderConnections, SQLiteStore) {
        let url = TemporaryDirectory.make().appending(path: "readers.loom")
        let store = try SQLiteStore(url: url, schema: try Schema(Book.self))
        return (ReaderConnections(path: url.path, maximum: 4, tracer: nil), store)
    }

    @Test("Two threads read at once; the one that returned its connection first reads next on it, not on the other's")
    func eachThreadKeepsItsConnection() throws {
        let (readers, store) = try Self.makeReaders()
        defer { readers.close(); try? store.close() }
        let otherInside = DispatchSemaphore(value: 0)
        let mayReturn = DispatchSemaphore(value: 0)
        let otherReturned = DispatchSemaphore(value: 0)
        let mayReadAgain = DispatchSemaphore(value: 0)
        let otherDone = DispatchSemaphore(value: 0)
        let otherUsed = Mutex<[UInt]>([])
        let failure = Mutex<String?>(nil)

        // This thread holds its connection until the other thread has one too; it returns its
        // connection first, the other thread last, so that the idle list ends with the other's.
        let first = try Self.statementUsed(readers) {
            Thread.detachNewThread {
                do {
                    let used = try Self.statementUsed(readers) {
                        otherInside.signal()
                        mayReturn.wait()
                    }
                    otherUsed.withLock { $0.append(used) }
                    otherReturned.signal()
                    mayReadAgain.wait()
                    let again = try Self.statementUsed(readers)
                    otherUsed.withLock { $0.append(again) }
                } catch {
                    // Let this thread's waits end, whichever read failed.
                    failure.withLock { $0 = "\(error)" }
                    otherInside.signal()
                    otherReturned.signal()
                }
                otherDone.signal()
            }
            otherInside.wait()
        }
        mayReturn.signal()
        otherReturned.wait()
        let second = try Self.statementUsed(readers)
        mayReadAgain.signal()
        otherDone.wait()

        #expect(failure.withLock { $0 } == nil)
        let other = otherUsed.withLock { $0 }
        try #require(other.count == 2)
        #expect(first != other[0], "two reads at once run on two connections")
        #expect(second == first, "this thread's next read is on its own connection, not the one returned last")
        #expect(other[1] == other[0], "and the other thread's next read on its own")
    }

    @Test("A thread takes another thread's idle connection rather than opening one more")
    func idleConnectionOfAnotherThreadIsReused() throws {
        let (readers, store) = try Self.makeReaders()
        defer { readers.close(); try? store.close() }
        let first = try Self.statementUsed(readers)
        let onAnotherThread = Mutex<Result<UInt, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            let result = Result { try Self.statementUsed(readers) }
            onAnotherThread.withLock { $0 = result }
            done.signal()
        }
        done.wait()
        let used = try #require(onAnotherThread.withLock { $0 }).get()
        #expect(used == first)
    }
}
