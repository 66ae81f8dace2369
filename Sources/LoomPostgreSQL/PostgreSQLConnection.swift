import Foundation
@_spi(LoomStore) import LoomCore
import Logging
import NIOCore
import NIOPosix
import PostgresNIO

/// One connection to the server, used synchronously: a statement is sent and the calling thread
/// waits for its rows. Loom's store protocol is synchronous (a fault fires on attribute access),
/// so a store waits on the caller's own thread — a context's queue, the main actor — and never
/// on one of NIO's event-loop threads, which keep running the connection meanwhile: a busy
/// event loop delays the answer, it cannot deadlock the caller.
///
/// `@unchecked Sendable`: a connection is used by one thread at a time (the pool hands it out,
/// the store's write gate guards the writer); postgres-nio's connection itself is thread-safe.
final class PGConnection: @unchecked Sendable {
    let connection: PostgresConnection
    let trace: (@Sendable (String) -> Void)?
    private static let logger = Logger(label: "loom.postgresql", factory: { _ in SwiftLogNoOpLogHandler() })
    private static let ids = AtomicCounter()

    private init(_ connection: PostgresConnection, trace: (@Sendable (String) -> Void)?) {
        self.connection = connection
        self.trace = trace
    }

    /// Opens a connection (waiting on the calling thread).
    static func open(_ configuration: PostgreSQLStore.Configuration) throws -> PGConnection {
        let future = PostgresConnection.connect(
            on: MultiThreadedEventLoopGroup.singleton.next(), configuration: configuration.connectionConfiguration,
            id: ids.next(), logger: logger)
        return PGConnection(try future.wait(), trace: configuration.trace)
    }

    var isClosed: Bool { connection.isClosed }

    /// Runs one statement and returns its rows.
    @discardableResult
    func query(_ sql: String, _ bindings: PostgresBindings = PostgresBindings()) throws -> PostgresQueryResult {
        trace?(sql)
        return try connection.query(PostgresQuery(unsafeSQL: sql, binds: bindings), logger: Self.logger).wait()
    }

    /// Runs one statement, handing each row to `body` on the event loop as it arrives (no array
    /// of every row is kept).
    func query(_ sql: String, _ bindings: PostgresBindings, eachRow body: @escaping @Sendable (PostgresRow) throws -> Void) throws {
        trace?(sql)
        _ = try connection.query(PostgresQuery(unsafeSQL: sql, binds: bindings), logger: Self.logger, body).wait()
    }

    func close() {
        _ = try? connection.close().wait()
    }

    deinit {
        // A connection dropped unclosed (a store released without close()) ends with it.
        // The connection stays alive until it is closed (postgres-nio asserts that).
        let connection = self.connection
        if !connection.isClosed { connection.close().whenComplete { _ in withExtendedLifetime(connection) {} } }
    }
}

/// A counter for connection IDs.
final class AtomicCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var value = 0
    func next() -> Int { lock.withLock { value += 1; return value } }
}

/// The store's reading connections: up to `maximum` open at once, each used by one thread at a
/// time, opened when first needed and kept.
///
/// `@unchecked Sendable`: its state is only touched with `condition` locked.
final class PGConnectionPool: @unchecked Sendable {
    private let configuration: PostgreSQLStore.Configuration
    private let maximum: Int
    private let condition = NSCondition()
    private var idle: [PGConnection] = []
    private var open = 0
    private var closed = false

    init(_ configuration: PostgreSQLStore.Configuration, maximum: Int) {
        self.configuration = configuration
        self.maximum = max(1, maximum)
    }

    /// Runs `body` with a connection of the pool, waiting for one when all are busy. A connection
    /// that failed (closed by the server) is dropped, and the next use opens another.
    func withConnection<T>(_ body: (PGConnection) throws -> T) throws -> T {
        let connection = try checkOut()
        do {
            let value = try body(connection)
            checkIn(connection)
            return value
        } catch {
            checkIn(connection)
            throw error
        }
    }

    private func checkOut() throws -> PGConnection {
        condition.lock()
        while true {
            if closed {
                condition.unlock()
                throw PoolClosed()
            }
            if let connection = idle.popLast() {
                condition.unlock()
                if connection.isClosed {
                    condition.lock()
                    open -= 1
                    continue
                }
                return connection
            }
            if open < maximum {
                open += 1
                condition.unlock()
                do {
                    return try PGConnection.open(configuration)
                } catch {
                    condition.lock()
                    open -= 1
                    condition.signal()
                    condition.unlock()
                    throw error
                }
            }
            condition.wait()
        }
    }

    private func checkIn(_ connection: PGConnection) {
        condition.lock()
        defer { condition.unlock() }
        if closed || connection.isClosed {
            open -= 1
            condition.signal()
            if closed { connection.close() }
            return
        }
        idle.append(connection)
        condition.signal()
    }

    /// Closes the idle connections; busy ones close when they come back.
    func close() {
        condition.lock()
        closed = true
        let connections = idle
        idle = []
        open -= connections.count
        condition.broadcast()
        condition.unlock()
        for connection in connections { connection.close() }
    }
}

/// The pool was closed with its store.
struct PoolClosed: Error {}
