/// A store's result code for a failure: for the SQLite store, SQLite's primary result code
/// (`SQLITE_CONSTRAINT` is 19, `SQLITE_READONLY` 8, `SQLITE_FULL` 13…) and its extended code
/// (`SQLITE_CONSTRAINT_UNIQUE` is 2067); for the PostgreSQL store, the server's SQLSTATE
/// (`23505` for a unique violation, `40P01` for a deadlock), with both numbers 0.
///
/// Match a failure by its named code, as a whole error or as a ``LoomError/storeCode``; a
/// primary SQLite code matches each of its extended codes:
///
/// ```swift
/// do { try context.save() }
/// catch StoreErrorCode.sqliteFull { }                      // any LoomError with that store code
/// catch let error as LoomError where StoreErrorCode.sqliteConstraint ~= error.storeCode { }
/// ```
public struct StoreErrorCode: Hashable, Sendable, CustomStringConvertible {
    /// The primary result code (the low 8 bits of the extended one, for SQLite).
    public var primary: Int32
    /// The extended result code; the same as `primary` when the store has no finer code.
    public var extended: Int32
    /// The SQLSTATE of a server that reports one (PostgreSQL); `nil` for SQLite.
    public var sqlState: String?

    public init(primary: Int32, extended: Int32) {
        self.primary = primary
        self.extended = extended
    }

    /// A SQLSTATE code (PostgreSQL's five characters).
    public init(sqlState: String) {
        self.primary = 0
        self.extended = 0
        self.sqlState = sqlState
    }

    public var description: String {
        if let sqlState { return "SQLSTATE \(sqlState)" }
        return primary == extended ? "\(primary)" : "\(primary)/\(extended)"
    }
}

extension StoreErrorCode {
    /// `SQLITE_BUSY`: another connection held a lock longer than the store waits.
    public static let sqliteBusy = StoreErrorCode(primary: 5, extended: 5)
    /// `SQLITE_READONLY`: the database cannot be written (a read-only file or connection).
    public static let sqliteReadOnly = StoreErrorCode(primary: 8, extended: 8)
    /// `SQLITE_READONLY_ROLLBACK`: a hot journal needs a rollback that a read-only connection
    /// cannot do.
    public static let sqliteReadOnlyRollback = StoreErrorCode(primary: 8, extended: 776)
    /// `SQLITE_CORRUPT`: the database file is damaged.
    public static let sqliteCorrupt = StoreErrorCode(primary: 11, extended: 11)
    /// `SQLITE_FULL`: the disk is full.
    public static let sqliteFull = StoreErrorCode(primary: 13, extended: 13)
    /// `SQLITE_CONSTRAINT`: any constraint failed (matches each of its extended codes).
    public static let sqliteConstraint = StoreErrorCode(primary: 19, extended: 19)
    /// `SQLITE_CONSTRAINT_NOTNULL`: a NOT NULL constraint failed.
    public static let sqliteConstraintNotNull = StoreErrorCode(primary: 19, extended: 1299)
    /// `SQLITE_CONSTRAINT_PRIMARYKEY`: a primary key is taken.
    public static let sqliteConstraintPrimaryKey = StoreErrorCode(primary: 19, extended: 1555)
    /// `SQLITE_CONSTRAINT_UNIQUE`: a uniqueness constraint failed.
    public static let sqliteConstraintUnique = StoreErrorCode(primary: 19, extended: 2067)
    /// `SQLITE_NOTADB`: the file is not a SQLite database.
    public static let sqliteNotADatabase = StoreErrorCode(primary: 26, extended: 26)

    /// PostgreSQL's `numeric_value_out_of_range` (SQLSTATE 22003): an integer result that does not
    /// fit in its type.
    public static let postgresNumericValueOutOfRange = StoreErrorCode(sqlState: "22003")
    /// PostgreSQL's `not_null_violation` (SQLSTATE 23502).
    public static let postgresNotNullViolation = StoreErrorCode(sqlState: "23502")
    /// PostgreSQL's `unique_violation` (SQLSTATE 23505).
    public static let postgresUniqueViolation = StoreErrorCode(sqlState: "23505")
    /// PostgreSQL's `deadlock_detected` (SQLSTATE 40P01).
    public static let postgresDeadlockDetected = StoreErrorCode(sqlState: "40P01")

    /// Whether `code` is this code, or one of its extended codes when this is a primary SQLite
    /// code (``primary`` equal to ``extended``).
    public func matches(_ code: StoreErrorCode) -> Bool {
        if let sqlState { return code.sqlState == sqlState }
        guard code.sqlState == nil, code.primary == primary else { return false }
        return extended == primary || extended == code.extended
    }

    /// Lets `case .sqliteConstraint:` match a store code by ``matches(_:)``; `nil` matches nothing.
    public static func ~= (pattern: StoreErrorCode, code: StoreErrorCode?) -> Bool {
        code.map(pattern.matches) ?? false
    }

    /// Lets `catch StoreErrorCode.sqliteConstraint { }` match a ``LoomError`` by its
    /// ``LoomError/storeCode``.
    public static func ~= (pattern: StoreErrorCode, error: any Error) -> Bool {
        pattern ~= (error as? LoomError)?.storeCode
    }
}
