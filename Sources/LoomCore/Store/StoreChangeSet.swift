/// Everything one save writes, applied by a store in one transaction.
@_spi(LoomStore) public struct StoreChangeSet: Sendable {
    /// A new row: every value, in the entity's slot order.
    public struct Insert: Sendable {
        public var entity: EntityDescription
        public var key: Int64
        public var values: [StoredValue]

        public init(entity: EntityDescription, key: Int64, values: [StoredValue]) {
            self.entity = entity
            self.key = key
            self.values = values
        }
    }
    /// Changed values of an existing row, applied only if its version is still `expectedVersion`.
    public struct Update: Sendable {
        public var entity: EntityDescription
        public var key: Int64
        /// The version the saver read; the store refuses the update if it changed.
        public var expectedVersion: Int64
        /// The changed attributes, by position, with their new values.
        public var changes: [(index: Int, value: StoredValue)]

        public init(entity: EntityDescription, key: Int64, expectedVersion: Int64, changes: [(index: Int, value: StoredValue)]) {
            self.entity = entity
            self.key = key
            self.expectedVersion = expectedVersion
            self.changes = changes
        }
    }
    /// A row to delete, only if its version is still `expectedVersion`.
    public struct Delete: Sendable {
        public var entity: EntityDescription
        public var key: Int64
        public var expectedVersion: Int64
        /// The values of the attributes marked `.preserveValueOnDeletion`, by attribute index,
        /// for the history's tombstone.
        public var tombstone: [(index: Int, value: StoredValue)]

        public init(entity: EntityDescription, key: Int64, expectedVersion: Int64, tombstone: [(index: Int, value: StoredValue)] = []) {
            self.entity = entity
            self.key = key
            self.expectedVersion = expectedVersion
            self.tombstone = tombstone
        }
    }

    /// One row of a join table (a many-to-many pair).
    public struct LinkChange: Sendable, Hashable {
        public var table: JoinTable
        /// The key in ``JoinTable/sourceColumn``.
        public var source: Int64
        /// The key in ``JoinTable/targetColumn``.
        public var target: Int64

        public init(table: JoinTable, source: Int64, target: Int64) {
            self.table = table
            self.source = source
            self.target = target
        }
    }

    public var inserts: [Insert] = []
    public var updates: [Update] = []
    public var deletes: [Delete] = []
    /// Join-table rows to add; adding one that exists is not an error.
    public var linkInserts: [LinkChange] = []
    /// Join-table rows to remove; removing one that does not exist is not an error.
    public var linkDeletes: [LinkChange] = []
    /// Objects whose to-many relationships gained or lost objects through keys stored on the
    /// other side (a to-one's foreign key this save writes): no row of theirs changes, but the
    /// store's history records them as updated, with these relationships' names, so that a
    /// coordinator merging the history forgets the lists it loaded.
    public var relationshipOwners: [(entity: EntityDescription, key: Int64, relationships: [String])] = []
    /// Who saved it, for the store's history: the context's ``ManagedObjectContext/transactionAuthor``
    /// and name.
    public var author: String?
    public var contextName: String?
    /// Whether every delete's expected version was read inside the write transaction this set
    /// is applied in (a batch request's reads): no other writer can have changed those rows
    /// since, so a store may delete them by key alone, many to a statement, and check only how
    /// many went. Updates keep their version checks.
    public var versionsReadInTransaction = false
    /// Whether this change set continues the history transaction of the change set applied
    /// just before it in the same write transaction (a batch request's later chunks): a store
    /// that keeps history records both as one transaction
    /// (``HistoryChangeGroup/merging(_:_:)``). When the change set before it recorded nothing in
    /// this write transaction, it is recorded on its own.
    public var continuesHistoryTransaction = false

    public init() {}

    public var isEmpty: Bool { inserts.isEmpty && updates.isEmpty && deletes.isEmpty && linkInserts.isEmpty && linkDeletes.isEmpty }
}
