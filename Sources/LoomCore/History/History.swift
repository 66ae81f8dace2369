public import Foundation

/// A position in a store's history: the store's identity, a transaction number that only
/// grows, and a fingerprint of that transaction. `Sendable`, `Codable`, `Hashable` and
/// `Comparable` (tokens of one store compare by number); keep one per consumer, and pass it to
/// ``HistoryDescriptor/after``.
///
/// The fingerprint tells a store restored from an older copy from the one the token was read
/// from: if the store has since committed another transaction with the token's number, the
/// fingerprints differ and reading after the token throws ``LoomError/Code/historyTokenMismatch``
/// instead of skipping the transactions in between. Tokens encoded before tokens had one (and
/// tokens made with ``init(storeIdentifier:transactionNumber:)``) decode without it, and are
/// checked by number only.
public struct HistoryToken: Sendable, Codable, Hashable, Comparable, CustomStringConvertible {
    /// The store whose history this is.
    public let storeIdentifier: UUID
    /// The transaction's number: 1 for a store's first save or batch request, then one more
    /// per save or batch request.
    public let transactionNumber: Int64
    /// What identifies the transaction besides its number (its commit time, in microseconds
    /// since 1970); `nil` when unknown. Opaque: compare tokens, not fingerprints.
    public let fingerprint: Int64?

    /// A token for transaction `transactionNumber` of a store, without a fingerprint: checked
    /// by number only.
    public init(storeIdentifier: UUID, transactionNumber: Int64) {
        self.init(storeIdentifier: storeIdentifier, transactionNumber: transactionNumber, fingerprint: nil)
    }

    /// A token with the fingerprint a store recorded for the transaction.
    public init(storeIdentifier: UUID, transactionNumber: Int64, fingerprint: Int64?) {
        self.storeIdentifier = storeIdentifier
        self.transactionNumber = transactionNumber
        self.fingerprint = fingerprint
    }

    /// The fingerprint of a transaction committed at `timestamp` (seconds since 1970), as the
    /// SQL stores record it.
    @_spi(LoomStore) public static func fingerprint(ofTimestamp timestamp: Double) -> Int64? {
        let microseconds = (timestamp * 1_000_000).rounded()
        return microseconds.isFinite && abs(microseconds) < 9e18 ? Int64(microseconds) : nil
    }

    public static func < (a: HistoryToken, b: HistoryToken) -> Bool { a.transactionNumber < b.transactionNumber }

    public var description: String { "\(storeIdentifier.uuidString.prefix(8))…#\(transactionNumber)" }
}

/// One committed save or batch request, as the store's history recorded it: who saved, when,
/// and which objects it inserted, updated (with the names of the changed attributes and
/// relationships) or deleted, each object once. Like Core Data's and SwiftData's history, it records which properties changed, not
/// their values.
public struct HistoryTransaction: Sendable, Hashable, Identifiable, Codable, CustomStringConvertible {
    public var token: HistoryToken
    public var id: HistoryToken { token }
    /// When it committed.
    public var timestamp: Date
    /// The saving context's ``ManagedObjectContext/transactionAuthor``.
    public var author: String?
    /// The saving context's name.
    public var contextName: String?
    /// The process that saved it.
    public var processIdentifier: Int32
    public var processName: String
    /// What it changed, in order: inserts, updates, deletes.
    public var changes: [HistoryChange]

    public init(token: HistoryToken, timestamp: Date, author: String?, contextName: String?, processIdentifier: Int32, processName: String, changes: [HistoryChange]) {
        self.token = token
        self.timestamp = timestamp
        self.author = author
        self.contextName = contextName
        self.processIdentifier = processIdentifier
        self.processName = processName
        self.changes = changes
    }

    /// The transaction on one line (number, time, author, context, process), then one line per
    /// change: `+ Book/3`, `~ Book/4 (title, labels)`, `- Tag/1`.
    public var description: String {
        var text = "#\(token.transactionNumber) \(timestamp.formatted(.iso8601)) author: \(author ?? "-"), context: \(contextName ?? "-"), process: \(processName) (\(processIdentifier))"
        for change in changes { text += "\n  \(change)" }
        return text
    }
}

/// One object's change in a ``HistoryTransaction``.
public struct HistoryChange: Sendable, Hashable, Codable, CustomStringConvertible {
    public enum Kind: Sendable, Hashable {
        case insert
        /// The names of the attributes and relationships that changed.
        case update(updatedProperties: [String])
        case delete
    }

    public var objectID: AnyObjectID
    public var kind: Kind
    /// For a deletion of an object with attributes marked `.preserveValueOnDeletion`: their
    /// values when it was deleted.
    public var tombstone: HistoryTombstone?

    public init(objectID: AnyObjectID, kind: Kind, tombstone: HistoryTombstone? = nil) {
        self.objectID = objectID
        self.kind = kind
        self.tombstone = tombstone
    }

    private enum CodingKeys: String, CodingKey { case objectID, kind, updatedProperties, tombstone }

    /// Encoded flat: `{"objectID": …, "kind": "update", "updatedProperties": ["title"]}`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(objectID, forKey: .objectID)
        switch kind {
        case .insert: try container.encode("insert", forKey: .kind)
        case .update(let properties):
            try container.encode("update", forKey: .kind)
            try container.encode(properties, forKey: .updatedProperties)
        case .delete: try container.encode("delete", forKey: .kind)
        }
        try container.encodeIfPresent(tombstone, forKey: .tombstone)
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        objectID = try container.decode(AnyObjectID.self, forKey: .objectID)
        switch try container.decode(String.self, forKey: .kind) {
        case "insert": kind = .insert
        case "update": kind = .update(updatedProperties: try container.decodeIfPresent([String].self, forKey: .updatedProperties) ?? [])
        case "delete": kind = .delete
        case let other:
            throw DecodingError.dataCorruptedError(forKey: .kind, in: container, debugDescription: "A history change's kind is insert, update or delete, not \(other).")
        }
        tombstone = try container.decodeIfPresent(HistoryTombstone.self, forKey: .tombstone)
    }

    /// `+ Book/3`, `~ Book/4 (title, labels)` or `- Tag/1`.
    public var description: String {
        switch kind {
        case .insert: "+ \(objectID)"
        case .update(let properties): "~ \(objectID) (\(properties.joined(separator: ", ")))"
        case .delete: "- \(objectID)" + (tombstone.map { " \($0)" } ?? "")
        }
    }
}

/// What the history keeps of a deleted object: the values of its attributes marked
/// `@Attribute(.preserveValueOnDeletion)` (SwiftData's `HistoryTombstone`).
///
/// ```swift
/// if case .delete = change.kind, let tombstone = change.tombstone {
///     let serverID = tombstone.value(\Book.serverID)   // String?
/// }
/// ```
public struct HistoryTombstone: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The preserved values by attribute name, as stored.
    public let values: [String: StoredValue]

    public init(values: [String: StoredValue]) { self.values = values }

    /// The preserved attributes' names.
    public var attributeNames: [String] { values.keys.sorted() }

    /// A preserved value as stored, by attribute name; `nil` when it was not preserved.
    public subscript(name: String) -> StoredValue? { values[name] }

    /// A preserved value as its model type has it (`nil` when the attribute was not preserved,
    /// or the key path is not an attribute of `Model`).
    public func value<Model: PersistentModel, Value>(_ keyPath: KeyPath<Model, Value>) -> Value? {
        guard let name = Model._loomPropertyName(for: keyPath), let stored = values[name],
              let attribute = Model.entity.attributes.first(where: { $0.name == name }) else { return nil }
        return attribute.codec.decode(stored) as? Value
    }

    public var description: String {
        "{" + attributeNames.map { "\($0): \(values[$0]!)" }.joined(separator: ", ") + "}"
    }

    /// Encoded as an object of attribute names to `{"integer": 1}`, `{"real": 1.5}`,
    /// `{"text": "…"}`, `{"blob": "<base64>"}` or `{"null": true}`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Name.self)
        for (name, value) in values {
            var item = container.nestedContainer(keyedBy: Name.self, forKey: Name(name))
            switch value {
            case .null: try item.encode(true, forKey: Name("null"))
            case .integer(let v): try item.encode(v, forKey: Name("integer"))
            case .real(let v): try item.encode(v, forKey: Name("real"))
            case .text(let v): try item.encode(v, forKey: Name("text"))
            case .blob(let v): try item.encode(v.base64EncodedString(), forKey: Name("blob"))
            }
        }
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Name.self)
        var values: [String: StoredValue] = [:]
        for key in container.allKeys {
            let item = try container.nestedContainer(keyedBy: Name.self, forKey: key)
            guard let kind = item.allKeys.first else {
                throw DecodingError.dataCorruptedError(forKey: key, in: container, debugDescription: "A tombstone value names its kind: null, integer, real, text or blob.")
            }
            switch kind.stringValue {
            case "null": values[key.stringValue] = .null
            case "integer": values[key.stringValue] = .integer(try item.decode(Int64.self, forKey: kind))
            case "real": values[key.stringValue] = .real(try item.decode(Double.self, forKey: kind))
            case "text": values[key.stringValue] = .text(try item.decode(String.self, forKey: kind))
            case "blob":
                guard let data = Data(base64Encoded: try item.decode(String.self, forKey: kind)) else {
                    throw DecodingError.dataCorruptedError(forKey: kind, in: item, debugDescription: "A tombstone blob is base64.")
                }
                values[key.stringValue] = .blob(data)
            default:
                throw DecodingError.dataCorruptedError(forKey: kind, in: item, debugDescription: "A tombstone value's kind is null, integer, real, text or blob, not \(kind.stringValue).")
            }
        }
        self.values = values
    }

    private struct Name: CodingKey {
        let stringValue: String
        var intValue: Int? { nil }
        init(_ name: String) { stringValue = name }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }
}

/// Which history to fetch: SwiftData's `HistoryDescriptor`, as plain fields.
///
/// ```swift
/// var descriptor = HistoryDescriptor(after: lastToken)
/// descriptor.authors = ["importer"]
/// let transactions = try context.fetchHistory(descriptor)
/// lastToken = transactions.last?.token ?? lastToken
/// ```
public struct HistoryDescriptor: Sendable {
    /// Only transactions after this one (`nil`: from the oldest kept).
    public var after: HistoryToken?
    /// Only transactions by these authors (`nil`: any).
    public var authors: [String]?
    /// Only changes of these entities; transactions left without changes are left out (`nil`:
    /// every entity).
    public var entityNames: [String]?
    /// At most this many transactions, the oldest first.
    public var fetchLimit: Int?

    public init(after: HistoryToken? = nil, authors: [String]? = nil, entityNames: [String]? = nil, fetchLimit: Int? = nil) {
        self.after = after
        self.authors = authors
        self.entityNames = entityNames
        self.fetchLimit = fetchLimit
    }
}

/// What a store records of one save: its changes grouped by entity, kind and set of changed
/// properties, each group with the keys of its objects. Store-independent, so that every SQL
/// store writes history rows the same way (a few rows per save, however many objects).
@_spi(LoomStore) public struct HistoryChangeGroup: Sendable, Equatable {
    public enum Kind: Int, Sendable { case insert = 0, update = 1, delete = 2 }
    public var entityName: String
    public var kind: Kind
    /// For updates: the changed properties' names, comma-separated, sorted; for deletes with
    /// tombstones, the preserved attributes' names, in attribute order; else empty.
    public var properties: String
    public var keys: [Int64]
    /// For deletes with tombstones: per key, the preserved attributes' values (as `properties`
    /// names them); else empty.
    public var tombstones: [[StoredValue]] = []

    public init(entityName: String, kind: Kind, properties: String, keys: [Int64], tombstones: [[StoredValue]] = []) {
        self.entityName = entityName
        self.kind = kind
        self.properties = properties
        self.keys = keys
        self.tombstones = tombstones
    }

    /// The groups of a change set, inserts first, then updates, then deletes, by entity.
    public static func groups(of changes: StoreChangeSet, in schema: Schema) -> [HistoryChangeGroup] {
        var groups: [HistoryChangeGroup] = []
        var index: [String: Int] = [:]
        func add(_ entity: String, _ kind: Kind, _ properties: String, _ key: Int64) {
            let id = "\(kind.rawValue)\u{0}\(entity)\u{0}\(properties)"
            if let i = index[id] {
                groups[i].keys.append(key)
            } else {
                index[id] = groups.count
                groups.append(HistoryChangeGroup(entityName: entity, kind: kind, properties: properties, keys: [key]))
            }
        }
        // Inserts (and deletes without tombstones, below) come in runs per entity: grouped by the
        // entity's identity, without building keys, found among the few entities by pointer
        // comparison (no dictionary for a save of one).
        func addByEntity(_ runs: inout [(entity: ObjectIdentifier, group: Int)], _ entity: EntityDescription, _ kind: Kind, _ key: Int64) {
            let id = ObjectIdentifier(entity)
            if let found = runs.last(where: { $0.entity == id }) {
                groups[found.group].keys.append(key)
            } else {
                runs.append((id, groups.count))
                groups.append(HistoryChangeGroup(entityName: entity.name, kind: kind, properties: "", keys: [key]))
            }
        }
        var insertGroups: [(entity: ObjectIdentifier, group: Int)] = []
        for insert in changes.inserts { addByEntity(&insertGroups, insert.entity, .insert, insert.key) }
        // Updates, and the many-to-many links added or removed (a change of both sides'
        // relationship), for objects neither inserted nor deleted by this save.
        // By entity identity and key: a batch updates thousands of objects, and a text key per
        // object cost each one an interpolation and its hashing.
        var updated: [RowCacheKey: (entity: EntityDescription, key: Int64, names: Set<String>)] = [:]
        for update in changes.updates {
            let names = Set(update.changes.map { update.entity.storedValueName(at: $0.index) })
            updated[update.rowKey, default: (update.entity, update.key, [])].names.formUnion(names)
        }
        for owner in changes.relationshipOwners {
            updated[RowCacheKey(entity: ObjectIdentifier(owner.entity), key: owner.key), default: (owner.entity, owner.key, [])].names.formUnion(owner.relationships)
        }
        let hasLinks = !changes.linkInserts.isEmpty || !changes.linkDeletes.isEmpty
        let inserted = hasLinks ? Set(changes.inserts.map { RowCacheKey(entity: ObjectIdentifier($0.entity), key: $0.key) }) : []
        let deleted = hasLinks ? Set(changes.deletes.map { RowCacheKey(entity: ObjectIdentifier($0.entity), key: $0.key) }) : []
        var sides: [String: [(entity: EntityDescription, relationship: String, ownsSource: Bool)]] = [:]
        func sidesOf(_ table: JoinTable) -> [(entity: EntityDescription, relationship: String, ownsSource: Bool)] {
            if let known = sides[table.name] { return known }
            var found: [(EntityDescription, String, Bool)] = []
            for name in Set([table.sourceEntityName, table.targetEntityName]) {
                guard let entity = schema.entity(named: name) else { continue }
                for r in schema.relationships(of: entity) {
                    if case .joinTable(let t, let own, _) = r.storage, t.name == table.name {
                        found.append((entity, r.description.name, own == JoinTable.sourceColumn))
                    }
                }
            }
            sides[table.name] = found
            return found
        }
        for link in changes.linkInserts + changes.linkDeletes {
            for side in sidesOf(link.table) {
                let key = side.ownsSource ? link.source : link.target
                let id = RowCacheKey(entity: ObjectIdentifier(side.entity), key: key)
                if inserted.contains(id) || deleted.contains(id) { continue }
                updated[id, default: (side.entity, key, [])].names.insert(side.relationship)
            }
        }
        for (_, update) in updated.sorted(by: { ($0.value.entity.name, $0.value.key) < ($1.value.entity.name, $1.value.key) }) {
            add(update.entity.name, .update, update.names.sorted().joined(separator: ","), update.key)
        }
        // A batch's cascade deletes a million rows of a few entities.
        var deleteGroups: [(entity: ObjectIdentifier, group: Int)] = []
        for delete in changes.deletes {
            if delete.tombstone.isEmpty {
                addByEntity(&deleteGroups, delete.entity, .delete, delete.key)
                continue
            }
            let names = delete.tombstone.map { delete.entity.attributes[$0.index].name }.joined(separator: ",")
            add(delete.entity.name, .delete, names, delete.key)
            let i = index["\(Kind.delete.rawValue)\u{0}\(delete.entity.name)\u{0}\(names)"]!
            groups[i].tombstones.append(delete.tombstone.map(\.value))
        }
        return groups
    }

    /// The groups of one history transaction made of two change sets applied one after the
    /// other (a batch request's chunks): each object recorded once, as one save of both would
    /// record it. Inserted, then updated: inserted. Updated twice: updated, with the properties
    /// of both. Updated, then deleted: deleted (with the later tombstone). Inserted, then
    /// deleted: not recorded. Inserts come first, then updates, then deletes, each entity's
    /// objects in one group per set of properties.
    ///
    /// - Complexity: O(keys) for entities whose objects appear once (a batch request's chunks
    ///   touch objects of distinct key ranges); hashing the keys of the others.
    public static func merging(_ earlier: [HistoryChangeGroup], _ later: [HistoryChangeGroup]) -> [HistoryChangeGroup] {
        merging([earlier, later])
    }

    /// The groups of one history transaction made of change sets applied one after the other
    /// (every chunk of a batch request), merged at once by the rules of
    /// ``merging(_:_:)``: what merging them two by two gives, without remaking the growing
    /// result for every change set.
    ///
    /// - Complexity: O(keys) for entities whose objects appear once, plus sorting each
    ///   entity's groups by key range; hashing the keys of the others.
    public static func merging(_ sets: [[HistoryChangeGroup]]) -> [HistoryChangeGroup] {
        var byEntity: [(name: String, groups: [HistoryChangeGroup])] = []
        for group in sets.joined() {
            if let i = byEntity.firstIndex(where: { $0.name == group.entityName }) {
                byEntity[i].groups.append(group)
            } else {
                byEntity.append((group.entityName, [group]))
            }
        }
        var merged: [HistoryChangeGroup] = []
        for (_, groups) in byEntity {
            merged += appearOnce(groups) ? concatenated(groups) : reconciled(groups)
        }
        // Stable: within a kind, entities stay in the order they first appeared.
        return merged.enumerated().sorted { ($0.element.kind.rawValue, $0.offset) < ($1.element.kind.rawValue, $1.offset) }.map(\.element)
    }

    /// Whether no key of one entity's groups is in two of them: keys are unique within a group,
    /// so groups whose key ranges do not overlap hold distinct objects.
    private static func appearOnce(_ groups: [HistoryChangeGroup]) -> Bool {
        guard groups.count > 1 else { return true }
        var ranges: [(low: Int64, high: Int64)] = []
        for group in groups where !group.keys.isEmpty {
            ranges.append((group.keys.min()!, group.keys.max()!))
        }
        ranges.sort { $0.low < $1.low }
        return zip(ranges, ranges.dropFirst()).allSatisfy { $0.high < $1.low }
    }

    /// One entity's groups of distinct objects, those of the same kind and properties joined.
    private static func concatenated(_ groups: [HistoryChangeGroup]) -> [HistoryChangeGroup] {
        var joined: [HistoryChangeGroup] = []
        for group in groups {
            if let i = joined.firstIndex(where: { $0.kind == group.kind && $0.properties == group.properties && $0.tombstones.isEmpty == group.tombstones.isEmpty }) {
                joined[i].keys += group.keys
                joined[i].tombstones += group.tombstones
            } else {
                joined.append(group)
            }
        }
        return joined
    }

    /// One entity's groups, each object's changes in order reduced to the one a save records.
    private static func reconciled(_ groups: [HistoryChangeGroup]) -> [HistoryChangeGroup] {
        enum Change {
            case insert
            case update(Set<String>)
            case delete(properties: String, tombstone: [StoredValue]?)
            /// Inserted, then deleted: nothing to record.
            case gone
        }
        var changes: [Int64: Change] = [:]
        var order: [Int64] = []
        for group in groups {
            let properties = group.kind == .update ? Set(group.properties.split(separator: ",").map(String.init)) : []
            for (i, key) in group.keys.enumerated() {
                let previous = changes[key]
                if previous == nil { order.append(key) }
                switch (previous, group.kind) {
                case (nil, .insert), (.gone?, .insert): changes[key] = .insert
                case (.insert?, .update): break
                case (.update(let names)?, .update): changes[key] = .update(names.union(properties))
                case (nil, .update), (.gone?, .update): changes[key] = .update(properties)
                case (.insert?, .delete): changes[key] = .gone
                case (_, .delete): changes[key] = .delete(properties: group.properties, tombstone: i < group.tombstones.count ? group.tombstones[i] : nil)
                case (.delete?, _), (.insert?, .insert), (.update?, .insert): break   // keys are never reused
                }
            }
        }
        var inserts = HistoryChangeGroup(entityName: groups[0].entityName, kind: .insert, properties: "", keys: [])
        var updates: [String: [Int64]] = [:]
        var deletes: [HistoryChangeGroup] = []
        for key in order {
            switch changes[key]! {
            case .insert: inserts.keys.append(key)
            case .update(let names): updates[names.sorted().joined(separator: ","), default: []].append(key)
            case .delete(let properties, let tombstone):
                let i = deletes.firstIndex { $0.properties == properties && $0.tombstones.isEmpty == (tombstone == nil) } ?? {
                    deletes.append(HistoryChangeGroup(entityName: inserts.entityName, kind: .delete, properties: properties, keys: []))
                    return deletes.count - 1
                }()
                deletes[i].keys.append(key)
                if let tombstone { deletes[i].tombstones.append(tombstone) }
            case .gone: break
            }
        }
        var result = inserts.keys.isEmpty ? [] : [inserts]
        for (properties, keys) in updates.sorted(by: { $0.key < $1.key }) {
            result.append(HistoryChangeGroup(entityName: inserts.entityName, kind: .update, properties: properties, keys: keys.sorted()))
        }
        return result + deletes
    }

    /// The groups of one transaction as one value: per group its kind (1 byte; 3 for deletes
    /// with tombstones), entity and properties (UTF-8, each after its 4-byte length), key count
    /// (4 bytes) and keys (8 bytes each), then for deletes with tombstones each key's values
    /// (``encodeValue(_:into:)``); little-endian.
    ///
    /// Keys that come in runs of consecutive numbers (a save of new objects: keys are handed out
    /// in blocks) are written as runs instead, when that is shorter: the kind plus 4 (4 inserts,
    /// 5 updates, 6 deletes), the key count, the run count (4 bytes) and each run's first key
    /// (8 bytes) and length (4 bytes). A save of many new objects then records a few runs
    /// instead of 8 bytes a key, which the store writes (and its log) in the saving transaction.
    /// ``decode(_:)`` reads both forms.
    ///
    /// Written into a byte array sized up front and copied into `Data` once: every save writes
    /// one of these, and appending to `Data` piece by piece was a measurable part of a save.
    public static func encode(_ groups: [HistoryChangeGroup]) -> Data {
        var bytes: [UInt8] = []
        encode(groups, into: &bytes)
        return Data(bytes)
    }

    /// Appends what ``encode(_:)`` returns to `bytes`.
    public static func encode(_ groups: [HistoryChangeGroup], into bytes: inout [UInt8]) {
        bytes.reserveCapacity(bytes.count + groups.reduce(0) { $0 + 13 + $1.entityName.utf8.count + $1.properties.utf8.count + 8 * $1.keys.count })
        for group in groups {
            if group.tombstones.isEmpty {
                appendGroup(group.kind, entity: group.entityName, properties: group.properties, keys: group.keys, to: &bytes)
                continue
            }
            bytes.append(3)
            appendText(group.entityName, to: &bytes)
            appendText(group.properties, to: &bytes)
            append32(group.keys.count, to: &bytes)
            for key in group.keys { append64(UInt64(bitPattern: key), to: &bytes) }
            for values in group.tombstones {
                for value in values { encodeValue(value, into: &bytes) }
            }
        }
    }

    /// The one entity of a change set that only inserts objects, all of one entity (a save of
    /// new objects of one model: the most common save), or `nil`.
    public static func onlyInsertedEntity(of changes: StoreChangeSet) -> EntityDescription? {
        guard let entity = changes.inserts.first?.entity, changes.updates.isEmpty, changes.deletes.isEmpty,
              changes.linkInserts.isEmpty, changes.linkDeletes.isEmpty, changes.relationshipOwners.isEmpty,
              changes.inserts.allSatisfy({ $0.entity === entity }) else { return nil }
        return entity
    }

    /// Appends what `encode(groups(of: changes, in: schema))` returns to `bytes`, for a change
    /// set whose ``onlyInsertedEntity(of:)`` is `entity`, without making the groups: one
    /// insert group of every key, in order.
    public static func encodeInserts(of changes: StoreChangeSet, entity: EntityDescription, into bytes: inout [UInt8]) {
        appendGroup(.insert, entity: entity.name, properties: "", keys: changes.inserts.map { $0.key }, to: &bytes)
    }

    /// A group without tombstones: its keys one by one, or as runs when that is shorter (see
    /// ``encode(_:)``).
    private static func appendGroup(_ kind: Kind, entity: String, properties: String, keys: [Int64], to bytes: inout [UInt8]) {
        /// Whether `key` continues the run that `previous` ends (one rule for counting and writing).
        func continues(_ previous: Int64, _ key: Int64) -> Bool { previous != .max && key == previous + 1 }
        var runs = 0
        for (i, key) in keys.enumerated() where i == 0 || !continues(keys[i - 1], key) { runs += 1 }
        let asRuns = runs * 12 + 4 < keys.count * 8
        bytes.reserveCapacity(bytes.count + 17 + entity.utf8.count + properties.utf8.count + (asRuns ? 12 * runs : 8 * keys.count))
        bytes.append(UInt8(kind.rawValue + (asRuns ? 4 : 0)))
        appendText(entity, to: &bytes)
        appendText(properties, to: &bytes)
        append32(keys.count, to: &bytes)
        guard asRuns else {
            for key in keys { append64(UInt64(bitPattern: key), to: &bytes) }
            return
        }
        append32(runs, to: &bytes)
        var start = 0
        for i in 1...keys.count where i == keys.count || !continues(keys[i - 1], keys[i]) {
            append64(UInt64(bitPattern: keys[start]), to: &bytes)
            append32(i - start, to: &bytes)
            start = i
        }
    }

    /// A value as a tag byte (0 null, 1 integer, 2 real, 3 text, 4 blob) and its bytes: 8 for
    /// numbers, a 4-byte length and the bytes for text (UTF-8) and blobs.
    static func encodeValue(_ value: StoredValue, into bytes: inout [UInt8]) {
        switch value {
        case .null: bytes.append(0)
        case .integer(let v):
            bytes.append(1)
            append64(UInt64(bitPattern: v), to: &bytes)
        case .real(let v):
            bytes.append(2)
            append64(v.bitPattern, to: &bytes)
        case .text(let v):
            bytes.append(3)
            appendText(v, to: &bytes)
        case .blob(let v):
            bytes.append(4)
            append32(v.count, to: &bytes)
            bytes.append(contentsOf: v)
        }
    }

    private static func append32(_ value: Int, to bytes: inout [UInt8]) {
        let v = UInt32(truncatingIfNeeded: value)
        for shift in stride(from: 0, to: 32, by: 8) { bytes.append(UInt8(truncatingIfNeeded: v >> UInt32(shift))) }
    }

    private static func append64(_ value: UInt64, to bytes: inout [UInt8]) {
        for shift in stride(from: 0, to: 64, by: 8) { bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(shift))) }
    }

    /// UTF-8 bytes after their 4-byte length.
    private static func appendText(_ text: String, to bytes: inout [UInt8]) {
        append32(text.utf8.count, to: &bytes)
        bytes.append(contentsOf: text.utf8)
    }

    /// Reads what ``encode(_:)`` wrote; `nil` for damaged data, or for groups that list more
    /// than `keyLimit` keys in all.
    ///
    /// A group can list its keys as runs (first key, length), so a damaged row of a few bytes
    /// can claim billions of keys: `keyLimit` bounds what decoding allocates. A store passes
    /// what one transaction can list at most (``SQLHistory``'s `keyLimit(marks:)`: every key
    /// ever handed out, once per kind of change); no real transaction lists more.
    public static func decode(_ data: Data, keyLimit: Int) -> [HistoryChangeGroup]? {
        let bytes = [UInt8](data)
        var at = 0, groups: [HistoryChangeGroup] = [], listed = 0
        func read32() -> Int? {
            guard at + 4 <= bytes.count else { return nil }
            defer { at += 4 }
            return Int(UInt32(bytes[at]) | UInt32(bytes[at + 1]) << 8 | UInt32(bytes[at + 2]) << 16 | UInt32(bytes[at + 3]) << 24)
        }
        func readText() -> String? {
            guard let count = read32(), at + count <= bytes.count else { return nil }
            defer { at += count }
            return String(decoding: bytes[at..<at + count], as: UTF8.self)
        }
        func read64() -> UInt64? {
            guard at + 8 <= bytes.count else { return nil }
            defer { at += 8 }
            return (0..<8).reduce(UInt64(0)) { $0 | UInt64(bytes[at + $1]) << (8 * UInt64($1)) }
        }
        func readValue() -> StoredValue? {
            guard at < bytes.count else { return nil }
            let tag = bytes[at]
            at += 1
            switch tag {
            case 0: return .null
            case 1: return read64().map { .integer(Int64(bitPattern: $0)) }
            case 2: return read64().map { .real(Double(bitPattern: $0)) }
            case 3: return readText().map { .text($0) }
            case 4:
                guard let count = read32(), at + count <= bytes.count else { return nil }
                defer { at += count }
                return .blob(Data(bytes[at..<at + count]))
            default: return nil
            }
        }
        while at < bytes.count {
            let tag = bytes[at]
            let tombstoned = tag == 3, inRuns = (4...6).contains(tag)
            guard let kind = tombstoned ? .delete : Kind(rawValue: Int(inRuns ? tag - 4 : tag)) else { return nil }
            at += 1
            guard let entity = readText(), let properties = readText(), let count = read32(), count <= keyLimit - listed else { return nil }
            listed += count
            let keys: [Int64]
            if inRuns {
                guard let runs = read32(), runs <= count, at + runs * 12 <= bytes.count else { return nil }
                var expanded: [Int64] = []
                expanded.reserveCapacity(min(count, 1 << 20))
                for _ in 0..<runs {
                    guard let first = read64().map({ Int64(bitPattern: $0) }), let length = read32(), length > 0,
                          expanded.count + length <= count, first <= .max - Int64(length - 1) else { return nil }
                    for offset in 0..<Int64(length) { expanded.append(first + offset) }
                }
                guard expanded.count == count else { return nil }
                keys = expanded
            } else {
                guard at + count * 8 <= bytes.count else { return nil }
                keys = unpack(Data(bytes[at..<at + count * 8]))
                at += count * 8
            }
            var group = HistoryChangeGroup(entityName: entity, kind: kind, properties: properties, keys: keys)
            if tombstoned {
                // Each tombstone is read back as a dictionary by these names: a name twice is damage.
                let names = properties.split(separator: ",")
                guard Set(names).count == names.count else { return nil }
                let width = names.count
                for _ in 0..<count {
                    var values: [StoredValue] = []
                    for _ in 0..<width {
                        guard let value = readValue() else { return nil }
                        values.append(value)
                    }
                    group.tombstones.append(values)
                }
            }
            groups.append(group)
        }
        return groups
    }

    /// Keys packed as little-endian 64-bit integers.
    public static func pack(_ keys: [Int64]) -> Data {
        var data = Data(capacity: keys.count * 8)
        for key in keys { withUnsafeBytes(of: key.littleEndian) { data.append(contentsOf: $0) } }
        return data
    }

    public static func unpack(_ data: Data) -> [Int64] {
        stride(from: 0, to: data.count - data.count % 8, by: 8).map { offset in
            var value: Int64 = 0
            withUnsafeMutableBytes(of: &value) { $0.copyBytes(from: data[data.startIndex + offset ..< data.startIndex + offset + 8]) }
            return Int64(littleEndian: value)
        }
    }
}

/// What other coordinators or processes committed to the store, as this coordinator found it
/// in the store's history: Core Data's `NSPersistentStoreRemoteChange`, with the transactions.
/// By the time a context sees the merge, the coordinator has already told its merging contexts.
public struct RemoteChangeEvent: Sendable, Hashable {
    /// The transactions, in commit order (empty when ``historyWasLost``).
    public var transactions: [HistoryTransaction]
    /// The last transaction's token (when history was lost: the store's last transaction then).
    public var token: HistoryToken?
    /// The history after the last transaction this coordinator had seen was deleted before it
    /// could read it: what changed is unknown, so its merging contexts refreshed every object.
    public var historyWasLost: Bool

    public init(transactions: [HistoryTransaction], token: HistoryToken?, historyWasLost: Bool = false) {
        self.transactions = transactions
        self.token = token
        self.historyWasLost = historyWasLost
    }
}
