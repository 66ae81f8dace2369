@_spi(LoomStore) package import LoomCore

/// How a change set becomes statements, the same for every SQL store: their order, each one's
/// text in the store's dialect, what it binds, and which must change exactly one row.
///
/// The order is deletes (each with its join-table rows), updates, inserts, removed links, added
/// links: a unique value that a deleted or updated row gives up can be taken by a new row of the
/// same save, and a link is added only once both of its rows exist.
extension SQLGenerator {
    /// One statement of a change set: what it binds, as positions in the change set's arrays.
    package enum ChangeStep: Equatable, Sendable {
        /// `deletes[i]`: binds its key, then the version expected. Must delete one row.
        case delete(Int)
        /// The join-table rows of `deletes[i]`'s object in one table: binds its key.
        case deleteLinks(Int)
        /// `deletes[range]`, all of one entity and at most ``SQLGenerator/keysPerDelete``, by key
        /// alone (the set's versions were read in the transaction it is applied in,
        /// ``StoreChangeSet/versionsReadInTransaction``): binds ``SQLGenerator/keysPerDelete``
        /// keys, the range's, then its last key again. Must delete `range.count` rows.
        case deleteKeys(Range<Int>)
        /// The join-table rows of `deletes[range]`'s objects in one table, bound as `deleteKeys`.
        case deleteLinksOfKeys(Range<Int>)
        /// `updates[i]`: binds the changed values in order, then the key, then the version
        /// expected. Must update one row.
        case update(Int)
        /// `inserts[range]`, all of one entity: the statement runs once per row, binding its key,
        /// then its values in slot order.
        case insert(Range<Int>)
        /// `linkDeletes[i]` and `linkInserts[i]`: bind the source key, then the target key.
        case deleteLink(Int)
        case insertLink(Int)

        /// The row the statement must change, for a delete or an update: if it changes none,
        /// that row was changed or deleted since it was read (a version conflict). `nil` for a
        /// statement that may change any number of rows.
        package func rowThatMustChange(in changes: StoreChangeSet) -> (entity: EntityDescription, key: Int64)? {
            switch self {
            case .delete(let i): (changes.deletes[i].entity, changes.deletes[i].key)
            case .update(let i): (changes.updates[i].entity, changes.updates[i].key)
            case .deleteLinks, .deleteKeys, .deleteLinksOfKeys, .insert, .deleteLink, .insertLink: nil
            }
        }

        /// The number of rows a delete by keys must delete: fewer means one of its rows was
        /// deleted since it was read (a conflict, or a key given twice). `nil` for other steps.
        package var rowsThatMustChange: Int? {
            if case .deleteKeys(let range) = self { return range.count }
            return nil
        }
    }

    /// A statement's text and what it binds.
    package struct ChangeStatement: Equatable, Sendable {
        package let sql: String
        package let step: ChangeStep
    }

    /// The statements that apply `changes`, in the order to run them. Statements of the same
    /// shape (an entity's inserts, updates of the same columns) share one text, so a store's
    /// statement cache prepares each shape once per save.
    package func statements(for changes: StoreChangeSet) -> [ChangeStatement] {
        var out: [ChangeStatement] = []
        forEachStatement(of: changes) { out.append($0) }
        return out
    }

    /// Calls `body` with each statement that applies `changes`, in order, without collecting
    /// them (a one-object save stays free of the extra allocation); stops at its first error.
    package func forEachStatement<E: Error>(of changes: StoreChangeSet, _ body: (ChangeStatement) throws(E) -> Void) throws(E) {
        if changes.versionsReadInTransaction {
            try forEachDeleteByKeys(of: changes, body)
        } else {
            try forEachDelete(of: changes, body)
        }
        // Most saves change the same few columns of an entity: one text per shape.
        var updateTexts: [UpdateShape: String] = [:]
        for (i, update) in changes.updates.enumerated() {
            let columns = update.changes.map(\.index)
            let shape = UpdateShape(entity: ObjectIdentifier(update.entity), columns: columns)
            let text: String
            if let known = updateTexts[shape] {
                text = known
            } else {
                text = self.update(update.entity, columns: columns)
                updateTexts[shape] = text
            }
            try body(ChangeStatement(sql: text, step: .update(i)))
        }
        var start = 0
        while start < changes.inserts.count {
            let entity = changes.inserts[start].entity
            var end = start + 1
            while end < changes.inserts.count, changes.inserts[end].entity === entity { end += 1 }
            try body(ChangeStatement(sql: insert(entity), step: .insert(start..<end)))
            start = end
        }
        for (i, link) in changes.linkDeletes.enumerated() {
            try body(ChangeStatement(sql: deleteLink(link.table), step: .deleteLink(i)))
        }
        for (i, link) in changes.linkInserts.enumerated() {
            try body(ChangeStatement(sql: insertLink(link.table), step: .insertLink(i)))
        }
    }

    /// One DELETE per row, each checking the version the row was read at.
    private func forEachDelete<E: Error>(of changes: StoreChangeSet, _ body: (ChangeStatement) throws(E) -> Void) throws(E) {
        // A batch deletes many rows of few entities: their texts are looked up once per run.
        var deleteTexts: (entity: ObjectIdentifier, delete: String, links: [String])?
        for (i, delete) in changes.deletes.enumerated() {
            if deleteTexts?.entity != ObjectIdentifier(delete.entity) {
                deleteTexts = (ObjectIdentifier(delete.entity), self.delete(delete.entity),
                               schema.joinTables(involving: delete.entity).map { deleteLinks($0.table, column: $0.column) })
            }
            try body(ChangeStatement(sql: deleteTexts!.delete, step: .delete(i)))
            for text in deleteTexts!.links {
                try body(ChangeStatement(sql: text, step: .deleteLinks(i)))
            }
        }
    }

    /// Deletes by key sets, ``keysPerDelete`` rows a statement: for a set whose versions were
    /// read in the transaction that applies it, where no other writer can have changed them.
    /// SQLite does less work on a large cascading delete than with one statement a row.
    private func forEachDeleteByKeys<E: Error>(of changes: StoreChangeSet, _ body: (ChangeStatement) throws(E) -> Void) throws(E) {
        var start = 0
        while start < changes.deletes.count {
            let entity = changes.deletes[start].entity
            var end = start + 1
            while end < changes.deletes.count, changes.deletes[end].entity === entity { end += 1 }
            let delete = deleteKeys(entity)
            let links = schema.joinTables(involving: entity).map { deleteLinksByKeys($0.table, column: $0.column) }
            for first in stride(from: start, to: end, by: Self.keysPerDelete) {
                let range = first..<min(first + Self.keysPerDelete, end)
                try body(ChangeStatement(sql: delete, step: .deleteKeys(range)))
                for text in links { try body(ChangeStatement(sql: text, step: .deleteLinksOfKeys(range))) }
            }
            start = end
        }
    }

    /// An UPDATE statement's identity: the entity and the columns it sets.
    private struct UpdateShape: Hashable {
        let entity: ObjectIdentifier
        let columns: [Int]
    }
}
