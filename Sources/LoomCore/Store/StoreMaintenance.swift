public import Foundation

/// What the `loom` tool's `dump`, `load` and `verify` need of a store besides its objects: the
/// saved metadata and key allocator, the store's own check of its storage, and a bulk load into
/// a new store. The tool reaches a store that conforms only through this and ``PersistentStore``,
/// so every verb works on every store that implements it (SQLite and PostgreSQL).
///
/// Isolation: every method may be called from any thread, as ``PersistentStore``'s; each blocks
/// the calling thread while the store works.
@_spi(LoomStore) public protocol StoreMaintenance: PersistentStore {
    /// The schema record, metadata and key allocator saved in the store, read in one snapshot.
    ///
    /// - Throws: `LoomError` when the store cannot be read.
    func maintenanceState() throws(LoomError) -> StoreMaintenanceState

    /// The store's check of its own storage, below Loom's objects: SQLite's `integrity_check`
    /// (or `quick_check` when `quick`) and `foreign_key_check`; on a server, the tables the schema
    /// needs, and constraints and indexes the server no longer holds valid. At most `limit`
    /// problems of each check are returned. Changes nothing.
    ///
    /// - Throws: `LoomError` when the store cannot be read at all (damage it can name is
    ///   returned, not thrown).
    func checkIntegrity(quick: Bool, limit: Int) throws(LoomError) -> [StoreIntegrityProblem]

    /// Writes rows as they are, keys and versions included, in one write transaction that
    /// records no history, and gives the store `identifier` and `metadata` (the store is new: it
    /// holds no objects). `body` writes through the writer it is given; when it throws, nothing
    /// is kept. The new identifier takes effect when the store is opened again.
    ///
    /// - Throws: `LoomError` when the store holds objects (``LoomError/Code/invalidRequest``) or
    ///   cannot be written; what `body` throws.
    func bulkLoad<T>(as identifier: UUID, metadata: [String: String], _ body: (any StoreBulkWriter) throws -> T) throws -> T
}

/// What ``StoreMaintenance/maintenanceState()`` reads: the saved schema, the metadata and the key
/// allocator. A value: use it anywhere.
@_spi(LoomStore) public struct StoreMaintenanceState: Sendable {
    /// The schema the store was saved with.
    public var schemaRecord: SchemaRecord
    /// Every metadata key but the schema (`storeIdentifier`, `versionHash`, the application's).
    public var metadata: [String: String]
    /// The key allocator: the next key of each entity that has one.
    public var nextKeys: [String: Int64]

    public init(schemaRecord: SchemaRecord, metadata: [String: String], nextKeys: [String: Int64]) {
        self.schemaRecord = schemaRecord
        self.metadata = metadata
        self.nextKeys = nextKeys
    }
}

/// One problem ``StoreMaintenance/checkIntegrity(quick:limit:)`` found. A value.
@_spi(LoomStore) public struct StoreIntegrityProblem: Sendable, Hashable {
    /// Which check found it.
    public enum Kind: Sendable, Hashable {
        /// The storage itself: pages and indexes (SQLite), missing tables, invalid constraints
        /// or indexes (a server).
        case storage
        /// A row refers to a missing row through a foreign key the store declares.
        case foreignKey
    }

    public var kind: Kind
    /// The table concerned, when the check names one.
    public var table: String?
    /// The key of the row concerned, when the check names one.
    public var key: Int64?
    /// What is wrong, as a sentence naming the check.
    public var message: String

    public init(kind: Kind, table: String? = nil, key: Int64? = nil, message: String) {
        self.kind = kind
        self.table = table
        self.key = key
        self.message = message
    }
}

/// Writes rows into a store inside ``StoreMaintenance/bulkLoad(as:metadata:_:)``'s transaction. Used from
/// the thread that called `bulkLoad`, only while `body` runs.
@_spi(LoomStore) public protocol StoreBulkWriter: AnyObject {
    /// Inserts one object's row as it is. `textBytes` are text values given by their bytes, which
    /// need not be valid UTF-8 (a `StoredValue` cannot hold those); they replace `values` at their
    /// slots. A store that keeps only valid text refuses the others.
    ///
    /// - Throws: `LoomError` when the row cannot be stored (a key already loaded, a broken
    ///   constraint, a value the store cannot keep).
    func insert(_ entity: EntityDescription, key: Int64, version: Int64, values: [StoredValue], textBytes: [(slot: Int, bytes: Data)]) throws(LoomError)

    /// Inserts one row of a many-to-many join table.
    ///
    /// - Throws: `LoomError` when the row cannot be stored (it is there already).
    func link(_ table: JoinTable, source: Int64, target: Int64) throws(LoomError)

    /// A row whose stored reference (a to-one's foreign key, a join row's target) names an object
    /// that was not loaded, or `nil`. Only the side that stores the relationship is checked.
    ///
    /// - Throws: `LoomError` when the store cannot be read.
    func firstDanglingReference(of relationship: ResolvedRelationship) throws(LoomError) -> (owner: Int64, target: Int64)?

    /// The highest key loaded for `entity`, `nil` when none was.
    ///
    /// - Throws: `LoomError` when the store cannot be read.
    func highestKey(of entity: EntityDescription) throws(LoomError) -> Int64?

    /// Sets the key allocator's next key for `entity`.
    ///
    /// - Throws: `LoomError` when the store cannot be written.
    func setNextKey(_ next: Int64, for entity: EntityDescription) throws(LoomError)
}
