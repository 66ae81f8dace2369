import Foundation
public import Logging

/// Where Loom logs, and how much of the SQL it runs it logs: Loom's
/// `-com.apple.CoreData.SQLDebug`.
///
/// Loom logs through swift-log's `Logger`, so its messages go wherever the application's
/// `LoggingSystem` sends them. Replace ``logger`` to give Loom a logger of your own (a label,
/// metadata, a level):
///
/// ```swift
/// LoomLogging.logger = Logger(label: "com.example.app.loom")
/// LoomLogging.sqlDebugLevel = 2   // or LOOM_SQL_DEBUG=2 in the environment
/// ```
///
/// SQL logging is off unless ``sqlDebugLevel`` is above 0; `LOOM_SQL_DEBUG=1…3` in the
/// environment sets it without code, as Core Data's launch argument does:
/// - **1**: every statement a store runs, as the store runs it;
/// - **2**: also the types of its bound parameters and how long it took;
/// - **3**: also how many rows it returned, and the query plan of a statement slower than
///   ``slowStatementThreshold``.
///
/// Parameter *values* are never logged unless ``logsSQLValues`` is on (or
/// `LOOM_SQL_DEBUG_VALUES=1`): they can be personal data. The SQLite store then logs the
/// statement with its values in place; the PostgreSQL store logs types only (postgres-nio keeps
/// bound values protected).
///
/// A store reads these settings when it opens: change them before opening the container.
/// When SQL logging is off, a store installs nothing, and a save or a fetch does no logging
/// work at all.
///
/// Isolation: none; every property can be read and set from any thread.
public enum LoomLogging {
    private struct Settings {
        var logger = Logger(label: "loom")
        var sqlDebugLevel = LoomLogging.environmentLevel
        var logsSQLValues = ProcessInfo.processInfo.environment["LOOM_SQL_DEBUG_VALUES"] == "1"
        var slowStatementThreshold = Duration.milliseconds(20)
    }

    private static let settings = Locked(Settings())

    /// `LOOM_SQL_DEBUG`, clamped to 0…3 (anything else that is set, such as `yes`, is 1).
    private static var environmentLevel: Int {
        guard let value = ProcessInfo.processInfo.environment["LOOM_SQL_DEBUG"], !value.isEmpty else { return 0 }
        guard let level = Int(value) else { return value == "0" || value.lowercased() == "no" ? 0 : 1 }
        return min(max(level, 0), 3)
    }

    /// The logger Loom writes to: by default `Logger(label: "loom")`, which uses the handler
    /// the application bootstrapped (`LoggingSystem.bootstrap`), or swift-log's default.
    public static var logger: Logger {
        get { settings.withLock { $0.logger } }
        set { settings.withLock { $0.logger = newValue } }
    }

    /// How much SQL the stores log, from 0 (nothing, the default) to 3; see ``LoomLogging``.
    /// Initially `LOOM_SQL_DEBUG` from the environment.
    public static var sqlDebugLevel: Int {
        get { settings.withLock { $0.sqlDebugLevel } }
        set { settings.withLock { $0.sqlDebugLevel = min(max(newValue, 0), 3) } }
    }

    /// Whether SQL logging shows the values bound to parameters (off by default: they can be
    /// personal data). Initially `LOOM_SQL_DEBUG_VALUES=1` from the environment.
    public static var logsSQLValues: Bool {
        get { settings.withLock { $0.logsSQLValues } }
        set { settings.withLock { $0.logsSQLValues = newValue } }
    }

    /// How long a statement runs before level 3 logs its query plan (20 ms by default).
    public static var slowStatementThreshold: Duration {
        get { settings.withLock { $0.slowStatementThreshold } }
        set { settings.withLock { $0.slowStatementThreshold = newValue } }
    }

    /// What a store opening now should log of its SQL, or `nil` when SQL logging is off.
    @_spi(LoomStore) public static func sqlLog(store: String) -> SQLStatementLog? {
        settings.withLock { settings in
            guard settings.sqlDebugLevel > 0 else { return nil }
            var logger = settings.logger
            logger[metadataKey: "loom.store"] = .string(store)
            return SQLStatementLog(
                logger: logger, level: settings.sqlDebugLevel, logsValues: settings.logsSQLValues,
                slowThreshold: settings.slowStatementThreshold)
        }
    }
}

/// One store's SQL logging, fixed when the store opened: a store holds one only while
/// ``LoomLogging/sqlDebugLevel`` is above 0, so that with logging off it costs nothing.
///
/// Messages are logged at `.info`: turning SQL logging on is the request to see them.
@_spi(LoomStore) public struct SQLStatementLog: Sendable {
    public let logger: Logger
    /// 1…3, as ``LoomLogging/sqlDebugLevel``.
    public let level: Int
    public let logsValues: Bool
    public let slowThreshold: Duration

    public init(logger: Logger, level: Int, logsValues: Bool, slowThreshold: Duration) {
        self.logger = logger
        self.level = level
        self.logsValues = logsValues
        self.slowThreshold = slowThreshold
    }

    /// Whether level 3 wants the query plan of a statement that took `duration`.
    public func wantsPlan(after duration: Duration) -> Bool {
        level >= 3 && duration >= slowThreshold
    }

    /// Logs one statement that ran: its SQL (with values in place when `sqlWithValues` is given
    /// and values may be logged), and from level 2 its parameters' types and duration, from
    /// level 3 its row count and, when given, its plan.
    public func statement(
        _ sql: String, sqlWithValues: String? = nil, parameterTypes: [String], duration: Duration, rows: Int?, plan: String? = nil
    ) {
        var message = logsValues ? (sqlWithValues ?? sql) : sql
        if level >= 2 {
            if !parameterTypes.isEmpty { message += "\n  parameters: \(parameterTypes.joined(separator: ", "))" }
            message += "\n  time: \(Self.milliseconds(duration)) ms"
        }
        if level >= 3 {
            if let rows { message += ", rows: \(rows)" }
            if let plan { message += "\n  plan (slower than \(Self.milliseconds(slowThreshold)) ms):\n" + plan }
        }
        logger.info("\(message)", source: "loom.sql")
    }

    private static func milliseconds(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        let value = Double(seconds) * 1_000 + Double(attoseconds) / 1e15
        return String(format: "%.3f", value)
    }
}
