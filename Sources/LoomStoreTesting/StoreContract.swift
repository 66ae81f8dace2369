import Foundation
@_spi(LoomStore) public import LoomCore

/// What the store contract needs from the store under test: new, empty stores, and a second
/// instance on the same data.
///
/// Conformances live in a store's test target. Calls come from any thread.
public protocol StoreContractSubject: Sendable {
    /// A new, empty store for `schema`.
    func makeStore(schema: Schema) throws -> any PersistentStore
    /// A second instance on the data `store` holds, as a second process would open it (for
    /// SQLite, another `SQLiteStore` on the same file). Throws for a store whose data cannot be
    /// shared (``InMemoryStore``): the checks that need one are not run on it.
    func openAgain(_ store: any PersistentStore, schema: Schema) throws -> any PersistentStore
}

/// A broken promise of the store contract: what was expected, what happened, and where.
public struct StoreContractFailure: Error, CustomStringConvertible {
    public let description: String
}

/// The contract every Loom store keeps, driven through `PersistentStore` alone (no contexts,
/// no coordinator): atomic change sets whose refusal names its conflicts, commit receipts, the
/// write transaction's visibility and rollback, to-many rows in owner then key order, deleted
/// objects leaving their relationships, disjoint keys across instances, and nothing but
/// `closed` after `close()`.
///
/// Each check is a method that throws ``StoreContractFailure`` (or the store's own error) when
/// the store breaks the contract; a store's test target calls each one from a test:
///
/// ```swift
/// @Test func applyIsAtomic() throws { try StoreContract(SQLiteSubject()).applyIsAtomic() }
/// ```
///
/// Its schema is built in code: `Book` (unique `isbn`, `title`, `pages`, an optional to-one
/// `shelf`, a many-to-many `tags`), `Shelf` (`name`, to-many `books`) and `Tag` (`name`);
/// ``hierarchies()`` uses a hierarchy of its own.
public struct StoreContract: Sendable {
    public let subject: any StoreContractSubject
    public let schema: Schema
    let book: EntityDescription
    let shelf: EntityDescription
    let tag: EntityDescription

    public init(_ subject: any StoreContractSubject) throws {
        self.subject = subject
        schema = try Schema([
            EntityDescription(name: "Book", modelType: nil, attributes: [
                AttributeDescription(name: "isbn", type: .string, isOptional: false, isUnique: true),
                AttributeDescription(name: "title", type: .string, isOptional: false),
                AttributeDescription(name: "pages", type: .integer64, isOptional: false),
            ], relationships: [
                RelationshipDescription(name: "shelf", destination: "Shelf", kind: .toOne, inverse: "books"),
                RelationshipDescription(name: "tags", destination: "Tag", kind: .toMany, inverse: "books"),
            ]),
            EntityDescription(name: "Shelf", modelType: nil, attributes: [
                AttributeDescription(name: "name", type: .string, isOptional: false),
            ], relationships: [
                RelationshipDescription(name: "books", destination: "Book", kind: .toMany, inverse: "shelf"),
            ]),
            EntityDescription(name: "Tag", modelType: nil, attributes: [
                AttributeDescription(name: "name", type: .string, isOptional: false),
            ], relationships: [
                RelationshipDescription(name: "books", destination: "Book", kind: .toMany, inverse: "tags"),
            ]),
        ])
        book = try Self.entity("Book", in: schema)
        shelf = try Self.entity("Shelf", in: schema)
        tag = try Self.entity("Tag", in: schema)
    }

    // MARK: Checks

    /// A change set whose later statement fails leaves nothing behind; its refusal names the
    /// conflicts, read inside the failed write; a stale version is refused the same way.
    public func applyIsAtomic() throws {
        let store = try subject.makeStore(schema: schema)
        defer { try? store.close() }
        let saved = try insertBook(store, isbn: "1", title: "Saved")
        let keys = try store.allocateKeys(for: book, count: 2)
        var changes = StoreChangeSet()
        changes.inserts.append(.init(entity: book, key: keys.lowerBound, values: bookValues(isbn: "2", title: "New")))
        changes.inserts.append(.init(entity: book, key: keys.lowerBound + 1, values: bookValues(isbn: "1", title: "Duplicate")))
        let error = try refusal { try store.apply(changes) }
        try check(error.code == .uniquenessViolation, "a duplicate unique value is a uniquenessViolation, not \(error.code)")
        try check(error.storeConflicts.count == 1, "one conflict for one duplicate, not \(error.storeConflicts.count)")
        try check(error.storeConflicts.first?.key == keys.lowerBound + 1, "the conflict names the new row")
        try check(error.storeConflicts.first?.persisted?.key == saved, "the conflict carries the saved row it collides with")
        try check(try titles(store) == ["Saved"], "a refused change set leaves nothing behind: \(try titles(store))")

        var stale = StoreChangeSet()
        stale.inserts.append(.init(entity: book, key: keys.lowerBound, values: bookValues(isbn: "2", title: "New")))
        stale.updates.append(.init(entity: book, key: saved, expectedVersion: 7, changes: []))
        let conflict = try refusal { try store.apply(stale) }
        try check(conflict.code == .versionConflict, "a stale version is a versionConflict, not \(conflict.code)")
        try check(conflict.storeConflicts.map(\.kind) == [.version], "one version conflict")
        try check(conflict.storeConflicts.first?.persisted?.version == 1, "the conflict carries the row's current version")
        try check(try titles(store) == ["Saved"], "the insert before the stale update is undone: \(try titles(store))")
    }

    /// Every commit has the next sequence number; a refused one has none; a write transaction is
    /// one commit.
    public func receipts() throws {
        let store = try subject.makeStore(schema: schema)
        defer { try? store.close() }
        try check(store.lastCommitSequence == 0, "a new store has made no commit")
        let key = try store.allocateKeys(for: book, count: 1).lowerBound
        var changes = StoreChangeSet()
        changes.inserts.append(.init(entity: book, key: key, values: bookValues(isbn: "1", title: "A")))
        try check(try store.apply(changes).sequence == 1, "the first commit is 1")
        _ = try refusal { try store.apply(changes) }   // the key is taken
        let (_, receipt) = try store.withWriteTransaction { () }
        try check(receipt.sequence == 2, "a refused change set takes no number: the next commit is 2, not \(receipt.sequence)")
        try check(store.lastCommitSequence == 2, "lastCommitSequence follows the commits")
    }

    /// Inside a write transaction, the thread that holds it sees its writes and a refused change
    /// set undoes only itself; other threads see the writes only once committed.
    public func writeScope() throws {
        let store = try subject.makeStore(schema: schema)
        defer { try? store.close() }
        _ = try insertBook(store, isbn: "1", title: "Before")
        let (inside, receipt) = try store.withWriteTransaction { () throws -> [String] in
            _ = try insertBook(store, isbn: "2", title: "Inside")
            var duplicate = StoreChangeSet()
            duplicate.inserts.append(.init(entity: book, key: try store.allocateKeys(for: book, count: 1).lowerBound, values: bookValues(isbn: "1", title: "Dup")))
            _ = try refusal { try store.apply(duplicate) }
            let outside = try onAnotherThread { try titles(store) }
            try check(outside == ["Before"], "another thread sees only committed rows during the transaction, not \(outside)")
            return try titles(store)
        }
        try check(inside == ["Before", "Inside"], "the transaction's thread sees its own writes, not \(inside)")
        try check(receipt.sequence == 2, "the transaction is one commit (2), not \(receipt.sequence)")
        let after = try onAnotherThread { try titles(store) }
        try check(after == ["Before", "Inside"], "the commit is visible to other threads: \(after)")
    }

    /// A write transaction whose body throws writes nothing, takes no commit number and
    /// rethrows the body's error unchanged.
    public func writeScopeRollsBack() throws {
        struct Stop: Error {}
        let store = try subject.makeStore(schema: schema)
        defer { try? store.close() }
        _ = try insertBook(store, isbn: "1", title: "Kept")
        do {
            _ = try store.withWriteTransaction { () throws in
                _ = try insertBook(store, isbn: "2", title: "Dropped")
                throw Stop()
            }
            throw StoreContractFailure(description: "a write transaction whose body throws must throw")
        } catch is Stop {
        }
        try check(try titles(store) == ["Kept"], "a rolled-back transaction writes nothing: \(try titles(store))")
        try check(store.lastCommitSequence == 1, "a rolled-back transaction takes no commit number")
        _ = try insertBook(store, isbn: "3", title: "After")
        try check(try titles(store) == ["Kept", "After"], "the store writes again after a rollback: \(try titles(store))")
    }

    /// The rows of a to-many relationship (by foreign key and through a join table) come in
    /// owner then key order, whatever order the keys were asked and the rows were written in; a
    /// deleted object is no longer among them.
    public func relatedRows() throws {
        let store = try subject.makeStore(schema: schema)
        defer { try? store.close() }
        let shelves = try store.allocateKeys(for: shelf, count: 2)
        let tags = try store.allocateKeys(for: tag, count: 2)
        let books = try store.allocateKeys(for: book, count: 4)
        let (s1, s2) = (shelves.lowerBound, shelves.lowerBound + 1)
        let (t1, t2) = (tags.lowerBound, tags.lowerBound + 1)
        var changes = StoreChangeSet()
        for key in [s1, s2] { changes.inserts.append(.init(entity: shelf, key: key, values: named(shelf, "shelf \(key)"))) }
        for key in [t1, t2] { changes.inserts.append(.init(entity: tag, key: key, values: named(tag, "tag \(key)"))) }
        // Written in descending key order, alternating shelves.
        for (i, key) in books.reversed().enumerated() {
            changes.inserts.append(.init(entity: book, key: key, values: bookValues(isbn: "\(key)", title: "b\(key)", shelf: i % 2 == 0 ? s2 : s1)))
        }
        let joinTable = try requireJoinTable()
        for key in books.reversed() {
            changes.linkInserts.append(.init(table: joinTable, source: joinTable.sourceEntityName == "Book" ? key : t2, target: joinTable.sourceEntityName == "Book" ? t2 : key))
        }
        try store.apply(changes)

        let shelfBooks = try relationship("books", of: shelf)
        let byShelf = try store.fetchRelated(shelfBooks, keys: [s2, s1]).map { [$0.owner, $0.row.key] }
        let expectedByShelf = [s1, s2].flatMap { owner in
            books.reversed().enumerated().filter { ($0.offset % 2 == 0 ? s2 : s1) == owner }.map(\.element).sorted().map { [owner, $0] }
        }
        try check(byShelf == expectedByShelf, "to-many rows by foreign key in owner then key order: \(byShelf), expected \(expectedByShelf)")

        let tagBooks = try relationship("books", of: tag)
        let byTag = try store.fetchRelated(tagBooks, keys: [t2, t1]).map { [$0.owner, $0.row.key] }
        try check(byTag == books.map { [t2, $0] }, "to-many rows through a join table in owner then key order: \(byTag)")

        // A deleted book leaves its relationships.
        var delete = StoreChangeSet()
        delete.deletes.append(.init(entity: book, key: books.lowerBound, expectedVersion: 1))
        try store.apply(delete)
        let remaining = try store.fetchRelated(tagBooks, keys: [t2]).map(\.row.key)
        try check(remaining == Array(books.dropFirst()), "a deleted object is no longer a related row: \(remaining)")
    }

    /// A hierarchy (`Item` with sub-entities `Gadget` and `Widget`, a table each): its entities
    /// share one key space; a relationship to the parent, read narrowed to one concrete entity
    /// (as contexts read it), gives that table's rows whole, and read whole gives every table's,
    /// in owner then key order, by foreign key and through the parent's join table; a uniqueness
    /// constraint declared on the parent holds across the tables (a refusal names the other
    /// row and its entity, and leaves the store unchanged), counting the change set's result, so
    /// a value freed by a delete may be taken in the same change set; a deleted sub-entity's
    /// object leaves its relationships.
    public func hierarchies() throws {
        let schema = try Self.hierarchySchema()
        let (item, gadget, widget) = (try Self.entity("Item", in: schema), try Self.entity("Gadget", in: schema), try Self.entity("Widget", in: schema))
        let (bin, label) = (try Self.entity("Bin", in: schema), try Self.entity("Label", in: schema))
        let store = try subject.makeStore(schema: schema)
        defer { try? store.close() }
        var reserved: [Int64] = []
        for _ in 0..<3 {
            for entity in [item, gadget, widget] { reserved += try store.allocateKeys(for: entity, count: 2) }
        }
        try check(Set(reserved).count == reserved.count, "the entities of a hierarchy share one key space: \(reserved)")

        func values(_ entity: EntityDescription, _ named: [String: StoredValue]) -> [StoredValue] {
            var values = [StoredValue](repeating: .null, count: entity.storedValueCount)
            for (name, value) in named { if let slot = entity.storedValueIndex(named: name) { values[slot] = value } }
            return values
        }
        let b1 = try store.allocateKeys(for: bin, count: 1).lowerBound, b2 = try store.allocateKeys(for: bin, count: 1).lowerBound
        let l1 = try store.allocateKeys(for: label, count: 1).lowerBound
        let i1 = try store.allocateKeys(for: item, count: 1).lowerBound, g1 = try store.allocateKeys(for: gadget, count: 1).lowerBound
        let g2 = try store.allocateKeys(for: gadget, count: 1).lowerBound, w1 = try store.allocateKeys(for: widget, count: 1).lowerBound
        var setUp = StoreChangeSet()
        setUp.inserts.append(.init(entity: bin, key: b1, values: named(bin, "b1")))
        setUp.inserts.append(.init(entity: bin, key: b2, values: named(bin, "b2")))
        setUp.inserts.append(.init(entity: label, key: l1, values: named(label, "l1")))
        setUp.inserts.append(.init(entity: widget, key: w1, values: values(widget, ["code": .text("W1"), "name": .text("w"), "size": .integer(3), "bin": .integer(b1)])))
        setUp.inserts.append(.init(entity: gadget, key: g2, values: values(gadget, ["code": .text("G2"), "name": .text("g"), "volts": .integer(12), "bin": .integer(b1)])))
        setUp.inserts.append(.init(entity: gadget, key: g1, values: values(gadget, ["code": .text("G1"), "name": .text("g"), "volts": .integer(5), "bin": .integer(b2)])))
        setUp.inserts.append(.init(entity: item, key: i1, values: values(item, ["code": .text("I1"), "name": .text("i"), "bin": .integer(b1)])))
        guard let joinTable = schema.joinTables(involving: item).first?.table else { throw StoreContractFailure(description: "Item.labels has no join table") }
        for key in [w1, g1, i1] {
            setUp.linkInserts.append(.init(table: joinTable, source: joinTable.sourceEntityName == "Label" ? l1 : key, target: joinTable.sourceEntityName == "Label" ? key : l1))
        }
        try store.apply(setUp)

        // Narrowed to each concrete entity: that table's rows, whole.
        let binItems = try Self.relationship("items", of: bin, in: schema), labelItems = try Self.relationship("items", of: label, in: schema)
        try check(binItems.leadsToSubentities && labelItems.leadsToSubentities, "Bin.items and Label.items lead to a parent with sub-entities")
        let expectedByEntity: [String: [[Int64]]] = ["Item": [[b1, i1]], "Gadget": [[b1, g2], [b2, g1]], "Widget": [[b1, w1]]]
        for narrowed in binItems.concreteDestinations(in: schema) {
            let rows = try store.fetchRelated(narrowed, keys: [b2, b1])
            let name = narrowed.destination.name
            try check(rows.map { [$0.owner, $0.row.key] } == expectedByEntity[name], "Bin.items narrowed to \(name): \(rows.map { [$0.owner, $0.row.key] }), expected \(expectedByEntity[name] ?? [])")
            try check(rows.allSatisfy { $0.row.values.count == narrowed.destination.storedValueCount }, "Bin.items narrowed to \(name) reads whole rows of \(name): \(rows)")
        }
        let voltsSlot = try requireSlot("volts", of: gadget)
        let gadgets = try store.fetchRelated(binItems.narrowed(to: gadget), keys: [b1, b2]).map(\.row.values[voltsSlot])
        try check(gadgets == [.integer(12), .integer(5)], "a sub-entity's own attribute comes with its rows: \(gadgets)")
        let whole = try store.fetchRelated(binItems, keys: [b1, b2]).map { [$0.owner, $0.row.key] }
        let expectedWhole = [[b1, i1], [b1, g2], [b1, w1]].sorted { $0[1] < $1[1] } + [[b2, g1]]
        try check(whole == expectedWhole, "Bin.items read whole: every table's rows in owner then key order, \(whole), expected \(expectedWhole)")
        let labelled = try store.fetchRelated(labelItems, keys: [l1]).map(\.row.key)
        try check(labelled == [i1, g1, w1].sorted(), "Label.items through the parent's join table, whole: \(labelled)")
        let labelledGadgets = try store.fetchRelated(labelItems.narrowed(to: gadget), keys: [l1]).map(\.row.key)
        try check(labelledGadgets == [g1], "Label.items narrowed to Gadget: \(labelledGadgets)")

        // Uniqueness across the tables.
        func counts() throws -> [Int] { try [item, gadget, widget].map { try store.count(StoreQuery(entity: $0)) } }
        let before = try counts()
        let taken = try store.allocateKeys(for: widget, count: 1).lowerBound
        var duplicate = StoreChangeSet()
        duplicate.inserts.append(.init(entity: widget, key: taken, values: values(widget, ["code": .text("G1"), "name": .text("dup"), "size": .integer(1)])))
        let refused = try refusal { try store.apply(duplicate) }
        try check(refused.code == .uniquenessViolation, "a code taken in another table of the hierarchy is a uniquenessViolation, not \(refused.code)")
        let conflict = refused.storeConflicts.first
        try check(refused.storeConflicts.count == 1 && conflict?.key == taken && conflict?.entity === widget, "the conflict names the new Widget: \(refused.storeConflicts)")
        try check(conflict?.persisted?.key == g1 && conflict?.persistedEntity === gadget, "the conflict carries the Gadget it collides with: \(refused.storeConflicts)")
        try check(try counts() == before, "a refused change set leaves every table unchanged")
        let (newItem, newGadget) = (try store.allocateKeys(for: item, count: 1).lowerBound, try store.allocateKeys(for: gadget, count: 1).lowerBound)
        var twins = StoreChangeSet()
        twins.inserts.append(.init(entity: item, key: newItem, values: values(item, ["code": .text("X"), "name": .text("x")])))
        twins.inserts.append(.init(entity: gadget, key: newGadget, values: values(gadget, ["code": .text("X"), "name": .text("x"), "volts": .integer(1)])))
        try check(try refusal { try store.apply(twins) }.code == .uniquenessViolation, "two new objects of two tables with one code are refused")
        try check(try counts() == before, "the refused pair leaves nothing behind")
        var update = StoreChangeSet()
        update.updates.append(.init(entity: widget, key: w1, expectedVersion: 1, changes: [(try requireSlot("code", of: widget), .text("I1"))]))
        let updated = try refusal { try store.apply(update) }
        try check(updated.code == .uniquenessViolation && updated.storeConflicts.first?.persisted?.key == i1 && updated.storeConflicts.first?.persistedEntity === item,
                  "an update to the parent's code is refused, naming it: \(updated.code) \(updated.storeConflicts)")
        var freed = StoreChangeSet()
        freed.deletes.append(.init(entity: gadget, key: g1, expectedVersion: 1))
        freed.inserts.append(.init(entity: widget, key: taken, values: values(widget, ["code": .text("G1"), "name": .text("moved"), "size": .integer(1), "bin": .integer(b2)])))
        try store.apply(freed)
        let b2Items = try store.fetchRelated(binItems, keys: [b2]).map(\.row.key)
        try check(b2Items == [taken], "a code freed by a delete is taken by another table's object in the same change set: \(b2Items)")

        // A deleted sub-entity's object leaves its relationships.
        var delete = StoreChangeSet()
        delete.deletes.append(.init(entity: widget, key: w1, expectedVersion: 1))
        try store.apply(delete)
        let b1Items = try store.fetchRelated(binItems, keys: [b1]).map(\.row.key)
        let l1Items = try store.fetchRelated(labelItems, keys: [l1]).map(\.row.key)
        try check(b1Items == [i1, g2].sorted() && l1Items == [i1], "a deleted Widget is no longer related: \(b1Items), \(l1Items)")
    }

    /// The hierarchy ``hierarchies()`` checks: `Item` (`code`, unique across the hierarchy;
    /// `name`; a to-one `bin`; a many-to-many `labels`), its sub-entities `Gadget` (`volts`) and
    /// `Widget` (`size`), and `Bin` and `Label`, whose to-manys lead to `Item`.
    static func hierarchySchema() throws -> Schema {
        let item = EntityDescription(name: "Item", modelType: nil, attributes: [
            AttributeDescription(name: "code", type: .string, isOptional: false, isUnique: true),
            AttributeDescription(name: "name", type: .string, isOptional: false),
        ], relationships: [
            RelationshipDescription(name: "bin", destination: "Bin", kind: .toOne, inverse: "items"),
            RelationshipDescription(name: "labels", destination: "Label", kind: .toMany, inverse: "items"),
        ])
        return try Schema([
            item,
            EntityDescription(name: "Gadget", modelType: nil, attributes: [AttributeDescription(name: "volts", type: .integer64, isOptional: false)], superentity: item),
            EntityDescription(name: "Widget", modelType: nil, attributes: [AttributeDescription(name: "size", type: .integer64, isOptional: false)], superentity: item),
            EntityDescription(name: "Bin", modelType: nil, attributes: [AttributeDescription(name: "name", type: .string, isOptional: false)], relationships: [
                RelationshipDescription(name: "items", destination: "Item", kind: .toMany, inverse: "bin"),
            ]),
            EntityDescription(name: "Label", modelType: nil, attributes: [AttributeDescription(name: "name", type: .string, isOptional: false)], relationships: [
                RelationshipDescription(name: "items", destination: "Item", kind: .toMany, inverse: "labels"),
            ]),
        ])
    }

    /// After `close()`, every call throws `closed`; nothing traps.
    public func callsAfterClose() throws {
        let store = try subject.makeStore(schema: schema)
        let key = try insertBook(store, isbn: "1", title: "A")
        try store.close()
        func expectClosed(_ name: String, _ call: () throws -> Void) throws {
            do {
                try call()
                throw StoreContractFailure(description: "\(name) after close() must throw closed, it succeeded")
            } catch let error as LoomError {
                try check(error.code == .closed, "\(name) after close() throws closed, not \(error.code): \(error)")
            }
        }
        try expectClosed("fetch") { _ = try store.fetch(StoreQuery(entity: book)) }
        try expectClosed("count") { _ = try store.count(StoreQuery(entity: book)) }
        try expectClosed("rows(of:keys:)") { _ = try store.rows(of: book, keys: [key]) }
        try expectClosed("row(of:key:)") { _ = try store.row(of: book, key: key) }
        try expectClosed("fetchRelated") { _ = try store.fetchRelated(try relationship("books", of: shelf), keys: [1]) }
        try expectClosed("allocateKeys") { _ = try store.allocateKeys(for: book, count: 1) }
        try expectClosed("apply") {
            var changes = StoreChangeSet()
            changes.deletes.append(.init(entity: book, key: key, expectedVersion: 1))
            try store.apply(changes)
        }
        try expectClosed("withWriteTransaction") { _ = try store.withWriteTransaction { () } }
    }

    /// For stores that keep snapshots (query generations): a snapshot answers every read —
    /// rows, counts, keys, related rows, aggregates — as of its opening while change sets
    /// commit, including for deleted rows; closed, it throws `closed`; the store's own reads see
    /// the latest data. A store that keeps none throws `queryGenerationUnavailable` from
    /// `openSnapshot()`, which passes.
    /// A fetch that skips known values returns every row with its key and version, the rows
    /// the caller does not know (at that version) whole, and the known ones without values (or,
    /// for a store that does not skip, `skips` false, whole), on the store and on a snapshot.
    public func fetchSkippingKnownValues(skips: Bool = true) throws {
        let store = try subject.makeStore(schema: schema)
        defer { try? store.close() }
        for i in 0..<3 { _ = try insertBook(store, isbn: "\(i)", title: "book \(i)") }
        let query = StoreQuery(entity: book)
        let all = try store.fetch(query).sorted { $0.key < $1.key }
        try check(all.count == 3 && all.allSatisfy { $0.values.count == book.storedValueCount }, "three whole rows, fetched \(all)")
        // The first row known at its version, the second at another one: only the first is skipped.
        let (known, stale) = (all[0], all[1])
        func isKnown(_ key: Int64, _ version: Int64) -> Bool {
            (key == known.key && version == known.version) || (key == stale.key && version == stale.version + 1)
        }
        var readers: [(String, any StoreReading)] = [("the store", store)]
        let snapshot = try openedSnapshot(of: store)
        defer { snapshot?.close() }
        if let snapshot { readers.append(("a snapshot", snapshot)) }
        for (name, reader) in readers {
            let rows = try reader.fetch(query, skippingValuesOf: isKnown).sorted { $0.key < $1.key }
            try check(rows.map(\.key) == all.map(\.key) && rows.map(\.version) == all.map(\.version), "\(name): every row with its key and version, read \(rows)")
            try check(skips ? rows[0].values.isEmpty : rows[0].values == all[0].values, "\(name): the known row's values \(skips ? "left out" : "whole"), read \(rows[0])")
            try check(rows[1].values == all[1].values && rows[2].values == all[2].values, "\(name): the other rows whole, read \(rows)")
        }
    }

    public func snapshots() throws {
        let store = try subject.makeStore(schema: schema)
        defer { try? store.close() }
        let shelfKey = try store.allocateKeys(for: shelf, count: 1).lowerBound
        var setUp = StoreChangeSet()
        setUp.inserts.append(.init(entity: shelf, key: shelfKey, values: named(shelf, "S")))
        let bookKeys = try store.allocateKeys(for: book, count: 3)
        for key in bookKeys { setUp.inserts.append(.init(entity: book, key: key, values: bookValues(isbn: "\(key)", title: "old \(key)", pages: 10, shelf: shelfKey))) }
        try store.apply(setUp)
        guard let snapshot = try openedSnapshot(of: store) else { return }
        let shelfBooks = try relationship("books", of: shelf)
        let pagesSlot = try requireSlot("pages", of: book)
        @Sendable func view(_ reader: any StoreReading) throws -> [String] {
            let rows = try reader.fetch(StoreQuery(entity: book)).map { "\($0.key) v\($0.version)" }
            let related = try reader.fetchRelated(shelfBooks, keys: [shelfKey]).map { "\($0.row.key)" }
            let sum = try reader.aggregate(AggregateQuery(entity: book, columns: [.aggregate(.sum, .attribute(pagesSlot))]))
            return rows + ["count \(try reader.count(StoreQuery(entity: book)))", "keys \(try reader.fetchKeys(StoreQuery(entity: book)))",
                           "related \(related)", "sum \(sum)", "by key \(try reader.rows(of: book, keys: [bookKeys.lowerBound]).map(\.key))",
                           "one by key \(try reader.row(of: book, key: bookKeys.lowerBound).map { "\($0.key) v\($0.version)" } ?? "none")"]
        }
        let before = try view(snapshot)
        var change = StoreChangeSet()
        change.deletes.append(.init(entity: book, key: bookKeys.lowerBound, expectedVersion: 1))
        change.updates.append(.init(entity: book, key: bookKeys.lowerBound + 1, expectedVersion: 1, changes: [(pagesSlot, .integer(99))]))
        let added = try store.allocateKeys(for: book, count: 1).lowerBound
        change.inserts.append(.init(entity: book, key: added, values: bookValues(isbn: "new", title: "new", pages: 1, shelf: shelfKey)))
        try store.apply(change)
        try check(try view(snapshot) == before, "a snapshot reads as of its opening after a commit: \(try view(snapshot)), expected \(before)")
        try check(try onAnotherThread { try view(snapshot) } == before, "a snapshot reads the same from another thread")
        let latest = try view(store)
        try check(latest != before && latest.contains("count 3") && !latest.contains("\(bookKeys.lowerBound) v1"), "the store itself reads the latest data: \(latest)")
        snapshot.close()
        let closed = Result { () throws(LoomError) -> Int in try snapshot.count(StoreQuery(entity: book)) }
        guard case .failure(let error) = closed else { throw StoreContractFailure(description: "a closed snapshot must throw closed, it read") }
        try check(error.code == .closed, "a closed snapshot throws closed, not \(error.code)")
    }

    /// A snapshot of `store`, or nil for a store that keeps none (`queryGenerationUnavailable`).
    func openedSnapshot(of store: any PersistentStore) throws -> (any StoreSnapshot)? {
        switch Result(catching: { () throws(LoomError) -> any StoreSnapshot in try store.openSnapshot() }) {
        case .success(let snapshot): return snapshot
        case .failure(let error) where error.code == .queryGenerationUnavailable: return nil
        case .failure(let error): throw error
        }
    }

    /// Two instances on the same data reserve disjoint keys, even at once.
    public func disjointKeys() async throws {
        let first = try subject.makeStore(schema: schema)
        let stores = [first, try subject.openAgain(first, schema: schema)]
        defer { for store in stores { try? store.close() } }
        let book = self.book
        let ranges = try await withThrowingTaskGroup(of: [Range<Int64>].self) { group in
            for store in stores {
                group.addTask { try (0..<50).map { _ in try store.allocateKeys(for: book, count: 7) } }
            }
            var all: [Range<Int64>] = []
            for try await part in group { all += part }
            return all
        }
        let keys = ranges.flatMap { Array($0) }
        try check(keys.count == 2 * 50 * 7, "every reservation has the count asked")
        try check(Set(keys).count == keys.count, "no key is handed out twice across instances")
    }

    /// For stores that keep history: every applied change set is one transaction, in commit
    /// order, with its author and context, each object inserted, updated (with the changed
    /// properties, to-many sides included) or deleted (with its tombstone); a refused change set
    /// records nothing; purged history is `historyTokenExpired`, another store's token
    /// `historyTokenForeignStore`, a token past the last transaction `historyTokenAhead`; a
    /// change set that continues the history transaction before it is recorded with it.
    public func history() throws {
        let store = try subject.makeStore(schema: schema)
        defer { try? store.close() }
        let start = try store.currentHistoryToken()
        let shelfKey = try store.allocateKeys(for: shelf, count: 1).lowerBound
        let tagKey = try store.allocateKeys(for: tag, count: 1).lowerBound
        let bookKey = try store.allocateKeys(for: book, count: 1).lowerBound
        var first = StoreChangeSet()
        first.author = "contract"
        first.contextName = "first"
        first.inserts = [
            .init(entity: shelf, key: shelfKey, values: named(shelf, "S")),
            .init(entity: tag, key: tagKey, values: named(tag, "T")),
            .init(entity: book, key: bookKey, values: bookValues(isbn: "1", title: "A")),
        ]
        try store.apply(first)
        var second = StoreChangeSet()
        let titleSlot = try requireSlot("title", of: book), shelfSlot = try requireSlot("shelf", of: book)
        second.updates = [.init(entity: book, key: bookKey, expectedVersion: 1, changes: [(titleSlot, .text("B")), (shelfSlot, .integer(shelfKey))])]
        second.relationshipOwners = [(shelf, shelfKey, ["books"])]
        second.linkInserts = [.init(table: try requireJoinTable(), source: bookKey, target: tagKey)]
        try store.apply(second)
        _ = try refusal { try store.apply(second) }   // stale: records nothing
        var third = StoreChangeSet()
        third.deletes = [.init(entity: tag, key: tagKey, expectedVersion: 1, tombstone: [(0, .text("T"))])]
        try store.apply(third)

        let all = try store.fetchHistory(HistoryDescriptor(after: start))
        try check(all.count == 3, "three applied change sets are three transactions, not \(all.count)")
        try check(zip(all, all.dropFirst()).allSatisfy { $0.token < $1.token }, "transactions come in commit order")
        try check(all.first?.author == "contract" && all.first?.contextName == "first", "a transaction keeps its author and context")
        func described(_ t: HistoryTransaction) -> [String] { t.changes.map(\.description).sorted() }
        try check(described(all[0]) == ["+ Book/\(bookKey)", "+ Shelf/\(shelfKey)", "+ Tag/\(tagKey)"], "inserts: \(described(all[0]))")
        try check(described(all[1]) == ["~ Book/\(bookKey) (shelf, tags, title)", "~ Shelf/\(shelfKey) (books)", "~ Tag/\(tagKey) (books)"], "updates, to-many sides included: \(described(all[1]))")
        try check(described(all[2]) == [#"- Tag/\#(tagKey) {name: "T"}"#], "a delete with its tombstone: \(described(all[2]))")
        try check(try store.currentHistoryToken() == all.last?.token, "currentHistoryToken is the last transaction's")
        try check(try store.fetchHistory(HistoryDescriptor(after: all[0].token, authors: ["contract"])).isEmpty, "only the first has the author")
        try check(try store.fetchHistory(HistoryDescriptor(entityNames: ["Shelf"])).map(\.token) == [all[0].token, all[1].token], "by entity")

        try store.deleteHistory(through: all[1].token)
        let expired = try refusal { _ = try store.fetchHistory(HistoryDescriptor(after: all[0].token)) }
        try check(expired.code == .historyTokenExpired, "a purged token is historyTokenExpired, not \(expired.code)")
        try check(try store.fetchHistory(HistoryDescriptor(after: all[1].token)).map(\.token) == [all[2].token], "after the purge, the rest is read")
        let foreign = try refusal { _ = try store.fetchHistory(HistoryDescriptor(after: HistoryToken(storeIdentifier: UUID(), transactionNumber: 1))) }
        try check(foreign.code == .historyTokenForeignStore, "another store's token is historyTokenForeignStore, not \(foreign.code)")
        let ahead = try refusal { _ = try store.fetchHistory(HistoryDescriptor(after: HistoryToken(storeIdentifier: store.identifier, transactionNumber: all[2].token.transactionNumber + 1))) }
        try check(ahead.code == .historyTokenAhead, "a token past the last transaction is historyTokenAhead, not \(ahead.code)")

        // A change set continuing the history transaction of the one before it in the same write
        // transaction (a batch request's chunks) is recorded with it, as one transaction.
        let before = try store.currentHistoryToken()
        let tagKeys = try store.allocateKeys(for: tag, count: 2)
        _ = try store.withWriteTransaction {
            var first = StoreChangeSet()
            first.inserts = [.init(entity: tag, key: tagKeys.lowerBound, values: named(tag, "U"))]
            try store.apply(first)
            var next = StoreChangeSet()
            next.inserts = [.init(entity: tag, key: tagKeys.lowerBound + 1, values: named(tag, "V"))]
            next.continuesHistoryTransaction = true
            try store.apply(next)
        }
        let joined = try store.fetchHistory(HistoryDescriptor(after: before))
        try check(joined.count == 1, "a continuing change set joins its transaction: \(joined.count) transactions")
        try check(joined.first.map(described) == ["+ Tag/\(tagKeys.lowerBound)", "+ Tag/\(tagKeys.lowerBound + 1)"], "both change sets' changes: \(joined.first.map(described) ?? [])")
    }

    /// For stores that keep history, with two instances on one data: each tells its observer
    /// what the other commits, once, in commit order, and never its own commits.
    public func remoteCommits() async throws {
        let first = try subject.makeStore(schema: schema)
        let second = try subject.openAgain(first, schema: schema)
        defer { for store in [first, second] { try? store.close() } }
        let (stream, continuation) = AsyncStream<RemoteCommits>.makeStream()
        first.observeRemoteCommits { continuation.yield($0) }
        _ = try insertBook(first, isbn: "own", title: "Own")
        var theirs: [Int64] = []
        for i in 0..<5 { theirs.append(try insertBook(second, isbn: "\(i)", title: "Theirs \(i)")) }
        var seen: [Int64] = []
        // Generous: a loaded machine may run nothing of this process for a while. The stream
        // ends at the deadline even if no commit is ever reported.
        let deadline = Task {
            try? await Task.sleep(for: .seconds(60))
            continuation.finish()
        }
        defer { deadline.cancel() }
        for await commits in stream {
            guard case .committed(let list) = commits else { throw StoreContractFailure(description: "history was reported lost") }
            seen += list.flatMap { $0.transaction.changes.map(\.objectID.primaryKey) }
            if seen.count >= theirs.count { break }
        }
        continuation.finish()
        try check(seen == theirs, "the other instance's commits, once and in order, and none of this one's: \(seen), not \(theirs)")
    }

    // MARK: Helpers

    func requireSlot(_ name: String, of entity: EntityDescription) throws -> Int {
        guard let slot = entity.storedValueIndex(named: name) else { throw StoreContractFailure(description: "\(entity.name) has no \(name)") }
        return slot
    }

    static func entity(_ name: String, in schema: Schema) throws -> EntityDescription {
        guard let entity = schema.entity(named: name) else { throw StoreContractFailure(description: "the contract schema has no \(name)") }
        return entity
    }

    func relationship(_ name: String, of entity: EntityDescription) throws -> ResolvedRelationship {
        try Self.relationship(name, of: entity, in: schema)
    }

    static func relationship(_ name: String, of entity: EntityDescription, in schema: Schema) throws -> ResolvedRelationship {
        guard let index = entity.relationshipIndex(named: name) else {
            throw StoreContractFailure(description: "the contract schema has no \(entity.name).\(name)")
        }
        return schema.relationship(index, of: entity)
    }

    func requireJoinTable() throws -> JoinTable {
        guard let table = schema.joinTables(involving: book).first?.table else {
            throw StoreContractFailure(description: "Book.tags has no join table")
        }
        return table
    }

    /// A new Book row's values, in slot order.
    func bookValues(isbn: String, title: String, pages: Int = 0, shelf: Int64? = nil) -> [StoredValue] {
        var values = [StoredValue](repeating: .null, count: book.storedValueCount)
        if let slot = book.storedValueIndex(named: "isbn") { values[slot] = .text(isbn) }
        if let slot = book.storedValueIndex(named: "title") { values[slot] = .text(title) }
        if let slot = book.storedValueIndex(named: "pages") { values[slot] = .integer(Int64(pages)) }
        if let shelf, let slot = book.storedValueIndex(named: "shelf") { values[slot] = .integer(shelf) }
        return values
    }

    func named(_ entity: EntityDescription, _ name: String) -> [StoredValue] {
        var values = [StoredValue](repeating: .null, count: entity.storedValueCount)
        if let slot = entity.storedValueIndex(named: "name") { values[slot] = .text(name) }
        return values
    }

    func insertBook(_ store: any PersistentStore, isbn: String, title: String) throws -> Int64 {
        let key = try store.allocateKeys(for: book, count: 1).lowerBound
        var changes = StoreChangeSet()
        changes.inserts.append(.init(entity: book, key: key, values: bookValues(isbn: isbn, title: title)))
        try store.apply(changes)
        return key
    }

    /// The titles of every Book, in key order.
    func titles(_ store: any PersistentStore) throws -> [String] {
        guard let slot = book.storedValueIndex(named: "title") else { return [] }
        return try store.fetch(StoreQuery(entity: book)).sorted { $0.key < $1.key }.map { row in
            if case .text(let title) = row.values[slot] { title } else { "?" }
        }
    }

    /// The LoomError `body` throws; a failure if it throws none.
    func refusal(_ body: () throws -> Void) throws -> LoomError {
        do {
            try body()
        } catch let error as LoomError {
            return error
        }
        throw StoreContractFailure(description: "the store accepted a change set it must refuse")
    }

    func check(_ condition: Bool, _ message: @autoclosure () throws -> String, line: UInt = #line) throws {
        if !condition { throw StoreContractFailure(description: "StoreContract.swift:\(line): \(try message())") }
    }

    /// Runs `body` on a thread of its own and waits for it: how another connection reads.
    func onAnotherThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) throws -> T {
        let box = ResultBox<T>()
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            box.result = Result { try body() }
            done.signal()
        }
        done.wait()
        return try box.result!.get()
    }
}

/// A result handed from one thread to another. `@unchecked Sendable`: written by the thread
/// before it signals, read by the waiter after the signal.
private final class ResultBox<T>: @unchecked Sendable {
    var result: Result<T, any Error>?
}
