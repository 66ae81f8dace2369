public import Foundation

/// The identity of a stored object, without its type: which store, which entity, which row.
///
/// IDs are permanent from the moment an object is inserted (the coordinator hands out primary
/// keys in blocks), `Sendable`, `Hashable` and `Codable`: pass them between contexts, tasks and
/// processes, never the objects themselves.
public struct AnyObjectID: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The identifier of the store that holds (or will hold) the object.
    public let storeIdentifier: UUID
    /// The entity's name.
    public let entityName: String
    /// The object's primary key in its entity's table: never reused, but not a count of the
    /// objects inserted. Keys come from blocks reserved ahead, so they can skip values (a block
    /// reserved ahead and one reserved on demand that cross leave one unused) and need not
    /// follow the order of inserts; find objects by an attribute of your own, not by a key
    /// guessed from their number.
    public let primaryKey: Int64

    /// Creates an ID from its parts. Resolve it with a context; a wrong part is reported then.
    public init(storeIdentifier: UUID, entityName: String, primaryKey: Int64) {
        self.storeIdentifier = storeIdentifier
        self.entityName = entityName
        self.primaryKey = primaryKey
    }

    /// Hashes the key and the length of the entity's name: IDs in one set or dictionary nearly
    /// always share their store, and mostly their entity, so hashing the UUID and the name's
    /// characters would cost a pass over 16 bytes and the name per hash and separate little
    /// (objects of two entities with the same key and a name as long share a bucket chain).
    /// Equality still compares all three.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(primaryKey)
        hasher.combine(entityName.utf8.count)
    }

    /// `loom://<store-uuid>/<Entity>/<key>`: an archivable form that
    /// ``PersistentStoreCoordinator/objectID(forURIRepresentation:)`` turns back into an ID.
    public var uriRepresentation: URL {
        var components = URLComponents()
        components.scheme = "loom"
        components.host = storeIdentifier.uuidString
        components.path = "/\(entityName)/\(primaryKey)"
        return components.url!
    }

    /// Parses a URI made by ``uriRepresentation``; throws ``LoomError/Code/malformedURI``
    /// naming the part that is wrong.
    public init(uriRepresentation uri: URL) throws(LoomError) {
        let text = uri.absoluteString
        guard uri.scheme == "loom" else {
            throw LoomError(.malformedURI, "'\(text)' is not a Loom object URI: the scheme must be loom://")
        }
        guard let host = uri.host, let store = UUID(uuidString: host) else {
            throw LoomError(.malformedURI, "'\(text)' is not a Loom object URI: the host must be the store's UUID")
        }
        let parts = uri.path.split(separator: "/", omittingEmptySubsequences: true)
        guard parts.count == 2 else {
            throw LoomError(.malformedURI, "'\(text)' is not a Loom object URI: the path must be /<Entity>/<key>")
        }
        guard let key = Int64(parts[1]), key > 0 else {
            throw LoomError(.malformedURI, "'\(text)' is not a Loom object URI: '\(parts[1])' is not a primary key")
        }
        self.init(storeIdentifier: store, entityName: String(parts[0]).removingPercentEncoding ?? String(parts[0]), primaryKey: key)
    }

    public var description: String { "\(entityName)/\(primaryKey)" }
}

/// The identity of a stored object of model type `Model`.
///
/// ```swift
/// let id: ObjectID<Book> = try await container.performBackgroundTask { context in
///     let book = Book(context: context)
///     book.title = "Threads"
///     try context.save()
///     return book.objectID
/// }
/// let book = try container.viewContext.existingObject(with: id)
/// ```
public struct ObjectID<Model: PersistentModel>: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The same ID without its type.
    public let erased: AnyObjectID

    /// Types an erased ID; `nil` when it names another entity than `Model`'s or one of its
    /// sub-entities' (an ID keeps its object's own entity: a `BusinessTrip` fetched as a `Trip`).
    public init?(_ erased: AnyObjectID) {
        guard Model.entity.isKind(named: erased.entityName) else { return nil }
        self.erased = erased
    }

    init(unchecked erased: AnyObjectID) { self.erased = erased }

    /// See ``AnyObjectID/uriRepresentation``.
    public var uriRepresentation: URL { erased.uriRepresentation }
    public var primaryKey: Int64 { erased.primaryKey }
    public var description: String { erased.description }

    public init(from decoder: any Decoder) throws {
        let erased = try AnyObjectID(from: decoder)
        guard Model.entity.isKind(named: erased.entityName) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "the ID names entity \(erased.entityName), not \(Model.entity.name)"))
        }
        self.erased = erased
    }

    public func encode(to encoder: any Encoder) throws { try erased.encode(to: encoder) }
}
