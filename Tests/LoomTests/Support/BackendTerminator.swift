import Foundation
import Logging
import LoomPostgreSQL
import NIOCore
import NIOPosix
import PostgresNIO
import Synchronization

/// An administrator's connection to a test cluster, apart from the stores': it ends the
/// sessions of a store by their `application_name` (`pg_terminate_backend`, as an operator or a
/// failover would) and reads a store's tables as they are, whatever the store believes.
///
/// Used synchronously from any thread but the event loop's (it waits for each answer).
///
/// `@unchecked Sendable`: the connection is only used with `lock` held.
final class BackendTerminator: @unchecked Sendable {
    private let configuration: PostgreSQLStore.Configuration
    private let lock = NSLock()
    private var connection: PostgresConnection?
    private static let logger = Logger(label: "loom.tests.admin", factory: { _ in SwiftLogNoOpLogHandler() })

    /// The name of this connection's own session, which it never ends.
    static let applicationName = "loom-tests-admin"

    init(_ configuration: PostgreSQLStore.Configuration) {
        var configuration = configuration
        configuration.applicationName = Self.applicationName
        configuration.statementTimeout = nil
        self.configuration = configuration
    }

    /// Ends every session named `applicationName`; returns how many it ended.
    @discardableResult
    func terminate(applicationName: String) throws -> Int {
        var bindings = PostgresBindings()
        bindings.append(applicationName)
        let rows = try query("SELECT (count(*) FILTER (WHERE pg_terminate_backend(pid)))::text FROM pg_stat_activity WHERE application_name = $1", bindings)
        return Int(rows.first ?? "0") ?? 0
    }

    /// How many sessions named `applicationName` the server has.
    func sessions(applicationName: String) throws -> Int {
        var bindings = PostgresBindings()
        bindings.append(applicationName)
        return Int(try query("SELECT count(*)::text FROM pg_stat_activity WHERE application_name = $1", bindings).first ?? "0") ?? 0
    }

    /// Runs `sql` and returns the first column of every row as text (`NULL` as "NULL"). The
    /// connection is opened on first use, and again after the server restarted.
    func query(_ sql: String, _ bindings: PostgresBindings = PostgresBindings()) throws -> [String] {
        try lock.withLock {
            if connection == nil || connection!.isClosed {
                connection = try PostgresConnection.connect(
                    on: MultiThreadedEventLoopGroup.singleton.next(), configuration: try configuration.connectionConfiguration, id: 1, logger: Self.logger).wait()
            }
            do {
                let result = try connection!.query(PostgresQuery(unsafeSQL: sql, binds: bindings), logger: Self.logger).wait()
                return try result.rows.map { row in try row.decode(String?.self) ?? "NULL" }
            } catch let error as PSQLError where error.code != .server {
                connection = nil
                throw error
            }
        }
    }

    /// Every table of `schema` but the key allocator's (whose reservations survive rollbacks by
    /// design), each row as JSON without its key and version columns, sorted; the history as
    /// its count and the entities of each transaction, in number order; and the store's
    /// metadata but its identifier.
    func contents(ofSchema schema: String) throws -> [String] {
        var bindings = PostgresBindings()
        bindings.append(schema)
        let tables = try query("SELECT table_name::text FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1", bindings)
        var lines: [String] = ["tables \(tables)"]
        let quoted = "\"\(schema)\""
        for table in tables where table != "loom_keys" && table != "loom_history" && table != "loom_metadata" {
            let rows = try query("SELECT (to_jsonb(t) - ARRAY['Z_PK', 'Z_OPT', 'z_pk', 'z_opt'])::text FROM \(quoted).\"\(table)\" t")
            lines += rows.sorted().map { "\(table) \($0)" }
        }
        if tables.contains("loom_metadata") {
            lines += try query("SELECT key || '=' || value FROM \(quoted).loom_metadata WHERE key NOT IN ('storeIdentifier', 'schema') ORDER BY key")
        }
        if tables.contains("loom_history") {
            lines += try query("SELECT 'history ' || number || ' ' || entities || ' ' || (changes IS NOT NULL) FROM \(quoted).loom_history ORDER BY number")
        }
        return lines
    }

    func close() {
        lock.withLock {
            if let connection, !connection.isClosed { try? connection.close().wait() }
            connection = nil
        }
    }

    deinit {
        if let connection, !connection.isClosed { connection.close().whenComplete { _ in withExtendedLifetime(connection) {} } }
    }
}

/// Sessions ended at chosen moments from a thread of its own: ``start(after:)`` returns at once;
/// ``ended`` says how many sessions the terminations ended, once ``isDone``.
///
/// `@unchecked Sendable`: `state` is a mutex; the rest is fixed at init.
final class ScheduledTermination: @unchecked Sendable {
    private let terminator: BackendTerminator
    private let applicationName: String
    /// Done until ``start(after:)``: a termination never started is done.
    private let state = Mutex<(done: Bool, ended: Int, failure: String?)>((true, 0, nil))

    init(_ terminator: BackendTerminator, applicationName: String) {
        self.terminator = terminator
        self.applicationName = applicationName
    }

    /// Ends the sessions once after each delay, counted from now.
    func start(after delays: [Duration]) {
        let start = ContinuousClock.now
        state.withLock { $0.done = false }
        Thread { [self] in
            for delay in delays {
                let wait = (start + delay) - ContinuousClock.now
                if wait > .zero { Thread.sleep(forTimeInterval: wait / .seconds(1)) }
                do {
                    let ended = try terminator.terminate(applicationName: applicationName)
                    state.withLock { $0.ended += ended }
                } catch {
                    state.withLock { $0.failure = "\(error)" }
                }
            }
            state.withLock { $0.done = true }
        }.start()
    }

    var isDone: Bool { state.withLock { $0.done } }
    var ended: Int { state.withLock { $0.ended } }
    var failure: String? { state.withLock { $0.failure } }

    /// Waits (suspending) until the terminations are done.
    func finish() async {
        while !isDone { try? await Task.sleep(for: .milliseconds(5)) }
    }
}
