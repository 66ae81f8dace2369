public import Foundation

/// One attribute and the value a batch request writes to it.
///
/// ```swift
/// BatchValue<Book>.set(\.price, to: 12)
/// ```
public struct BatchValue<Model: PersistentModel>: Sendable {
    let keyPath: any PartialKeyPath<Model> & Sendable
    let value: any Sendable
    /// The value as the store keeps it, when its type alone says so (a ``PersistentValue`` or an
    /// optional of one: the attribute's codec would give the same); else the codec encodes
    /// `value` when the request runs.
    let stored: StoredValue?
    /// The destination of a to-one relationship, for ``relate(_:to:)``.
    let related: RelatedKey?

    init(keyPath: any PartialKeyPath<Model> & Sendable, value: any Sendable, stored: StoredValue? = nil) {
        self.keyPath = keyPath
        self.value = value
        self.stored = stored
        self.related = nil
    }

    init(keyPath: any PartialKeyPath<Model> & Sendable, related: RelatedKey) {
        self.keyPath = keyPath
        self.value = related
        self.stored = nil
        self.related = related
    }

    /// Writes `value` to the attribute at `keyPath`.
    public static func set<Value: Sendable>(_ keyPath: any KeyPath<Model, Value> & Sendable, to value: Value) -> Self {
        BatchValue(keyPath: keyPath, value: value)
    }

    /// Writes `value` to the attribute at `keyPath`: a ``PersistentValue``, converted now.
    public static func set<Value: PersistentValue>(_ keyPath: any KeyPath<Model, Value> & Sendable, to value: Value) -> Self {
        BatchValue(keyPath: keyPath, value: value, stored: value.storedValue)
    }

    /// Writes `value` (or `nil`) to the optional attribute at `keyPath`, converted now.
    public static func set<Value: PersistentValue>(_ keyPath: any KeyPath<Model, Value?> & Sendable, to value: Value?) -> Self {
        BatchValue(keyPath: keyPath, value: value, stored: value?.storedValue ?? .null)
    }

    /// Relates the object to the one with ID `id` (or to none) through the to-one relationship
    /// at `keyPath`: the link an import makes by key (a book's `author` from its `authorID`
    /// field) without loading either object. The object must exist when the request runs.
    /// The inverse may be a to-one or an unordered to-many.
    public static func relate<Destination: PersistentModel>(_ keyPath: any KeyPath<Model, Destination?> & Sendable, to id: ObjectID<Destination>?) -> Self {
        BatchValue(keyPath: keyPath, related: RelatedKey(entityName: Destination.entity.name, key: id?.erased.primaryKey))
    }
}

/// The destination of a to-one relationship a batch request sets, by key.
struct RelatedKey: Sendable {
    let entityName: String
    let key: Int64?
}

/// Deletes every object of `Model` a predicate matches (or the objects a list of IDs names) in
/// the store, without making objects, applying the relationships' delete rules in the store:
/// cascade deletes the related objects too, nullify clears the relationship on the other side,
/// deny refuses the whole request while a related object would be left behind.
///
/// Run it with ``ManagedObjectContext/execute(_:)-(BatchDeleteRequest<Model>)``. Unlike Core
/// Data's `NSBatchDeleteRequest`, the contexts stay true: every context that merges
/// automatically reflects the deletion, and the context that ran it does at once.
public struct BatchDeleteRequest<Model: PersistentModel>: Sendable {
    /// The objects to delete; all of them when `nil`.
    public var predicate: Predicate<Model>?
    /// Whether the result lists the deleted objects' IDs or only counts them.
    public var resultType: BatchResultType = .objectIDs
    /// The objects named by ID, each with its own entity (a sub-entity's, for a parent's request).
    let objectIDs: [AnyObjectID]?

    /// Deletes the objects `predicate` matches (every object of `Model` when `nil`).
    public init(predicate: Predicate<Model>? = nil) {
        self.predicate = predicate
        self.objectIDs = nil
    }

    /// Deletes the objects with these IDs (those already gone are skipped). For an entity with
    /// sub-entities, the IDs may name objects of any of them.
    public init(objectIDs: [ObjectID<Model>]) {
        self.predicate = nil
        self.objectIDs = objectIDs.map(\.erased)
    }
}

/// Sets attributes of every object of `Model` a predicate matches, in the store, without making
/// objects. Each changed object's version advances (so a context holding an older copy
/// conflicts, as with any save) and the history records the changed attributes' names.
///
/// ```swift
/// try context.execute(BatchUpdateRequest<Book>(predicate: #Predicate { $0.price > 100 },
///                                              set: [.set(\.price, to: 100)]))
/// ```
/// Objects whose values already equal the new ones are left as they are (counted in
/// ``BatchResult/unchanged``).
public struct BatchUpdateRequest<Model: PersistentModel>: Sendable {
    /// The objects to change; all of them when `nil`.
    public var predicate: Predicate<Model>?
    /// The attributes to set and their values.
    public var values: [BatchValue<Model>]
    /// Whether the result lists the changed objects' IDs or only counts them.
    public var resultType: BatchResultType = .objectIDs

    public init(predicate: Predicate<Model>? = nil, set values: [BatchValue<Model>]) {
        self.predicate = predicate
        self.values = values
    }
}

/// Inserts rows of `Model` given as values, in the store, without making objects; with a
/// uniqueness constraint, a row whose constrained values match an existing object updates it,
/// is ignored, or fails the request (``Uniquing``).
///
/// ```swift
/// let rows = feed.map { [BatchValue<Package>.set(\.name, to: $0.name), .set(\.version, to: $0.version)] }
/// let result = try context.execute(BatchInsertRequest(rows: rows, uniquing: .update))
/// print(result.inserted.count, result.updated.count, result.unchanged)
/// ```
/// Attributes a new row leaves out take their default (or `nil`); an updated object keeps the
/// attributes the row leaves out. To-one relationships are set by ID with
/// ``BatchValue/relate(_:to:)``; to-many ones are not set by batch requests.
public struct BatchInsertRequest<Model: PersistentModel>: Sendable {
    /// What a row whose constrained values match an existing object (or an earlier row of the
    /// same request) does.
    public enum Uniquing: Sendable, Hashable {
        /// The request fails with ``LoomError/Code/uniquenessViolation``, naming the row.
        case fail
        /// The existing object takes the row's values.
        case update
        /// The row is skipped.
        case ignore
    }

    /// The rows to insert: each a list of attributes and their values.
    public var rows: [[BatchValue<Model>]]
    public var uniquing: Uniquing
    /// The attributes whose values identify an object: by default the entity's first
    /// uniqueness constraint (`#Unique`, or one `@Attribute(.unique)`).
    public var uniquingBy: [any PartialKeyPath<Model> & Sendable]?
    /// Whether the result lists the objects' IDs (each row's, and the inserted and updated
    /// ones) or only counts them.
    public var resultType: BatchResultType = .objectIDs
    /// How errors name the rows (an import's chunk names its sources' positions).
    var rowNaming = BatchRowNaming()

    public init(rows: [[BatchValue<Model>]], uniquing: Uniquing = .fail, uniquingBy: [any PartialKeyPath<Model> & Sendable]? = nil) {
        self.rows = rows
        self.uniquing = uniquing
        self.uniquingBy = uniquingBy
    }
}

/// What a batch request's result holds, as Core Data's `resultType` says.
public enum BatchResultType: Sendable, Hashable {
    /// The IDs of every object inserted, updated and deleted (and, for an insert, each row's
    /// object), with their counts. A request over a million objects holds a million IDs.
    case objectIDs
    /// Only the counts: the request holds no more than one chunk's IDs at a time, whatever
    /// its size.
    case counts
}

/// What a batch request changed: the IDs of the objects it inserted, updated and deleted
/// (deletions include those cascaded to, of any entity), and how many matched objects it left
/// as they were. With ``BatchResultType/counts``, the ID lists are empty and only the counts
/// are filled.
public struct BatchResult: Sendable, Equatable {
    /// For a batch insert, the object each row inserted, updated or matched, in row order: what
    /// a later request relates to by ID (``BatchValue/relate(_:to:)``).
    public internal(set) var objectIDs: [AnyObjectID] = []
    public internal(set) var inserted: [AnyObjectID] = []
    public internal(set) var updated: [AnyObjectID] = []
    public internal(set) var deleted: [AnyObjectID] = []
    public internal(set) var unchanged = 0
    /// How many objects the request inserted, updated and deleted (with either result type).
    public internal(set) var insertedCount = 0
    public internal(set) var updatedCount = 0
    public internal(set) var deletedCount = 0
    /// For a batch insert, what each row did, every row counted once (an import's progress).
    var rows = RowCounts()

    public init() {}
}

/// What the rows of a batch insert did, each row counted once: it inserted an object, or it
/// matched one (saved, or inserted by an earlier row) and changed a value of it, or it changed
/// nothing. The counts add up to the rows.
struct RowCounts: Sendable, Equatable {
    var inserted = 0
    var updated = 0
    var unchanged = 0

    /// A row that matched an object: updated if it changed a value of it.
    mutating func count(changed: Bool) {
        if changed { updated += 1 } else { unchanged += 1 }
    }
}
