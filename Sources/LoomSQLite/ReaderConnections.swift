import Foundation
import GRDB
import GRDBSQLite
@_spi(LoomStore) import LoomCore

/// The SQLite store's read connections: Loom's own, opened read-only on the store's file, each
/// with its prepared statements, lent to one read at a time.
///
/// Every read the store makes is a single statement (a fetch, a count, a lookup by key, a
/// to-many fault), which SQLite runs on one snapshot by itself. GRDB's `DatabasePool` would
/// wrap each in a dispatch onto the reader's queue and a pool checkout; for the short reads a
/// fault or an ID lookup makes, that was most of their cost. Here a read takes an idle
/// connection under a lock (the one its thread used last, when that one is idle), and
/// `maximum` bounds how many exist. Writes stay on GRDB's writer.
final class ReaderConnections: @unchecked Sendable {
    // @unchecked: `idle`, `opened` and `isClosed` are only touched under `lock`; a connection
    // is used by the one thread that took it until it is returned.
    private let lock = NSLock()
    private let slots: DispatchSemaphore
    private var idle: [ReaderConnection] = []
    private var opened = 0
    private var isClosed = false
    let path: String
    /// What watches the connections' statements (a trace callback, SQL logging), if anything.
    let tracer: SQLTracer?

    init(path: String, maximum: Int, tracer: SQLTracer?) {
        self.path = path
        self.slots = DispatchSemaphore(value: max(1, maximum))
        self.tracer = tracer
    }

    /// Runs `body` with the prepared statement for `sql`, on a connection no one else uses
    /// meanwhile. The statement is reset before and after.
    func read<T>(_ sql: String, _ body: (RawStatement) throws -> T) throws -> T {
        slots.wait()
        defer { slots.signal() }
        let connection = try checkOut()
        defer { checkIn(connection) }
        return try connection.with(sql, body)
    }

    private func checkOut() throws -> ReaderConnection {
        lock.lock()
        if isClosed {
            lock.unlock()
            throw DatabaseError(resultCode: .SQLITE_MISUSE, message: "the store is closed")
        }
        if !idle.isEmpty {
            // The connection this thread used last, when idle: a connection that moves to
            // another thread leaves its page cache and statements in the other core's caches,
            // and taking the last one returned makes readers on two threads swap often.
            let thread = ThreadID.current
            let index = idle.lastIndex { $0.lastThread == thread } ?? idle.endIndex - 1
            idle.swapAt(index, idle.endIndex - 1)
            let connection = idle.removeLast()
            lock.unlock()
            connection.lastThread = thread
            return connection
        }
        opened += 1
        lock.unlock()
        do {
            let connection = try ReaderConnection(path: path, tracer: tracer)
            connection.lastThread = ThreadID.current
            return connection
        } catch {
            lock.lock()
            opened -= 1
            lock.unlock()
            throw error
        }
    }

    private func checkIn(_ connection: ReaderConnection) {
        lock.lock()
        defer { lock.unlock() }
        if isClosed { return }   // released here: the connection closes
        idle.append(connection)
    }

    /// Closes the idle connections; connections in use close when they are returned.
    func close() {
        lock.lock()
        isClosed = true
        let connections = idle
        idle = []
        lock.unlock()
        withExtendedLifetime(connections) {}
    }
}

/// One read-only connection and its prepared statements.
final class ReaderConnection {
    let handle: OpaquePointer
    private var statements: [String: OpaquePointer] = [:]
    /// Kept alive while SQLite may call it.
    private let tracer: SQLTracer?
    /// The thread that last checked this connection out (``ThreadID``), 0 before any; only
    /// touched by the thread that holds the connection or under the pool's lock.
    var lastThread: UInt = 0

    init(path: String, tracer: SQLTracer?) throws {
        var db: OpaquePointer?
        let code = sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nil)
        guard code == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) }
            sqlite3_close_v2(db)
            throw DatabaseError(resultCode: ResultCode(rawValue: code), message: message)
        }
        handle = db
        sqlite3_busy_timeout(db, 5_000)
        SQLFunctions.register(on: db)
        self.tracer = tracer
        tracer?.install(on: db)
    }

    deinit {
        for statement in statements.values { sqlite3_finalize(statement) }
        sqlite3_close_v2(handle)
    }

    /// Runs `body` with the prepared statement for `sql`, reset before and after.
    func with<T>(_ sql: String, _ body: (RawStatement) throws -> T) throws -> T {
        try RawStatement.with(try prepared(sql), sql, body)
    }

    /// How many prepared statements a connection keeps: past that, all are finalized and
    /// prepared again as they are used (predicates with constant lists of varying length make
    /// new statement texts, which would otherwise pile up).
    static let statementLimit = 256

    private func prepared(_ sql: String) throws -> OpaquePointer {
        let storage = Self.storage(of: sql)
        if let storage {
            for i in recent.indices where recent[i].address == storage.address && recent[i].count == storage.count {
                return recent[i].statement
            }
        }
        let statement = try statements[sql] ?? prepare(sql)
        if let storage { remember(sql, at: storage, statement) }
        return statement
    }

    private func prepare(_ sql: String) throws -> OpaquePointer {
        if statements.count >= Self.statementLimit {
            recent = []
            for statement in statements.values { sqlite3_finalize(statement) }
            statements = [:]
        }
        var statement: OpaquePointer?
        let code = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard code == SQLITE_OK, let statement else {
            throw DatabaseError(resultCode: ResultCode(rawValue: sqlite3_extended_errcode(handle)), message: String(cString: sqlite3_errmsg(handle)), sql: sql)
        }
        statements[sql] = statement
        return statement
    }

    // MARK: Recent statements, by their text's storage

    /// A text's storage: where its UTF-8 bytes are, and how many. `nil` for a text with no
    /// storage of its own: a small string (up to 15 bytes) lives inside the `String` value,
    /// and its bytes are copied for each look.
    @inline(__always)
    private static func storage(of sql: String) -> (address: UnsafeRawPointer, count: Int)? {
        guard sql.utf8.count > 15 else { return nil }
        return sql.utf8.withContiguousStorageIfAvailable { bytes in
            bytes.baseAddress.map { (UnsafeRawPointer($0), bytes.count) }
        } ?? nil
    }

    /// How many statements ``recent`` keeps.
    static let recentLimit = 4

    /// The statements used last, found by where their text is stored rather than by hashing it.
    /// The store's texts come from the SQL generator's caches, so a read that repeats passes
    /// the very same string, and comparing an address and a length costs a few instructions
    /// where hashing a statement's text for ``statements`` reads all of it (an ID lookup's
    /// fixed cost). Sound because each entry holds its text: while it does, no other string can
    /// be stored at that address, and strings share storage only when they are equal (shared
    /// storage is copied before it is changed). The statements are ``statements``' own; only
    /// that dictionary finalizes them.
    private var recent: [(sql: String, address: UnsafeRawPointer, count: Int, statement: OpaquePointer)] = []
    /// The entry of ``recent`` to replace next, once it is full.
    private var nextRecent = 0

    private func remember(_ sql: String, at storage: (address: UnsafeRawPointer, count: Int), _ statement: OpaquePointer) {
        let entry = (sql, storage.address, storage.count, statement)
        if recent.count < Self.recentLimit {
            recent.append(entry)
        } else {
            recent[nextRecent] = entry
            nextRecent = (nextRecent + 1) % Self.recentLimit
        }
    }
}
