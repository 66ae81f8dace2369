import Foundation
@_spi(LoomStore) import LoomCore

extension LoomTools {
    /// Writes every object of the store at `location` as NDJSON to the file descriptor `output`,
    /// as ``dump(storeAt:to:progress:)`` does, and returns how many objects it wrote. `location`
    /// is a SQLite file path or a PostgreSQL URL (`postgres://user@host:port/db?schema=name`).
    ///
    /// A PostgreSQL store is read through the store SPI, entity by entity, a page of rows at a
    /// time by key (``StoreRowPages``) with the page's relationship members: memory holds one
    /// page, whatever the store's size. The dump is the one a SQLite store with the same objects
    /// gives, byte for byte.
    ///
    /// Not isolated: call it from any thread; it blocks that thread until it is done.
    ///
    /// - Throws: ``LoomToolError`` when there is no store there or it cannot be read or written.
    package static func dump(location: String, to output: Int32, progress: ((Int) -> Void)? = nil) throws(LoomToolError) -> Int {
        guard PostgreSQLLocation.isURL(location) else { return try dump(storeAt: URL(filePath: location), to: output, progress: progress) }
        do {
            let store = try PostgreSQLLocation.openExisting(location)
            defer { try? store.close() }
            var out = BufferedOutput(descriptor: output)
            let count = try StoreSPIDumper(store: store).write(to: &out, progress: progress)
            try out.flush()
            return count
        } catch let error as LoomToolError {
            throw error
        } catch let error as LoomError {
            throw LoomToolError(.storeFailure, error.message)
        } catch {
            throw LoomToolError(.storeFailure, "The store at \(CredentialRedaction.redacting(location)) could not be read: \(error)")
        }
    }
}

/// Writes a dump of a store reached through the store SPI (``StoreMaintenance``).
struct StoreSPIDumper {
    let store: any StoreMaintenance

    func write(to out: inout BufferedOutput, progress: ((Int) -> Void)?) throws -> Int {
        let state = try store.maintenanceState()
        let schema = store.schema
        let header = DumpHeader(storeIdentifier: store.identifier, state: state)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        out.append(bytes: try encoder.encode(header))
        out.append(UInt8(ascii: "\n"))
        let prefixes = Dictionary(uniqueKeysWithValues: schema.entities.map {
            ($0.name, URIPrefix(storeIdentifier: store.identifier, entityName: $0.name))
        })
        var count = 0
        var keys: [Int64] = []
        for entity in schema.entities {
            let relationships = schema.relationships(of: entity)
            try StoreRowPages.forEach(of: entity, in: store) { rows in
                // The page's owners' members of every to-many, by owner, in key order.
                let owners = rows.map(\.key)
                var members: [Int: [Int64: [Int64]]] = [:]
                for r in relationships {
                    if case .foreignKey = r.storage { continue }
                    var byOwner: [Int64: [Int64]] = [:]
                    for related in try store.fetchRelated(r, keys: owners) { byOwner[related.owner, default: []].append(related.row.key) }
                    members[r.index] = byOwner.mapValues { $0.sorted() }
                }
                for row in rows {
                    StoreDumper.writeObject(
                        of: entity, relationships: relationships, key: row.key, version: row.version, prefixes: prefixes,
                        value: { row.values[$0] }, nonUTF8Text: { _ in nil },
                        members: { r, keys in keys += members[r.index]?[row.key] ?? [] },
                        keys: &keys, to: &out)
                    try out.flushIfFull()
                    count += 1
                    if count & 0xFFFF == 0 { progress?(count) }
                }
            }
        }
        progress?(count)
        return count
    }
}
