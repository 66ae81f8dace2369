import Foundation
import GRDBSQLite
@_spi(LoomStore) import LoomCore

/// What the SQLite store watches of the statements its connections run: the
/// ``SQLiteStore/Options/trace`` callback and SQL logging (``LoomLogging``), through one
/// `sqlite3_trace_v2` hook per connection (SQLite keeps one per connection).
///
/// A store makes one only when it has a trace callback or SQL logging is on; otherwise its
/// connections have no hook, and running a statement costs nothing for either.
///
/// `@unchecked Sendable`: `trace` and `log` are constants; the row counts and the plan
/// connection are only touched with `state` locked.
package final class SQLTracer: @unchecked Sendable {
    let trace: (@Sendable (String) -> Void)?
    let log: SQLStatementLog?
    /// The store's file, which slow statements' plans are explained on.
    private let path: String
    private let state = NSLock()
    /// When each running statement started, and how many rows it returned so far (level 3).
    /// SQLite's own profile time counts whole milliseconds, too coarse for most statements.
    private var running: [OpaquePointer: (start: ContinuousClock.Instant, rows: Int)] = [:]
    /// A read-only connection of its own that explains slow statements' plans, opened at the
    /// first: explaining on the statement's own connection from inside its hook would run SQL
    /// on a connection in the middle of a call.
    private var planConnection: OpaquePointer?

    /// A tracer for a store at `path`, or `nil` when there is nothing to watch.
    package static func make(path: String, trace: (@Sendable (String) -> Void)?) -> SQLTracer? {
        let log = LoomLogging.sqlLog(store: path)
        if trace == nil && log == nil { return nil }
        return SQLTracer(path: path, trace: trace, log: log)
    }

    private init(path: String, trace: (@Sendable (String) -> Void)?, log: SQLStatementLog?) {
        self.path = path
        self.trace = trace
        self.log = log
    }

    deinit {
        if let planConnection { sqlite3_close_v2(planConnection) }
    }

    /// Hooks `connection`. The connection must not outlive the tracer (its owner keeps both).
    package func install(on connection: OpaquePointer) {
        var mask: UInt32 = 0
        if trace != nil { mask |= UInt32(SQLITE_TRACE_STMT) }
        if let log {
            mask |= UInt32(SQLITE_TRACE_STMT | SQLITE_TRACE_PROFILE)
            if log.level >= 3 { mask |= UInt32(SQLITE_TRACE_ROW) }
        }
        sqlite3_trace_v2(connection, mask, { event, context, statement, detail in
            guard let context, let statement else { return 0 }
            let tracer = Unmanaged<SQLTracer>.fromOpaque(context).takeUnretainedValue()
            tracer.handle(event: event, statement: OpaquePointer(statement), detail: detail)
            return 0
        }, Unmanaged.passUnretained(self).toOpaque())
    }

    private func handle(event: UInt32, statement: OpaquePointer, detail: UnsafeMutableRawPointer?) {
        switch Int32(event) {
        case SQLITE_TRACE_STMT:
            // A trigger's sub-program reports itself as a "-- name" comment: not a statement
            // of the store's.
            if let detail, detail.load(as: CChar.self) == CChar(UInt8(ascii: "-")) { return }
            if let trace, let text = sqlite3_sql(statement) { trace(String(cString: text)) }
            if log != nil {
                state.lock()
                running[statement] = (ContinuousClock.now, 0)
                state.unlock()
            }
        case SQLITE_TRACE_ROW:
            state.lock()
            running[statement]?.rows += 1
            state.unlock()
        case SQLITE_TRACE_PROFILE:
            guard let log, let text = sqlite3_sql(statement) else { return }
            state.lock()
            let run = running.removeValue(forKey: statement)
            state.unlock()
            let duration = run.map { ContinuousClock.now - $0.start } ?? .zero
            logStatement(String(cString: text), statement: statement, duration: duration, rows: run?.rows, log: log)
        default:
            break
        }
    }

    private func logStatement(_ sql: String, statement: OpaquePointer, duration: Duration, rows: Int?, log: SQLStatementLog) {
        var expanded: String?
        if log.level >= 2 || log.logsValues, sqlite3_bind_parameter_count(statement) > 0,
           let text = sqlite3_expanded_sql(statement) {
            expanded = String(cString: text)
            sqlite3_free(text)
        }
        let types = log.level >= 2 ? expanded.map { Self.parameterTypes(sql: sql, expanded: $0) } ?? [] : []
        let plan = log.wantsPlan(after: duration) ? explain(sql) : nil
        log.statement(sql, sqlWithValues: expanded, parameterTypes: types, duration: duration, rows: rows, plan: plan)
    }

    /// The storage class of every bound parameter of `sql`, read off SQLite's expansion of it,
    /// which writes each parameter's value in its place as a literal: `NULL`, an integer, a
    /// real, `'text'` or `x'blob'`. Outside parameters the two texts are the same, so they are
    /// walked together; a `?` inside a quoted string or name is not a parameter.
    static func parameterTypes(sql: String, expanded: String) -> [String] {
        let original = Array(sql.utf8), values = Array(expanded.utf8)
        var types: [String] = []
        var i = 0, j = 0
        var quote: UInt8?
        while i < original.count, j < values.count {
            let c = original[i]
            if let open = quote {
                if c == open { quote = nil }
                i += 1; j += 1
                continue
            }
            if c == UInt8(ascii: "'") || c == UInt8(ascii: "\"") {
                quote = c
                i += 1; j += 1
                continue
            }
            guard c == UInt8(ascii: "?") else { i += 1; j += 1; continue }
            i += 1
            while i < original.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(original[i]) { i += 1 }
            let (type, length) = literal(at: j, in: values)
            types.append(type)
            j += length
        }
        return types
    }

    /// The storage class of the literal at `start` of an expanded statement, and its length.
    private static func literal(at start: Int, in text: [UInt8]) -> (String, Int) {
        var end = start
        if text[start] == UInt8(ascii: "'") || (text[start] == UInt8(ascii: "x") && start + 1 < text.count && text[start + 1] == UInt8(ascii: "'")) {
            let isBlob = text[start] == UInt8(ascii: "x")
            end = isBlob ? start + 2 : start + 1
            while end < text.count {
                if text[end] == UInt8(ascii: "'") {
                    // '' is an escaped quote inside the text.
                    if end + 1 < text.count, text[end + 1] == UInt8(ascii: "'") { end += 2; continue }
                    end += 1
                    break
                }
                end += 1
            }
            return (isBlob ? "BLOB" : "TEXT", end - start)
        }
        let stops: Set<UInt8> = [UInt8(ascii: ","), UInt8(ascii: ")"), UInt8(ascii: " "), UInt8(ascii: "\n"), UInt8(ascii: ";")]
        while end < text.count, !stops.contains(text[end]) { end += 1 }
        let token = String(decoding: text[start..<end], as: UTF8.self)
        if token == "NULL" { return ("NULL", end - start) }
        let isReal = token.contains(where: { $0 == "." || $0 == "e" || $0 == "E" || $0 == "I" || $0 == "N" })
        return (isReal ? "REAL" : "INTEGER", end - start)
    }

    /// `EXPLAIN QUERY PLAN` of `sql` as an indented tree, why there is none, or `nil` when
    /// `sql` is not a query (a transaction, a pragma, a schema change).
    private func explain(_ sql: String) -> String? {
        let keyword = sql.prefix(while: { !$0.isWhitespace }).uppercased()
        guard ["SELECT", "WITH", "INSERT", "UPDATE", "DELETE", "REPLACE"].contains(keyword) else { return nil }
        state.lock()
        defer { state.unlock() }
        if planConnection == nil {
            var connection: OpaquePointer?
            if sqlite3_open_v2(path, &connection, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nil) == SQLITE_OK, let connection {
                SQLFunctions.register(on: connection)
                planConnection = connection
            } else {
                sqlite3_close_v2(connection)
                return "    (no plan: the store could not be opened to explain it)"
            }
        }
        guard let connection = planConnection else { return "" }
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(connection, "EXPLAIN QUERY PLAN " + sql, -1, &statement, nil) == SQLITE_OK, let statement else {
            let message = String(cString: sqlite3_errmsg(connection))
            sqlite3_finalize(statement)
            return "    (no plan: \(message))"
        }
        defer { sqlite3_finalize(statement) }
        var depth: [Int32: Int] = [0: 0]
        var lines: [String] = []
        while sqlite3_step(statement) == SQLITE_ROW {
            let id = sqlite3_column_int(statement, 0), parent = sqlite3_column_int(statement, 1)
            let level = (depth[parent] ?? 0) + 1
            depth[id] = level
            let detail = sqlite3_column_text(statement, 3).map { String(cString: $0) } ?? ""
            lines.append(String(repeating: "  ", count: level + 1) + detail)
        }
        return lines.joined(separator: "\n")
    }
}
