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
/// Opening is bounded by the configuration's ``PostgreSQLStore/Configuration/connectTimeout``, and
/// every later wait by its ``PostgreSQLStore/Configuration/responseTimeout``:
/// a server that does not answer by then is taken as gone, the connection is closed (which
/// fails whatever else waits on it) and ``PGConnectionLost`` is thrown. A connection the server
/// closed fails at once; its owner opens another (see ``isLost(_:)``).
///
/// `@unchecked Sendable`: a connection is used by one thread at a time (the pool hands it out,
/// the store's write gate guards the writer); postgres-nio's connection itself is thread-safe.
final class PGConnection: @unchecked Sendable {
    let connection: PostgresConnection
    let trace: (@Sendable (String) -> Void)?
    /// SQL logging (``LoomLogging``), fixed when the connection opened; `nil` when off.
    let log: SQLStatementLog?
    /// How long a wait for the server may take.
    let timeout: Duration
    /// Set when a wait found the connection lost: it is not used again.
    private let lost = Atomic<Bool>(false)
    /// The statements prepared on this connection, by their SQL (see ``queryPrepared(_:_:)``).
    /// Touched by the one thread using the connection.
    private var prepared: [String: (statement: PreparedQuery, types: [PostgresDataType])] = [:]
    private static let logger = Logger(label: "loom.postgresql", factory: { _ in SwiftLogNoOpLogHandler() })
    private static let ids = AtomicCounter()

    private init(_ connection: PostgresConnection, trace: (@Sendable (String) -> Void)?, log: SQLStatementLog?, timeout: Duration) {
        self.connection = connection
        self.trace = trace
        self.log = log
        self.timeout = timeout
    }

    /// Opens a connection (waiting on the calling thread, at most the connect timeout), with
    /// the configuration's TLS mode and password (``PostgreSQLTLS``, ``PostgreSQLPassword``).
    ///
    /// - Throws: `LoomError` when the TLS settings cannot be used, or when TLS or the password
    ///   refused the connection (told in words); the driver's error for any other failure.
    static func open(_ configuration: PostgreSQLStore.Configuration) throws -> PGConnection {
        var (options, passwordNote) = try configuration.makeConnectionConfiguration(environment: ProcessInfo.processInfo.environment)
        options.options.connectTimeout = .nanoseconds(Int64(min(configuration.connectTimeout / .nanoseconds(1), Double(Int64.max))))
        let future = PostgresConnection.connect(on: MultiThreadedEventLoopGroup.singleton.next(), configuration: options, id: ids.next(), logger: logger)
        let connection: PostgresConnection
        do {
            connection = try wait(for: future, timeout: configuration.connectTimeout, waiting: "to connect") {
                // Connected after all, too late: closed rather than leaked.
                future.whenSuccess { connection in connection.close().whenComplete { _ in withExtendedLifetime(connection) {} } }
            }
        } catch {
            throw PostgreSQLTLS.explain(error, configuration: configuration, passwordNote: passwordNote) ?? error
        }
        return PGConnection(connection, trace: configuration.trace, log: configuration.sqlLog ?? LoomLogging.sqlLog(store: configuration.description),
                            timeout: configuration.responseTimeout)
    }

    /// Whether the connection is closed, or was found lost (postgres-nio may not have noticed yet).
    var isClosed: Bool { lost.load(ordering: .relaxed) || connection.isClosed }

    /// Waits on the calling thread for `future`, at most `timeout`; past it, runs `giveUp` and
    /// throws ``PGConnectionLost``.
    ///
    /// With `isClosed`, the wait also ends soon after the connection closes with no answer:
    /// postgres-nio writes a statement to its channel with no promise, and one that reaches the
    /// event loop after the channel closed (the server shut down or ended the session just as
    /// it was sent) is dropped without its future ever completing. Waiting for it would hold
    /// the caller (and, for the writer, every save of the process) for the whole timeout; so
    /// the wait looks at the connection every ``closedCheckInterval`` and, once it is closed,
    /// gives postgres-nio ``closedGrace`` to fail the statement itself before throwing
    /// ``PGConnectionClosed``. (A callback on the connection's close future would do it without
    /// waking, but one per statement would pile up on a connection that lives for days.)
    private static func wait<T: Sendable>(
        for future: EventLoopFuture<T>, timeout: Duration, waiting what: String, isClosed: (() -> Bool)? = nil, giveUp: () -> Void
    ) throws -> T {
        let outcome = Outcome<T>()
        future.whenComplete { outcome.finish($0) }
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        while true {
            let left = deadline - clock.now
            guard left > .zero else { break }
            if let result = outcome.wait(timeout: isClosed == nil ? left : min(left, closedCheckInterval)) { return try result.get() }
            if let isClosed, isClosed() {
                if let result = outcome.wait(timeout: closedGrace) { return try result.get() }
                throw PGConnectionClosed(reason: "the connection closed before the server answered (waiting \(what))")
            }
        }
        giveUp()
        throw PGConnectionLost(reason: "the server did not answer within \(timeout) (waiting \(what))")
    }

    /// How often a wait for a statement's answer looks whether the connection closed.
    static let closedCheckInterval: Duration = .milliseconds(200)
    /// How long a wait gives postgres-nio, once the connection is closed, to answer or fail the
    /// statement itself.
    static let closedGrace: Duration = .milliseconds(100)

    /// Waits for a statement's answer; a server silent for longer than the timeout closes the
    /// connection, and a connection closed with the statement unanswered ends the wait.
    private func wait<T: Sendable>(_ future: EventLoopFuture<T>) throws -> T {
        let connection = self.connection
        do {
            return try Self.wait(for: future, timeout: timeout, waiting: "for a statement's answer", isClosed: { connection.isClosed }) {
                connection.close().whenComplete { _ in withExtendedLifetime(connection) {} }
            }
        } catch {
            if Self.isLost(error) { lost.store(true, ordering: .relaxed) }
            throw error
        }
    }

    /// Whether `error` says the connection is gone (closed by the server or the network, or
    /// silent past the timeout) rather than that a statement was refused: the connection is
    /// not used again, and a statement not sent on it can be sent on another.
    static func isLost(_ error: any Error) -> Bool {
        if error is PGConnectionLost || error is PGConnectionClosed { return true }
        // What postgres-nio's prepared queries report (``runPrepared(_:_:)``).
        switch error as? PostgresError {
        case .connectionClosed?: return true
        case .protocol(let reason)?: return reason == "Unexpected connection close"
        case .server?:
            let state = PostgreSQLStore.sqlState(of: error) ?? ""
            return state.hasPrefix("08") || state.hasPrefix("57P")
        case nil: break
        }
        guard let psql = error as? PSQLError else { return error is ChannelError || error is IOError }
        switch psql.code {
        case .serverClosedConnection, .clientClosedConnection, .connectionError, .uncleanShutdown: return true
        case .server:
            // Connection exceptions (08…) and the server shutting down or ending the session (57P…).
            let state = psql.serverInfo?[.sqlState] ?? ""
            return state.hasPrefix("08") || state.hasPrefix("57P")
        default: return false
        }
    }

    /// Throws when the connection was found lost: nothing more is sent on it (a statement
    /// queued behind one the server never answered would wait as long again).
    private func checkNotLost() throws {
        if lost.load(ordering: .relaxed) { throw PGConnectionLost(reason: "the connection was lost by an earlier statement") }
    }

    /// Runs one statement and returns its rows.
    @discardableResult
    func query(_ sql: String, _ bindings: PostgresBindings = PostgresBindings()) throws -> PostgresQueryResult {
        try checkNotLost()
        trace?(sql)
        guard let log else { return try wait(connection.query(PostgresQuery(unsafeSQL: sql, binds: bindings), logger: Self.logger)) }
        let start = ContinuousClock.now
        let result = try wait(connection.query(PostgresQuery(unsafeSQL: sql, binds: bindings), logger: Self.logger))
        logStatement(sql, bindings, duration: ContinuousClock.now - start, rows: result.rows.count, log: log)
        return result
    }

    /// Sends one statement without waiting for it: the caller goes on (preparing the next one)
    /// while the server runs it, and waits with ``PendingStatement/wait()``. postgres-nio runs a
    /// connection's statements one after the other, in the order they were sent. With SQL
    /// logging on, the statement runs at once (its duration is logged) and the result is ready.
    func send(_ sql: String, _ bindings: PostgresBindings) -> PendingStatement {
        guard log == nil else { return .ran(Result { try query(sql, bindings) }) }
        do { try checkNotLost() } catch { return .ran(.failure(error)) }
        trace?(sql)
        return .sent(connection.query(PostgresQuery(unsafeSQL: sql, binds: bindings), logger: Self.logger), on: self)
    }

    /// A statement sent by ``send(_:_:)``: under way, or already run (SQL logging on).
    enum PendingStatement {
        case sent(EventLoopFuture<PostgresQueryResult>, on: PGConnection)
        case ran(Result<PostgresQueryResult, any Error>)

        /// Waits, on the calling thread, for the statement's rows.
        @discardableResult
        func wait() throws -> PostgresQueryResult {
            switch self {
            case .sent(let future, let connection): try connection.wait(future)
            case .ran(let result): try result.get()
            }
        }
    }

    /// Adds a handler of the notifications on `channel` (it runs on the event loop, once for
    /// each, with the notification's payload), unless the connection is closed: returns whether
    /// it was added. postgres-nio sends the `LISTEN` itself; a statement sent after this returns
    /// runs after that `LISTEN`.
    ///
    /// postgres-nio's `addListener(channel:handler:)` writes its request with no promise: written
    /// from another thread, the request reaches the connection's event loop later, and if the
    /// connection was lost meanwhile (a session ended by `pg_terminate_backend`, a server
    /// restarting) it is dropped before postgres-nio's channel handler sees it, and its
    /// `NotificationListener.deinit` traps ("Notification closure had not been used") on the
    /// event loop, ending the process. So it is called here on the connection's event loop, once
    /// the channel was found active there: the write then runs at once through the pipeline into
    /// the channel handler, whose listen state owns the listener from then on and ends it on every
    /// later path (the `LISTEN` failing, the connection closing or already closing, the channel
    /// going inactive). Nothing here waits on Swift's cooperative thread pool.
    ///
    /// Isolation: any thread. The calling thread waits for the event loop, at most the response
    /// timeout (on the event loop itself it runs at once).
    func addListener(channel: String, handler: @escaping @Sendable (String) -> Void) throws -> Bool {
        let connection = self.connection
        @Sendable func add() -> Bool {
            guard !connection.isClosed else { return false }
            connection.addListener(channel: channel) { _, notification in handler(notification.payload) }
            return true
        }
        if connection.eventLoop.inEventLoop { return add() }
        return try wait(connection.eventLoop.submit(add))
    }

    /// Runs one statement, handing each row to `body` on the event loop as it arrives (no array
    /// of every row is kept).
    func query(_ sql: String, _ bindings: PostgresBindings, eachRow body: @escaping @Sendable (PostgresRow) throws -> Void) throws {
        try checkNotLost()
        trace?(sql)
        guard let log else {
            _ = try wait(connection.query(PostgresQuery(unsafeSQL: sql, binds: bindings), logger: Self.logger, body))
            return
        }
        let start = ContinuousClock.now
        let rows = RowCounter()
        _ = try wait(connection.query(PostgresQuery(unsafeSQL: sql, binds: bindings), logger: Self.logger) { row in
            rows.count.add(1, ordering: .relaxed)
            try body(row)
        })
        logStatement(sql, bindings, duration: ContinuousClock.now - start, rows: rows.count.load(ordering: .relaxed), log: log)
    }

    /// Logs a statement that ran (``LoomLogging``), with its plan when level 3 finds it slow.
    private func logStatement(_ sql: String, _ bindings: PostgresBindings, duration: Duration, rows: Int, log: SQLStatementLog) {
        var plan: String?
        if log.wantsPlan(after: duration) {
            let keyword = sql.prefix(while: { !$0.isWhitespace }).uppercased()
            if ["SELECT", "WITH", "INSERT", "UPDATE", "DELETE"].contains(keyword) {
                do {
                    let lines = try wait(connection.query(PostgresQuery(unsafeSQL: "EXPLAIN " + sql, binds: bindings), logger: Self.logger))
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

    /// How many statements a connection prepares; past it, statements go unnamed. Each save
    /// shape is one, so a schema with many entities saved in many combinations stops here
    /// rather than filling the server session's memory.
    static let preparedStatementLimit = 100

    /// How many statements are prepared on this connection.
    var preparedCount: Int { prepared.count }

    /// Runs one statement as a named prepared statement of this connection, preparing it at its
    /// first run (a round trip more, once): the server parses and plans the same SQL once
    /// instead of at every run. Rows are not kept. Falls back to ``query(_:_:)`` past
    /// ``preparedStatementLimit``, or when the values cannot be handed over (``PreparedValues``).
    ///
    /// - Throws: ``PGStatementNotRun`` when preparing failed: the statement itself was not sent.
    func runPrepared(_ sql: String, _ bindings: PostgresBindings) throws {
        let known = prepared[sql]
        let values = if let known { PreparedValues.values(of: bindings, types: known.types) } else { PreparedValues.values(of: bindings) }
        guard let values, known != nil || prepared.count < Self.preparedStatementLimit else {
            try query(sql, bindings)
            return
        }
        try checkNotLost()
        let start = ContinuousClock.now
        let statement: PreparedQuery
        if let known {
            statement = known.statement
        } else {
            do {
                statement = try wait(connection.prepare(query: sql))
            } catch {
                throw PGStatementNotRun(underlying: error)
            }
            prepared[sql] = (statement, values.map(\.type))
        }
        // Traced when it goes out to run, as ``query(_:_:)`` traces: the preparation before it
        // runs nothing.
        trace?(sql)
        let rows = try wait(statement.execute(values))
        if let log { logStatement(sql, bindings, duration: ContinuousClock.now - start, rows: rows.count, log: log) }
    }

    /// Closes the connection, waiting at most the response timeout for the server's goodbye.
    func close() {
        _ = try? Self.wait(for: connection.close(), timeout: timeout, waiting: "to close") {}
    }

    deinit {
        // A connection dropped unclosed (a store released without close()) ends with it.
        // The connection stays alive until it is closed (postgres-nio asserts that).
        let connection = self.connection
        if !connection.isClosed { connection.close().whenComplete { _ in withExtendedLifetime(connection) {} } }
    }
}

/// A statement that failed before it was sent to run (its preparation failed): whatever it
/// would have changed is unchanged, even when the connection was lost.
struct PGStatementNotRun: Error {
    let underlying: any Error
}

/// A connection the server stopped answering: it was silent past the response timeout.
struct PGConnectionLost: Error, CustomStringConvertible {
    let reason: String
    var description: String { reason }
}

/// A connection that closed (the server shut down, or ended the session) with a statement
/// unanswered, and postgres-nio had not failed it: unlike ``PGConnectionLost``, the wait was
/// short, so a statement not yet run may be sent again on another connection.
struct PGConnectionClosed: Error, CustomStringConvertible {
    let reason: String
    var description: String { reason }
}

/// The result of a future, handed from the event loop to the thread waiting for it.
///
/// `@unchecked Sendable`: `result` is only touched with `condition` locked.
private final class Outcome<T: Sendable>: @unchecked Sendable {
    private let condition = NSCondition()
    private var result: Result<T, any Error>?

    func finish(_ result: Result<T, any Error>) {
        condition.withLock {
            self.result = result
            condition.signal()
        }
    }

    /// The result, or `nil` when none came within `timeout`.
    func wait(timeout: Duration) -> Result<T, any Error>? {
        let deadline = Date(timeIntervalSinceNow: timeout / .seconds(1))
        condition.lock()
        defer { condition.unlock() }
        while result == nil, condition.wait(until: deadline) {}
        return result
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
    /// that is lost (closed by the server, or silent past the timeout) is dropped, and the next
    /// use opens another. A kept connection found closed by the server when `body` runs on it
    /// (the server restarted, or ended the session, while it sat idle) is replaced at once:
    /// `body` runs again on the next connection, until one that is not stale answers (at most
    /// every kept connection, then a new one). Not after a timeout, which would double the wait.
    func withConnection<T>(_ body: (PGConnection) throws -> T) throws -> T {
        while true {
            let (connection, reused) = try checkOut()
            do {
                let value = try body(connection)
                checkIn(connection, lost: false)
                return value
            } catch {
                let lost = PGConnection.isLost(error)
                checkIn(connection, lost: lost)
                guard reused, lost, !(error is PGConnectionLost) else { throw error }
            }
        }
    }

    /// A connection of the pool, and whether it was kept from an earlier use.
    private func checkOut() throws -> (PGConnection, reused: Bool) {
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
                return (connection, true)
            }
            if open < maximum {
                open += 1
                condition.unlock()
                do {
                    return (try PGConnection.open(configuration), false)
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

    private func checkIn(_ connection: PGConnection, lost: Bool) {
        let dropped = condition.withLock {
            defer { condition.signal() }
            guard closed || lost || connection.isClosed else {
                idle.append(connection)
                return false
            }
            open -= 1
            return true
        }
        // Closed outside the lock: closing may wait for the server.
        if dropped { connection.close() }
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
