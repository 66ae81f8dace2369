/// What turns a store saved with one schema into a store of the model it is opened with,
/// inferred from the two: Core Data's lightweight migration, which Loom runs automatically when
/// a store's saved version hash differs from the model's.
///
/// Inferred: entities added and removed; attributes added (optional, or required with a
/// default; existing rows take the default), removed, and renamed
/// (``AttributeDescription/originalName``; in place unless indexed or unique); relationships and
/// entities renamed (``RelationshipDescription/originalName``, ``EntityDescription/originalName``);
/// optional ↔ required (a required attribute with a default takes it where the store holds
/// NULL); integer widening (16 → 32 → 64 bits) and `Float` → `Double`; to-one and to-many
/// relationships added and removed, made ordered or unordered, or made to-many (a one-to-many
/// becoming many-to-many fills its join table from the saved keys); uniqueness constraints added
/// and removed. In a hierarchy (each concrete entity a table holding its inherited columns),
/// the same rules give sub-entities added, a flat entity made a parent and an attribute moved up
/// to the parent: new tables, and columns added where an entity gains an attribute. Anything
/// else (a narrowing type change, a to-many made to-one, another
/// destination) cannot be inferred: ``infer(from:to:path:)`` throws
/// ``LoomError/Code/schemaMismatch`` naming it, and the store is not touched.
///
/// Store-independent: a store turns it into its own DDL and runs all of it in one transaction
/// (SQLite: `SQLiteStore+Migration.swift`), so a store is never half-migrated.
@_spi(LoomStore) public struct SchemaMigration: Sendable {
    /// Where a column of a rebuilt table takes its values from.
    public enum ColumnSource: Sendable, Equatable {
        /// The saved column of this name (the attribute's own, or its original name).
        case column(String)
        /// The saved column, with NULLs replaced by the value: an optional attribute that became
        /// required and has a default.
        case columnOrValue(String, StoredValue)
        /// A new column: the value in every existing row (the attribute's default, else NULL).
        case value(StoredValue)
    }

    /// A column renamed in place.
    public struct ColumnRename: Sendable, Equatable {
        public var from: String
        public var to: String
    }

    /// What happens to one entity's table.
    public enum TableChange: Sendable {
        /// A new entity: its table is created.
        case create(EntityDescription)
        /// An entity the model no longer has: its table (and its rows) go.
        case drop(String)
        /// Only renamed columns (of attributes in no index or uniqueness constraint) and new
        /// columns that may hold NULL (optional attributes without a default, foreign keys,
        /// orders): renamed and added in place, without touching the rows (`renames`: saved
        /// column name, new one; `slots`: the model entity's slots of the new columns).
        case alter(EntityDescription, renames: [ColumnRename], slots: [Int])
        /// Anything else: the table is made anew from the model and filled from the saved one
        /// (`from`: the entity's saved name, which differs when it was renamed), one source per
        /// stored slot of the model's entity.
        case rebuild(EntityDescription, sources: [ColumnSource], from: String)
    }

    /// The schema the store saved, which the migration starts from.
    public var saved: Schema?
    /// The changes, table by table, in the order to apply them.
    public var tables: [TableChange] = []
    /// Join tables (many-to-many relationships) to create, to fill from a saved one (a renamed
    /// relationship), and to drop by name, in that order.
    public var createdJoinTables: [JoinTable] = []
    public var copiedJoinTables: [JoinTableCopy] = []
    /// Join tables made and filled from an entity's saved foreign key (a relationship that was
    /// one-to-many), first of all: `from` is the saved table, the columns are its key and the
    /// foreign key; rows whose foreign key is NULL are left out.
    public var filledJoinTables: [JoinTableCopy] = []
    public var droppedJoinTables: [String] = []

    /// A join table filled from a saved one: the new table's `Z_SOURCE` from the saved
    /// `sourceFrom` column, its `Z_TARGET` from `targetFrom`.
    public struct JoinTableCopy: Sendable {
        public var from: String
        public var to: JoinTable
        public var sourceFrom: String
        public var targetFrom: String
    }
    /// What changes, one sentence each, for logs and progress.
    public var summary: [String] = []
    /// The attributes of entities the model keeps that it no longer has, by the entity's and
    /// the attribute's saved names: their values go with the migration.
    public var droppedAttributes: [(entity: String, attribute: String)] = []

    /// Infers the migration from the schema a store saved to `model`.
    ///
    /// - Throws: ``LoomError/Code/schemaMismatch`` when a change cannot be inferred, naming it
    ///   and listing every difference.
    public static func infer(from saved: SchemaRecord, to model: Schema, path: String? = nil) throws(LoomError) -> SchemaMigration {
        let old: Schema
        do {
            old = try Schema(record: saved)
        } catch {
            throw LoomError(.schemaMismatch, "The schema saved in the store cannot be read back (\(error.message)); it cannot be migrated.", path: path, underlying: error)
        }
        var migration = SchemaMigration()
        migration.saved = old
        func refuse(_ reason: String) -> LoomError {
            let differences = saved.differences(from: model.record)
            return LoomError(
                .schemaMismatch,
                "The store\(path.map { " at \($0)" } ?? "") was made with an older model, and the change cannot be inferred: \(reason). All differences: \(differences.joined(separator: "; ")).",
                path: path)
        }
        // Entities renamed (`@Model(originalName:)`): saved name → model name.
        var renamed: [String: String] = [:]
        for entity in model.entities where old.entity(named: entity.name) == nil {
            if let original = entity.originalName, old.entity(named: original) != nil, model.entity(named: original) == nil {
                renamed[original] = entity.name
            }
        }
        func savedEntity(_ entity: EntityDescription) -> EntityDescription? {
            old.entity(named: entity.name) ?? renamed.first { $0.value == entity.name }.flatMap { old.entity(named: $0.key) }
        }
        /// A saved entity's name in the model.
        func current(_ name: String) -> String { renamed[name] ?? name }
        for entity in model.entities {
            guard let previous = savedEntity(entity) else {
                migration.tables.append(.create(entity))
                migration.summary.append("add entity \(entity.name)")
                continue
            }
            if previous.name != entity.name { migration.summary.append("rename entity \(previous.name) to \(entity.name)") }
            var sources: [ColumnSource] = []
            var kept: Set<String> = []
            var onlyAdds = true
            var renames: [ColumnRename] = []
            // Index and constraint names carry attribute names: such an attribute is renamed by
            // a rebuild, which makes them anew.
            let indexed = Set((previous.indexes + previous.uniquenessConstraints + entity.indexes + entity.uniquenessConstraints).flatMap { $0 })
            for slot in 0..<entity.storedValueCount {
                switch entity.storedValue(at: slot) {
                case .attribute(let attribute):
                    let savedName = [attribute.name, attribute.originalName].compactMap { $0 }.first { previous.attributeIndex(named: $0) != nil }
                    guard let savedName, let index = previous.attributeIndex(named: savedName) else {
                        // Existing rows take the default, as in Core Data (evaluated once: a
                        // default such as `Date()` gives every row the same value); a column
                        // filled with a value is made by a rebuild, not added in place.
                        let value = attribute.defaultStoredValue ?? .null
                        sources.append(.value(value))
                        if !attribute.isOptional || value != .null { onlyAdds = false }
                        migration.summary.append("add \(entity.name).\(attribute.name)")
                        continue
                    }
                    let before = previous.attributes[index]
                    guard widens(before.type, to: attribute.type) else {
                        throw refuse("\(entity.name).\(attribute.name) changes from \(before.type) to \(attribute.type), which could lose or misread values")
                    }
                    kept.insert(savedName)
                    if savedName != attribute.name {
                        if indexed.contains(savedName) || indexed.contains(attribute.name) || before.isUnique || attribute.isUnique {
                            onlyAdds = false
                        } else {
                            renames.append(ColumnRename(from: savedName, to: attribute.name))
                        }
                        migration.summary.append("rename \(entity.name).\(savedName) to \(attribute.name)")
                    }
                    if before.type != attribute.type {
                        onlyAdds = false
                        migration.summary.append("widen \(entity.name).\(attribute.name) from \(before.type) to \(attribute.type)")
                    }
                    if before.isOptional != attribute.isOptional { onlyAdds = false }
                    if before.isOptional, !attribute.isOptional, let value = attribute.defaultStoredValue {
                        sources.append(.columnOrValue(savedName, value))
                        migration.summary.append("make \(entity.name).\(attribute.name) required, NULLs taking its default")
                    } else {
                        sources.append(.column(savedName))
                    }
                case .foreignKey(let relationship), .order(let relationship):
                    if let savedName = savedRelationshipName(relationship, in: previous), let j = previous.relationshipIndex(named: savedName) {
                        let before = old.relationship(j, of: previous)
                        let now = model.relationship(entity.relationshipIndex(named: relationship.name) ?? 0, of: entity)
                        if let change = kindChange(before, now, renamed: current) { throw refuse(change) }
                        let isOrder = if case .order = entity.storedValue(at: slot) { true } else { false }
                        if isOrder && before.description.kind != .orderedToMany {
                            // Made ordered: no order saved yet, which reads as key order.
                            sources.append(.value(.null))
                            migration.summary.append("make relationship \(entity.name).\(relationship.name) ordered")
                            continue
                        }
                        // The saved column of the same kind (key or order) of the saved relationship.
                        let column = (0..<previous.storedValueCount).first { s in
                            switch previous.storedValue(at: s) {
                            case .foreignKey(let r): !isOrder && r.name == savedName
                            case .order(let r): isOrder && r.name == savedName
                            case .attribute: false
                            }
                        }.map(previous.columnName(at:)) ?? entity.columnName(at: slot)
                        if savedName != relationship.name {
                            // Its index is named after the relationship: made anew by a rebuild.
                            onlyAdds = false
                            if !isOrder { migration.summary.append("rename relationship \(entity.name).\(savedName) to \(relationship.name)") }
                        }
                        kept.insert(column)
                        sources.append(.column(column))
                    } else {
                        sources.append(.value(.null))
                        migration.summary.append("add relationship \(entity.name).\(relationship.name)")
                    }
                }
            }
            // Relationships on both sides must keep their kind and destination, also those
            // stored elsewhere (a to-many by its inverse's key, a many-to-many by a join table).
            for (j, relationship) in entity.relationships.enumerated() {
                guard let savedName = savedRelationshipName(relationship, in: previous), let i = previous.relationshipIndex(named: savedName) else { continue }
                let before = old.relationship(i, of: previous), now = model.relationship(j, of: entity)
                if let change = kindChange(before, now, renamed: current) { throw refuse(change) }
                if before.description.kind == .toOne, case .inverseForeignKey = now.storage {
                    // One-to-one becoming one-to-many keeps its links only through the inverse's
                    // saved key: the inverse must be the saved inverse, still to-one.
                    let inverse = now.destination.relationships[now.inverseIndex]
                    let savedDestination = savedEntity(now.destination)
                    let savedInverse = savedDestination.flatMap { savedRelationshipName(inverse, in: $0) }
                    if savedInverse == nil || savedInverse != before.description.inverseName ?? before.destination.relationships[before.inverseIndex].name
                        || before.destination.relationships[before.inverseIndex].kind != .toOne {
                        throw refuse("relationship \(entity.name).\(relationship.name) becomes to-many through \(now.destination.name).\(inverse.name), which holds no saved links, so its links would be lost; migrate it with a transform stage")
                    }
                }
                switch (before.description.kind, relationship.kind) {
                case (.orderedToMany, .toMany): migration.summary.append("make relationship \(entity.name).\(relationship.name) unordered")
                case (.toOne, .toMany), (.toOne, .orderedToMany): migration.summary.append("make relationship \(entity.name).\(relationship.name) to-many")
                default: break
                }
            }
            for relationship in previous.relationships where !entity.relationships.contains(where: { savedRelationshipName($0, in: previous) == relationship.name }) {
                migration.summary.append("remove relationship \(entity.name).\(relationship.name)")
            }
            for relationship in entity.relationships where relationship.kind.isToMany && savedRelationshipName(relationship, in: previous).map({ $0 != relationship.name }) == true {
                migration.summary.append("rename relationship \(entity.name).\(relationship.originalName ?? "") to \(relationship.name)")
            }
            let previousColumns = (0..<previous.storedValueCount).map(previous.columnName(at:))
            let dropped = previousColumns.filter { !kept.contains($0) }
            for attribute in previous.attributes where !kept.contains(attribute.name) {
                migration.summary.append("remove \(entity.name).\(attribute.name)")
                migration.droppedAttributes.append((previous.name, attribute.name))
            }
            let constraintsChanged = Set(previous.uniquenessConstraints.map { $0.sorted() }) != Set(entity.uniquenessConstraints.map { $0.sorted() })
            if constraintsChanged { migration.summary.append("change the uniqueness constraints of \(entity.name)") }
            let added = sources.indices.filter { if case .value = sources[$0] { true } else { false } }
            // A renamed entity is rebuilt: its indexes are named after it.
            if dropped.isEmpty, !constraintsChanged, onlyAdds, previous.name == entity.name {
                if !added.isEmpty || !renames.isEmpty { migration.tables.append(.alter(entity, renames: renames, slots: added)) }
            } else {
                migration.tables.append(.rebuild(entity, sources: sources, from: previous.name))
            }
        }
        for entity in old.entities where model.entity(named: entity.name) == nil && renamed[entity.name] == nil {
            migration.tables.append(.drop(entity.name))
            migration.summary.append("remove entity \(entity.name)")
        }
        // Join tables: a many-to-many relationship renamed on its owning side (or whose owning
        // side changes with a rename) gets a new table, filled from the saved one.
        let oldJoins = Set(old.joinTables.map(\.name)), newJoins = Set(model.joinTables.map(\.name))
        for entity in model.entities {
            guard let previous = savedEntity(entity) else { continue }
            for now in model.relationships(of: entity) {
                guard case .joinTable(let table, let own, _) = now.storage, own == JoinTable.sourceColumn,
                      let savedName = savedRelationshipName(now.description, in: previous),
                      let i = previous.relationshipIndex(named: savedName),
                      case .joinTable(let savedTable, let savedOwn, let savedOther) = old.relationship(i, of: previous).storage
                else { continue }
                if savedTable.name == table.name && savedOwn == own { continue }
                migration.copiedJoinTables.append(JoinTableCopy(from: savedTable.name, to: table, sourceFrom: savedOwn, targetFrom: savedOther))
            }
        }
        // Join tables of relationships that were one-to-many (or one-to-one): filled from the
        // saved foreign key, before the table that holds it is rebuilt without it.
        for entity in model.entities {
            guard let previous = savedEntity(entity) else { continue }
            for now in model.relationships(of: entity) {
                guard case .joinTable(let table, let own, _) = now.storage, own == JoinTable.sourceColumn,
                      let savedName = savedRelationshipName(now.description, in: previous),
                      let i = previous.relationshipIndex(named: savedName) else { continue }
                let before = old.relationship(i, of: previous)
                if case .foreignKey(let slot) = before.storage {
                    migration.filledJoinTables.append(JoinTableCopy(from: previous.name, to: table, sourceFrom: "Z_PK", targetFrom: previous.columnName(at: slot)))
                } else if case .inverseForeignKey(let slot) = before.storage {
                    migration.filledJoinTables.append(JoinTableCopy(from: before.destination.name, to: table, sourceFrom: before.destination.columnName(at: slot), targetFrom: "Z_PK"))
                }
            }
        }
        let copied = Set(migration.copiedJoinTables.map(\.to.name) + migration.filledJoinTables.map(\.to.name))
        let filled = Set(migration.filledJoinTables.map(\.to.name))
        migration.createdJoinTables = model.joinTables.filter { (!oldJoins.contains($0.name) || copied.contains($0.name)) && !filled.contains($0.name) }
        migration.droppedJoinTables = old.joinTables.map(\.name).filter { !newJoins.contains($0) || copied.contains($0) }
        return migration
    }

    /// Why a relationship cannot change as it does, or `nil` when the change keeps its links: the
    /// same kind; to-many ↔ ordered to-many; to-one → to-many (one-to-many becomes many-to-many,
    /// filled from the saved key, or one-to-one becomes one-to-many). Not to-many → to-one (which
    /// could drop links), nor another destination.
    static func kindChange(_ before: ResolvedRelationship, _ now: ResolvedRelationship, renamed: (String) -> String) -> String? {
        let place = "\(now.source.name).\(now.description.name)"
        let was = "\(before.description.kind) of \(before.destination.name)", becomes = "\(now.description.kind) of \(now.destination.name)"
        if renamed(before.destination.name) != now.destination.name {
            return "relationship \(place) changes from \(was) to \(becomes) (another destination)"
        }
        switch (before.description.kind, now.description.kind) {
        case (let a, let b) where a == b: return nil
        case (.toMany, .orderedToMany), (.orderedToMany, .toMany): return nil
        case (.toOne, .toMany), (.toOne, .orderedToMany): return nil
        default: return "relationship \(place) changes from \(was) to \(becomes), which could drop links; migrate it with a transform stage"
        }
    }

    /// The name `relationship` has in the saved entity: its own, or its original name.
    static func savedRelationshipName(_ relationship: RelationshipDescription, in previous: EntityDescription) -> String? {
        [relationship.name, relationship.originalName].compactMap { $0 }.first { previous.relationshipIndex(named: $0) != nil }
    }

    /// Whether every value of type `from` is read back unchanged as a `to`.
    static func widens(_ from: AttributeType, to: AttributeType) -> Bool {
        if from == to { return true }
        let integers: [AttributeType] = [.integer16, .integer32, .integer64]
        if let a = integers.firstIndex(of: from), let b = integers.firstIndex(of: to) { return a <= b }
        return from == .float && to == .double
    }
}
