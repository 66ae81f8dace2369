/// The results of a batched fetch: every matching object's key is recorded when the fetch
/// runs, and objects are loaded a batch at a time as the collection is read (SwiftData's
/// `FetchResultsCollection`, Core Data's `fetchBatchSize`).
///
/// ```swift
/// let books = try context.fetch(FetchRequest<Book>(sortBy: [SortDescriptor(\.title)]), batchSize: 100)
/// for book in books { total += book.pages }   // one query per 100 books
/// let book = books[4321]                      // loads only the batch holding it
/// ```
///
/// Reading an element whose batch is not loaded loads the whole batch with one query; its
/// objects come back loaded (not faults), and the collection holds only that batch, so memory
/// stays flat when the caller does not keep the objects (the context does not keep clean
/// objects alive). Objects already registered in the context — an unsaved insert, an object with
/// changes — come back as the registered instances, untouched. If a batch cannot be read, its
/// objects come back as faults, which load (or report the error) as any fault does, and the
/// context notes the error (``ManagedObjectContext/pendingStoreError``) for its next save.
///
/// The collection belongs to its context: read it on the context's isolation only (it is
/// not `Sendable`, and with concurrency debugging on, reading it elsewhere traps).
///
/// - Complexity: O(1) to read an element of the loaded batch; one query, O(batch size), to
///   load another batch.
public struct FetchResultsCollection<Model: PersistentModel>: RandomAccessCollection {
    let storage: FetchResultsStorage

    init(storage: FetchResultsStorage) { self.storage = storage }

    public var startIndex: Int { 0 }
    public var endIndex: Int { storage.keys.count }

    /// How many objects each query loads.
    public var batchSize: Int { storage.batchSize }

    /// The object at `position`, loading its batch first when needed.
    public subscript(position: Int) -> Model {
        if position < 0 || position >= storage.keys.count { fatalError("Index \(position) is out of range for a FetchResultsCollection of \(storage.keys.count) objects.") }
        return storage.object(at: position) as! Model
    }

    /// The IDs of the objects, in order, without loading any.
    public var objectIDs: [ObjectID<Model>] {
        let store = storage.context.coordinator.storeIdentifier
        return storage.keys.indices.map { i in
            ObjectID(unchecked: AnyObjectID(storeIdentifier: store, entityName: storage.entity(at: i).name, primaryKey: storage.keys[i]))
        }
    }
}

@available(*, unavailable, message: "A FetchResultsCollection belongs to its context; pass objectIDs to another isolation instead.")
extension FetchResultsCollection: Sendable {}

/// The keys of a batched fetch and the batch loaded now. Not `Sendable`: used on its
/// context's isolation only.
final class FetchResultsStorage {
    let context: ManagedObjectContext
    /// The entity of every object, or, across a hierarchy, the entities `places` index.
    let entities: [EntityDescription]
    let keys: [Int64]
    /// The entity of each key, by index in `entities`; empty when there is one entity.
    let places: [Int]
    let batchSize: Int
    /// Relationships to prefetch for each batch, by index in the (one) entity.
    let prefetched: [Int]
    private var loadedBatch = -1
    private var batch: [any BackedObject] = []

    init(context: ManagedObjectContext, entity: EntityDescription, keys: [Int64], batchSize: Int, prefetched: [Int]) {
        self.context = context
        self.entities = [entity]
        self.keys = keys
        self.places = []
        self.batchSize = batchSize
        self.prefetched = prefetched
    }

    /// A batched fetch across a hierarchy: each key's entity is `entities[places[i]]`. No
    /// relationship is prefetched (a schema refuses relationships in a hierarchy).
    init(context: ManagedObjectContext, entities: [EntityDescription], keys: [Int64], places: [Int], batchSize: Int) {
        self.context = context
        self.entities = entities
        self.keys = keys
        self.places = places
        self.batchSize = batchSize
        self.prefetched = []
    }

    /// The entity of the object at `position`.
    func entity(at position: Int) -> EntityDescription { places.isEmpty ? entities[0] : entities[places[position]] }

    func object(at position: Int) -> any BackedObject {
        ConcurrencyDebugging.check(context, "FetchResultsCollection.subscript")
        let number = position / batchSize
        if number != loadedBatch { load(number) }
        return batch[position - number * batchSize]
    }

    /// Replaces the loaded batch with batch `number`: registered, loaded objects as they are,
    /// the others read in one query.
    private func load(_ number: Int) {
        batch = []   // let the previous batch go before reading the next
        loadedBatch = -1
        let start = number * batchSize
        let positions = start..<min(start + batchSize, keys.count)
        var missing: [[Int64]] = Array(repeating: [], count: entities.count)
        for i in positions {
            if let backing = context.registeredBacking(of: entity(at: i), key: keys[i]), backing.state == .loaded { continue }
            missing[places.isEmpty ? 0 : places[i]].append(keys[i])
        }
        var rows: [[Int64: StoreRow]] = Array(repeating: [:], count: entities.count)
        for (place, wanted) in missing.enumerated() where !wanted.isEmpty {
            do {
                for row in try context.rowSource.baseRows(of: entities[place], keys: wanted) { rows[place][row.key] = row }
            } catch {
                // The batch comes back as faults; the context reports the error at its next
                // save (see `ManagedObjectContext.pendingStoreError`).
                context.recordReadFailure(error)
            }
        }
        var objects: [any BackedObject] = []
        objects.reserveCapacity(positions.count)
        for i in positions {
            let owner = entity(at: i), key = keys[i]
            if let row = rows[places.isEmpty ? 0 : places[i]][key] {
                objects.append(context.materialize(row, of: owner, as: .loaded))
            } else {
                // Registered and loaded, or gone from the store: the registered object, or a
                // fault that finds its row gone (or the error) when used, as any fault does.
                objects.append(context.object(of: owner, key: key))
            }
        }
        if !prefetched.isEmpty {
            do { try ObjectMaterializer.prefetch(prefetched, of: entities[0], for: objects, in: context) } catch { context.recordReadFailure(error) }
        }
        batch = objects
        loadedBatch = number
    }
}
