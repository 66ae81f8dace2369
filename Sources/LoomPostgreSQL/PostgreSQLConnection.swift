import Foundation
@_spi(LoomStore) import LoomCore
import Logging
import NIOCore
import NIOPosix
import PostgresNIO
import Synchronization

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
    /// SQL logging (``LoomLogging``), fixed when the connection opened; `nil` when off.
    let log: SQLStatementLog?
    private static let logger = Logger(label: "loom.postgresql", factory: { _ in SwiftLogNoOpLogHandler() })
    private static let ids = AtomicCounter()

    private init(_ connection: PostgresConnection, trace: (@Sendable (String) -> Void)?, log: SQLStatementLog?) {
        self.connection = connection
        self.trace = trace
        self.log = log
    }

    /// Opens a connection (waiting on the calling thread).
    static func open(_ configuration: PostgreSQLStore.Configuration) throws -> PGConnection {
        let future = PostgresConnection.connect(
            on: MultiThreadedEventLoopGroup.singleton.next(), configuration: configuration.connectionConfiguration,
            id: ids.next(), logger: logger)
        return PGConnection(try future.wait(), trace: configuration.trace, log: configuration.sqlLog ?? LoomLogging.sqlLog(store: configuration.description))
    }

    var isClosed: Bool { connection.isClosed }

    /// Runs one statement and returns its rows.
    @discardableResult
    func query(_ sql: String, _ bindings: PostgresBindings = PostgresBindings()) throws -> PostgresQueryResult {
        trace?(sql)
        guard let log else { return try connection.query(PostgresQuery(unsafeSQL: sql, binds: bindings), logger: Self.logger).wait() }
        let start = ContinuousClock.now
        let result = try connection.query(PostgresQuery(unsafeSQL: sql, binds: bindings), logger: Self.logger).wait()
        logStatement(sql, bindings, duration: ContinuousClock.now - start, rows: result.rows.count, log: log)
        return result
    }

    /// Sends one statement without waiting for it: the caller goes on (preparing the next one)
    /// while the server runs it, and waits with ``PendingStatement/wait()``. postgres-nio runs a
    /// connection's statements one after the other, in the order they were sent. With SQL
    /// logging on, the statement runs at once (its duration is logged) and the result is ready.
    func send(_ sql: String, _ bindings: PostgresBindings) -> PendingStatement {
        guard log == nil else { return .ran(Result { try query(sql, bindings) }) }
        trace?(sql)
        return .sent(connection.query(PostgresQuery(unsafeSQL: sql, binds: bindings), logger: Self.logger))
    }

    /// A statement sent by ``send(_:_:)``: under way, or already run (SQL logging on).
    enum PendingStatement {
        case sent(EventLoopFuture<PostgresQueryResult>)
        case ran(Result<PostgresQueryResult, any Error>)

        /// Waits, on the calling thread, for the statement's rows.
        @discardableResult
        func wait() throws -> PostgresQueryResult {
            switch self {
            case .sent(let future): try future.wait()
            case .ran(let result): try result.get()
            }
        }
    }

    /// Runs one statement, handing each row to `body` on the event loop as it arrives (no array
    /// of every row is kept).
    func query(_ sql: String, _ bindings: PostgresBindings, eachRow body: @escaping @Sendable (PostgresRow) throws -> Void) throws {
        trace?(sql)
        guard let log else {
            _ = try connection.query(PostgresQuery(unsafeSQL: sql, binds: bindings), logger: Self.logger, body).wait()
            return
        }
        let start = ContinuousClock.now
        let rows = RowCounter()
        _ = try connection.query(PostgresQuery(unsafeSQL: sql, binds: bindings), logger: Self.logger) { row in
            rows.count.add(1, ordering: .relaxed)
            try body(row)
        }.wait()
        logStatement(sql, bindings, duration: ContinuousClock.now - start, rows: rows.count.load(ordering: .relaxed), log: log)
    }

    /// Logs a statement that ran (``LoomLogging``), with its plan when level 3 finds it slow.
    private func logStatement(_ sql: String, _ bindings: PostgresBindings, duration: Duration, rows: Int, log: SQLStatementLog) {
        var plan: String?
        if log.wantsPlan(after: duration) {
            let keyword = sql.prefix(while: { !$0.isWhitespace }).uppercased()
            if ["SELECT", "WITH", "INSERT", "UPDATE", "DELETE"].contains(keyword) {
                do {
                    let lines = try connection.query(PostgresQuery(unsafeSQL: "EXPLAIN " + sql, binds: bindings), logger: Self.logger).wait()
                    plan = try lines.rows.map { "    " + (try $0.decode(String.self)) }.joined(separator: "\n")
                } catch {
                    plan = "    (no plan: \(String(reflecting: error)))"
                }
            }
        }
        log.statement(sql, parameterTypes: Self.parameterTypes(bindings), duration: duration, rows: rows, plan: plan)
    }

    /// The PostgreSQL type of every bound parameter. postgres-nio keeps the bound values
    /// protected: its description shows each as `(****; TYPE; format: …)`, which gives the type.
    static func parameterTypes(_ bindings: PostgresBindings) -> [String] {
        guard bindings.count > 0 else { return [] }
        return String(reflecting: bindings).matches(of: /\(([^;()]*); ([^;()]*); format: [a-z]+\)/).map { String($0.output.2) }
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

/// Rows counted as postgres-nio hands them over on its event loop.
private final class RowCounter: Sendable {
    let count = Atomic<Int>(0)
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
