/// An error thrown by Loom: a code you can match, a message that says what happened and how to
/// fix it, and where it happened.
///
/// ```swift
/// do { try context.save() }
/// catch let error as LoomError where error.code == .uniquenessViolation {
///     print(error.entityName, error.attributeNames)   // "Book", ["isbn"]
/// }
/// ```
/// A code also matches the error itself, as Foundation's `CocoaError` codes do:
/// `catch LoomError.Code.versionConflict { }`, or `catch LoomError.uniquenessViolation { }` for
/// the codes most often caught. A store's own code matches the same way
/// (`catch StoreErrorCode.sqliteFull { }`: see ``StoreErrorCode``).
///
/// Attribute *values* are never put into messages: they can be personal data.
public struct LoomError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is. Extensible: new codes may be added.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The file exists but is not a SQLite database.
        public static let notADatabase = Code(rawValue: "notADatabase")
        /// The file is a SQLite database that Loom did not create.
        public static let notALoomStore = Code(rawValue: "notALoomStore")
        /// The store's saved schema differs from the model it is opened with.
        public static let schemaMismatch = Code(rawValue: "schemaMismatch")
        /// A store made with an older model could not be migrated to the one it is opened with:
        /// the change cannot be inferred, or the saved data does not fit the new model. The
        /// message names the entity, the attribute and why; nothing in the store was changed.
        public static let migrationFailed = Code(rawValue: "migrationFailed")
        /// A store was saved with a model that is none of the versions of the migration plan it
        /// is opened with. The message names the nearest version and every difference from it;
        /// nothing in the store was changed.
        public static let unknownSchemaVersion = Code(rawValue: "unknownSchemaVersion")
        /// A ``SchemaMigrationPlan`` is malformed: its stages skip or repeat a version, do not end
        /// at the current one, or two versions have the same model. Found before the store is
        /// touched.
        public static let invalidMigrationPlan = Code(rawValue: "invalidMigrationPlan")
        /// A history token names transactions that were deleted (``ManagedObjectContext/deleteHistory(through:)``):
        /// the changes after it can no longer be read. The message names the oldest one kept and
        /// how to recover.
        public static let historyTokenExpired = Code(rawValue: "historyTokenExpired")
        /// A history token names a transaction past the store's last one: the store was
        /// restored from an older copy (a backup), or the token was read from another copy. The
        /// message names the store's last transaction; refresh, re-sync, and start again from
        /// ``ManagedObjectContext/currentHistoryToken()``.
        public static let historyTokenAhead = Code(rawValue: "historyTokenAhead")
        /// A history token names a transaction number that the store gave to another
        /// transaction (the fingerprints differ): the store was restored from an older copy and
        /// has committed since. Refresh, re-sync, and start again from
        /// ``ManagedObjectContext/currentHistoryToken()``.
        public static let historyTokenMismatch = Code(rawValue: "historyTokenMismatch")
        /// A history token belongs to another store (or one that was replaced).
        public static let historyTokenForeignStore = Code(rawValue: "historyTokenForeignStore")
        /// A context cannot be pinned to this query generation: its store cannot keep one (a
        /// store without snapshots), the context is a child (it reads through its parent), the
        /// token belongs to another store, or the generation was released.
        public static let queryGenerationUnavailable = Code(rawValue: "queryGenerationUnavailable")
        /// The model itself is invalid (duplicate names, unknown attributes in a constraint…).
        public static let invalidModel = Code(rawValue: "invalidModel")
        /// An object of an abstract entity was inserted: only its sub-entities can have objects.
        public static let abstractEntity = Code(rawValue: "abstractEntity")
        /// An attribute's Swift type cannot be stored.
        public static let unsupportedType = Code(rawValue: "unsupportedType")
        /// A value does not have the type its attribute expects.
        public static let typeMismatch = Code(rawValue: "typeMismatch")
        /// A value of its attribute's type that the store cannot hold as it is: a NaN in a
        /// `Double` or `Float` attribute on a SQLite store (SQLite stores NaN as NULL, which
        /// would lose it). The message names the entity, the attribute and the object;
        /// nothing was written.
        public static let unsupportedValue = Code(rawValue: "unsupportedValue")
        /// A non-optional attribute has no value at save.
        public static let missingRequiredValue = Code(rawValue: "missingRequiredValue")
        /// Two objects would have the same values for a uniqueness constraint.
        public static let uniquenessViolation = Code(rawValue: "uniquenessViolation")
        /// The entity named is not in the model.
        public static let unknownEntity = Code(rawValue: "unknownEntity")
        /// No object with this ID exists in the store.
        public static let objectNotFound = Code(rawValue: "objectNotFound")
        /// The ID belongs to an object that has not been saved, in another context.
        public static let objectNotSavedYet = Code(rawValue: "objectNotSavedYet")
        /// The ID belongs to another store.
        public static let foreignObjectID = Code(rawValue: "foreignObjectID")
        /// A URI is not a Loom object URI.
        public static let malformedURI = Code(rawValue: "malformedURI")
        /// A predicate uses a construct Loom cannot translate.
        public static let unsupportedPredicate = Code(rawValue: "unsupportedPredicate")
        /// A fetch request is malformed (a negative limit or offset…).
        public static let invalidRequest = Code(rawValue: "invalidRequest")
        /// A sort descriptor Loom cannot translate.
        public static let unsupportedSort = Code(rawValue: "unsupportedSort")
        /// A stored row changed underneath (optimistic locking).
        public static let versionConflict = Code(rawValue: "versionConflict")
        /// An integer result does not fit in 64 bits (SQLite's "integer overflow", raised by `SUM`).
        public static let integerOverflow = Code(rawValue: "integerOverflow")
        /// A stored value is not of its attribute's type (corrupt or foreign data).
        public static let corruptValue = Code(rawValue: "corruptValue")
        /// The store could not be read or written.
        public static let storeFailure = Code(rawValue: "storeFailure")
        /// The object does not belong to this context.
        public static let wrongContext = Code(rawValue: "wrongContext")
        /// The container or store was closed.
        public static let closed = Code(rawValue: "closed")
        /// A deleted object still holds objects in a relationship whose delete rule is deny.
        public static let deleteDenied = Code(rawValue: "deleteDenied")
        /// The connection to a database server was lost after the commit was sent and before the
        /// server answered: the save may have been committed, or not. The context keeps its
        /// changes; fetch what it saved to learn which before saving again.
        public static let commitOutcomeUnknown = Code(rawValue: "commitOutcomeUnknown")
    }

    /// What kind of failure this is; match on it.
    public var code: Code
    /// What happened and how to fix it.
    public var message: String
    /// The entity concerned, if any.
    public var entityName: String?
    /// The attributes concerned, if any.
    public var attributeNames: [String]
    /// The object concerned, if any.
    public var objectID: AnyObjectID?
    /// The file concerned, if any.
    public var path: String?
    /// What caused this error, if another error did: the error itself, so that you can cast it
    /// back to its type (the SQLite store's cause is GRDB's `DatabaseError`).
    public var underlying: (any Error & Sendable)?
    /// The store's own result code for a failure the store reported (for the SQLite store,
    /// SQLite's primary and extended result codes); `nil` when the store did not fail.
    ///
    /// ```swift
    /// catch StoreErrorCode.sqliteConstraint { }   // any constraint SQLite refused
    /// ```
    public var storeCode: StoreErrorCode?
    /// For a save that failed on conflicts: every conflict found.
    public var conflicts: [MergeConflict] = []
    /// For a change set a store refused (version or uniqueness conflicts): what the store held,
    /// read inside the failed write. Merge policies resolve from these without reading again.
    @_spi(LoomStore) public var storeConflicts: [StoreConflict] = []

    /// Creates an error. Stores and tools built on Loom's SPI throw these too.
    public init(
        _ code: Code, _ message: String, entity: String? = nil, attributes: [String] = [],
        objectID: AnyObjectID? = nil, path: String? = nil, underlying: (any Error)? = nil,
        storeCode: StoreErrorCode? = nil
    ) {
        self.code = code
        self.message = message
        self.entityName = entity
        self.attributeNames = attributes
        self.objectID = objectID
        self.path = path
        // Every `Error` is `Sendable` in Swift 6: the cause is kept as it is.
        self.underlying = underlying
        self.storeCode = storeCode
    }

    public var description: String {
        var text = "LoomError.\(code): \(message)"
        if let storeCode { text += " [store code \(storeCode)]" }
        if let underlying { text += " (underlying: \(underlying))" }
        return text
    }
}

extension LoomError.Code {
    /// Lets `catch LoomError.Code.versionConflict { }` (or `catch LoomError.uniquenessViolation { }`)
    /// match a ``LoomError`` by its code.
    public static func ~= (code: LoomError.Code, error: any Error) -> Bool {
        (error as? LoomError)?.code == code
    }
}

extension LoomError {
    /// Shorthands for the codes most often caught: `catch LoomError.uniquenessViolation { }`.
    public static var uniquenessViolation: Code { .uniquenessViolation }
    public static var missingRequiredValue: Code { .missingRequiredValue }
    public static var objectNotFound: Code { .objectNotFound }
    public static var schemaMismatch: Code { .schemaMismatch }
    public static var deleteDenied: Code { .deleteDenied }
}
