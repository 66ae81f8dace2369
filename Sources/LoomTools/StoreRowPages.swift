import Foundation
@_spi(LoomStore) import LoomCore

/// Reads an entity's rows through the store SPI a page at a time, by key: each page is the rows
/// after the last key of the page before (a keyset page, so a page costs the same wherever it
/// falls). A tool that walks a whole store this way holds one page, never an entity's rows.
enum StoreRowPages {
    /// How many rows one page holds.
    static let size = 500

    /// Calls `body` with each page of `entity`'s rows, in key order, until the last.
    ///
    /// Not isolated: blocks the calling thread while the store reads.
    ///
    /// - Throws: `LoomError` when the store cannot be read; what `body` throws.
    static func forEach(of entity: EntityDescription, in store: any PersistentStore, size: Int = size, _ body: ([StoreRow]) throws -> Void) throws {
        var last: Int64?
        while true {
            // A SQL store orders by key when the query has no sort keys.
            let after = last.map { PredicateNode.compare(.greater, .primaryKey, .constant(.integer($0))) }
            let page = try store.fetch(StoreQuery(entity: entity, predicate: after, fetchLimit: size))
            guard let end = page.last?.key else { return }
            try body(page)
            if page.count < size { return }
            last = end
        }
    }
}
