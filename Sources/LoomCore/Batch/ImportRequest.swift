import Foundation

/// A uniqued import: values decoded elsewhere (JSON, CSV, an API's response) become objects of
/// `Model`, inserted or, where one with the same unique key is saved, updated — in chunks, each
/// one uniqued batch insert (``BatchInsertRequest`` with ``BatchInsertRequest/Uniquing/update``)
/// committed on its own, with to-one relationships linked by the destination's key.
///
/// ```swift
/// let books = try JSONDecoder().decode([BookJSON].self, from: data)
/// let request = ImportRequest<Book, BookJSON>(books) { book in
///     [.set(\.isbn, to: book.isbn), .set(\.title, to: book.title)]
/// }.linking(\.author, to: \Author.authorID, by: \.authorID)
/// let result = try context.execute(request) { progress in print(progress.completed, "of", progress.total) }
/// ```
/// Per chunk: one keyed lookup per linked relationship, one for the saved objects the rows
/// match, and one store transaction; no object is made. A chunk whose `values` closure throws,
/// or whose link finds no destination, is not written, and the error is rethrown: the chunks
/// before it stay committed, so an import can resume after the last one its progress reported.
/// Loom's errors name the source by its position in `sources` (`Source 7777 of an import of
/// Book has no value for title…`), whatever the chunk; an error the `values` closure throws is
/// rethrown as it is.
///
/// Each committed chunk is one history transaction (the history records one per store
/// transaction a save or batch request commits).
public struct ImportRequest<Model: PersistentModel, Source: Sendable>: Sendable {
    /// The values to import, one object each.
    public var sources: [Source]
    /// Objects per chunk (committed together).
    public var chunkSize: Int
    /// The attributes identifying an object: by default the entity's first uniqueness constraint.
    public var uniquingBy: [any PartialKeyPath<Model> & Sendable]?
    let values: @Sendable (Source) throws -> [BatchValue<Model>]
    var links: [Link] = []

    struct Link: Sendable {
        let relationship: any PartialKeyPath<Model> & Sendable
        let destinationName: String
        /// The destination's key attribute's name (`nil` when the key path names none).
        let keyName: String?
        /// The source's key for the destination, encoded for the destination's attribute.
        let key: @Sendable (Source, AttributeDescription) throws(LoomError) -> StoredValue?
    }

    /// Imports `sources`, each turned into an object's attribute values by `values` (a hook that
    /// may throw, aborting its chunk).
    public init(_ sources: [Source], chunkSize: Int = 5_000, uniquingBy: [any PartialKeyPath<Model> & Sendable]? = nil,
                values: @escaping @Sendable (Source) throws -> [BatchValue<Model>]) {
        self.sources = sources
        self.chunkSize = max(1, chunkSize)
        self.uniquingBy = uniquingBy
        self.values = values
    }

    /// Links the to-one `relationship` of each imported object to the `Destination` whose
    /// `destinationKey` equals the source's `sourceKey` (no link when it is `nil`): one lookup
    /// per chunk. A key no saved destination has fails the chunk, naming the source's position.
    public func linking<Destination: PersistentModel, Key: Sendable>(
        _ relationship: any KeyPath<Model, Destination?> & Sendable, to destinationKey: any KeyPath<Destination, Key> & Sendable,
        by sourceKey: @escaping @Sendable (Source) -> Key?
    ) -> Self {
        var copy = self
        copy.links.append(Link(
            relationship: relationship, destinationName: Destination.entity.name,
            keyName: Destination.loomPropertyName(for: destinationKey),
            key: { source, attribute throws(LoomError) in
                guard let key = sourceKey(source) else { return nil }
                return try attribute.codec.encode(key)
            }))
        return copy
    }
}

/// How far an import has come, after each committed chunk.
///
/// Counts sources (records), each once, so that `inserted + updated + unchanged == completed`.
/// A source whose unique key no saved object has, nor an earlier source, inserts an object. A
/// source whose key a saved object has, or an earlier source of the import (in its chunk or
/// an earlier one), updates that object: it counts as `updated` when it changes one of the
/// object's values (as the sources before it left them), else as `unchanged`. So 40,000
/// sources for 38,000 keys insert at most 38,000 objects, and the other 2,000 are counted as
/// updated or unchanged.
public struct ImportProgress: Sendable, Equatable {
    /// Sources imported so far (committed), and in all.
    public var completed: Int
    public var total: Int
    /// Sources imported so far that inserted an object, that changed an object a saved object
    /// or an earlier source had made, and that matched an object without changing it.
    public var inserted: Int
    public var updated: Int
    public var unchanged: Int
}

extension BatchExecution {
    /// The body of ``ManagedObjectContext/execute(_:progress:)``: each chunk's links looked up,
    /// then the chunk written as one uniqued batch insert.
    func execute<Model: PersistentModel, Source: Sendable>(_ request: ImportRequest<Model, Source>, progress: ((ImportProgress) -> Void)?) throws -> ImportProgress {
        let schema = context.coordinator.schema
        // Each link's destination entity and key attribute, checked once.
        var links: [(link: ImportRequest<Model, Source>.Link, destination: EntityDescription, key: Int)] = []
        for link in request.links {
            let destination = try schema.requireEntity(named: link.destinationName)
            guard let name = link.keyName, let key = destination.attributeIndex(named: name) else {
                throw LoomError(.invalidRequest, "An import of \(Model.entity.name) links by a key path that is not an attribute of \(destination.name).", entity: destination.name)
            }
            links.append((link, destination, key))
        }
        var state = ImportProgress(completed: 0, total: request.sources.count, inserted: 0, updated: 0, unchanged: 0)
        var start = 0
        while start < request.sources.count {
            let end = min(start + request.chunkSize, request.sources.count)
            var rows: [[BatchValue<Model>]] = []
            rows.reserveCapacity(end - start)
            for source in request.sources[start..<end] { rows.append(try request.values(source)) }
            for (link, destination, keyIndex) in links {
                let attribute = destination.attributes[keyIndex]
                var keys: [StoredValue?] = []
                keys.reserveCapacity(end - start)
                for (i, source) in request.sources[start..<end].enumerated() {
                    do {
                        keys.append(try link.key(source, attribute))
                    } catch {
                        throw LoomError(.typeMismatch, "Source \(start + i) of an import of \(Model.entity.name) links to \(English.a(destination.name)) by a key that cannot be stored as its \(attribute.name) (\(attribute.valueTypeName)): \(error.message)",
                                        entity: destination.name, attributes: [attribute.name])
                    }
                }
                let wanted = Array(Set(keys.compactMap { $0 }))
                var found: [StoredValue: Int64] = [:]
                if !wanted.isEmpty {
                    // A destination with sub-entities: its objects are in their tables too (the
                    // attribute, inherited, in the same position).
                    for entity in schema.concreteEntities(of: destination) {
                        for row in try context.coordinator.store.fetch(StoreQuery(entity: entity, predicate: .isIn(.attribute(keyIndex), wanted))) {
                            found[row.values[keyIndex]] = row.key
                        }
                    }
                }
                for (i, key) in keys.enumerated() {
                    guard let key else { continue }
                    guard let target = found[key] else {
                        throw LoomError(.objectNotFound, "Source \(start + i) of an import of \(Model.entity.name) links to \(English.a(destination.name)) by its \(attribute.name), and no saved \(destination.name) has that \(attribute.name); nothing of its chunk (from source \(start)) was written.",
                                        entity: destination.name, attributes: [attribute.name])
                    }
                    rows[i].append(BatchValue(keyPath: link.relationship, related: RelatedKey(entityName: destination.name, key: target)))
                }
            }
            var insert = BatchInsertRequest(rows: rows, uniquing: .update, uniquingBy: request.uniquingBy)
            insert.resultType = .counts
            insert.rowNaming = BatchRowNaming(offset: start, isImport: true)
            let result = try execute(insert)
            state.completed = end
            state.inserted += result.rows.inserted
            state.updated += result.rows.updated
            state.unchanged += result.rows.unchanged
            progress?(state)
            start = end
        }
        return state
    }
}
