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
        let name = storage.entity.name
        return storage.keys.map { ObjectID(unchecked: AnyObjectID(storeIdentifier: store, entityName: name, primaryKey: $0)) }
    }
}

@available(*, unavailable, message: "A FetchResultsCollection belongs to its context; pass objectIDs to another isolation instead.")
extension FetchResultsCollection: Sendable {}

/// The keys of a batched fetch and the batch loaded now. Not `Sendable`: used on its
/// context's isolation only.
final class FetchResultsStorage {
    let context: ManagedObjectContext
    let entity: EntityDescription
    let keys: [Int64]
    let batchSize: Int
    /// Relationships to prefetch for each batch, by index in `entity`.
    let prefetched: [Int]
    private var loadedBatch = -1
    private var batch: [any BackedObject] = []

    init(context: ManagedObjectContext, entity: EntityDescription, keys: [Int64], batchSize: Int, prefetched: [Int]) {
        self.context = context
        self.entity = entity
        self.keys = keys
        self.batchSize = batchSize
        self.prefetched = prefetched
    }

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
        let slice = keys[start..<min(start + batchSize, keys.count)]
        var missing: [Int64] = []
        for key in slice {
            if let backing = context.registeredBacking(of: entity, key: key), backing.state == .loaded { continue }
            missing.append(key)
        }
        var rows: [Int64: StoreRow] = [:]
        if !missing.isEmpty {
            do {
                for row in try context.rowSource.baseRows(of: entity, keys: missing) { rows[row.key] = row }
            } catch {
                // The batch comes back as faults; the context reports the error at its next
                // save (see `ManagedObjectContext.pendingStoreError`).
                context.recordReadFailure(error)
            }
        }
        var objects: [any BackedObject] = []
        objects.reserveCapacity(slice.count)
        for key in slice {
            if let row = rows[key] {
                objects.append(context.materialize(row, of: entity, as: .loaded))
            } else {
                // Registered and loaded, or gone from the store: the registered object, or a
                // fault that finds its row gone (or the error) when used, as any fault does.
                objects.append(context.object(of: entity, key: key))
            }
        }
        if !prefetched.isEmpty {
            do { try ObjectMaterializer(context: context).prefetch(prefetched, of: entity, for: objects) } catch { context.recordReadFailure(error) }
        }
        batch = objects
        loadedBatch = number
    }
}
