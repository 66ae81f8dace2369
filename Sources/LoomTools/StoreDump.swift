package import Foundation
import GRDB
@_spi(LoomStore) import LoomCore
import LoomSQL
@_spi(LoomStore) import LoomSQLite

extension LoomTools {
    /// Writes every object of the SQLite store at `url` as NDJSON (one JSON object per line) to
    /// the file descriptor `output`, and returns how many objects it wrote.
    ///
    /// ```swift
    /// let count = try LoomTools.dump(storeAt: URL(filePath: "Library.loom"), to: STDOUT_FILENO)
    /// ```
    ///
    /// The first line is a header: `{"format":"loom-dump","formatVersion":1,"metadata":{…},
    /// "nextKeys":{"Book":1001,…},"schema":{…},"storeIdentifier":"…","versionHash":"…"}` (sorted
    /// keys): the saved schema and what ``load(from:into:progress:)`` needs to make the store
    /// again without the application's model. Then one line per object, entity by entity in the
    /// schema's order, each by primary key:
    ///
    /// ```json
    /// {"uri":"loom://<store>/Book/12","entity":"Book","version":3,"attributes":{"title":"Dune","published":-1.5e8},"relationships":{"author":"loom://<store>/Author/4","tags":["loom://<store>/Tag/1"]}}
    /// ```
    ///
    /// - `uri` is the object's ``AnyObjectID/uriRepresentation``; `version` its optimistic-locking
    ///   version (`Z_OPT`).
    /// - `attributes` has every attribute of the entity, in its order, encoded as the table of
    ///   `DumpValueCodec` says: `nil` is `null`, dates are seconds since 2001-01-01 UTC, binary
    ///   data is base64, UUIDs and decimals and URLs are strings, `Codable` values are their
    ///   stored JSON text as a string. A value that does not fit its type is an object naming
    ///   its storage class (`{"text": "…"}`), and text that is not valid UTF-8 is
    ///   `{"textBytes": "<base64>"}`, so that every stored byte loads back as it was.
    /// - `relationships` has every relationship, on both sides: a to-one is a URI or `null`, a
    ///   to-many an array of URIs by key, an ordered to-many an array in its order.
    ///
    /// The store is opened read-only and read in one transaction (a consistent snapshot, while
    /// other processes keep using it); the rows are read with cursors in key order and written
    /// through a buffer, so memory stays the same whatever the store's size.
    ///
    /// Not isolated: call it from any thread; it blocks that thread until it is done, and calls
    /// `progress` on it.
    ///
    /// - Parameters:
    ///   - progress: Called with the number of objects written so far, every 65,536 objects and
    ///     at the end.
    /// - Throws: ``LoomToolError`` when the file is not a Loom store or cannot be read or written.
    package static func dump(storeAt url: URL, to output: Int32, progress: ((Int) -> Void)? = nil) throws(LoomToolError) -> Int {
        let store = try openReadOnly(url)
        defer { try? store.close() }
        var out = BufferedOutput(descriptor: output)
        do {
            let count = try store.withReadConnection { db in
                // One read transaction: every table is read from the same snapshot.
                try db.execute(sql: "BEGIN DEFERRED TRANSACTION")
                defer { try? db.execute(sql: "COMMIT TRANSACTION") }
                return try StoreDumper(db: db, path: url.path).write(to: &out, progress: progress)
            }
            try out.flush()
            return count
        } catch let error as LoomToolError {
            throw error
        } catch {
            throw LoomToolError(.storeFailure, "The store at \(url.path) could not be read: \(error)")
        }
    }

    /// The existing store at `url`, opened read-only with its saved schema: it writes nothing to
    /// the file, and waits for a writer rather than failing.
    static func openReadOnly(_ url: URL) throws(LoomToolError) -> SQLiteStore {
        do {
            return try SQLiteStore(readingAt: url, options: SQLiteStore.Options(maximumReaderCount: 1))
        } catch {
            throw LoomToolError(.storeFailure, error.message)
        }
    }
}

/// Writes one store's dump inside a read transaction.
struct StoreDumper {
    let db: Database
    let path: String

    func write(to out: inout BufferedOutput, progress: ((Int) -> Void)?) throws -> Int {
        let header = try readHeader()
        let schema: Schema
        do {
            schema = try Schema(record: header.schema)
        } catch {
            throw LoomToolError(.storeFailure, "The schema saved in \(path) cannot be read: \(error)")
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        out.append(bytes: try encoder.encode(header))
        out.append(UInt8(ascii: "\n"))
        let prefixes = Dictionary(uniqueKeysWithValues: schema.entities.map {
            ($0.name, URIPrefix(storeIdentifier: header.storeIdentifier, entityName: $0.name))
        })
        var count = 0
        for entity in schema.entities {
            try writeObjects(of: entity, schema: schema, prefixes: prefixes, to: &out, count: &count, progress: progress)
        }
        progress?(count)
        return count
    }

    /// The header, from `loom_metadata` and `loom_keys`, read as the store SPI reads them.
    private func readHeader() throws -> DumpHeader {
        let state: StoreMaintenanceState
        do {
            state = try SQLiteStore.maintenanceState(in: db, path: path)
        } catch let error as LoomError {
            throw LoomToolError(.storeFailure, error.message)
        }
        guard let identifier = state.metadata["storeIdentifier"].flatMap(UUID.init(uuidString:)) else {
            throw LoomToolError(.storeFailure, "\(path) has no readable store identifier in loom_metadata; the file is damaged.")
        }
        return DumpHeader(storeIdentifier: identifier, state: state)
    }

    private func writeObjects(
        of entity: EntityDescription, schema: Schema, prefixes: [String: URIPrefix], to out: inout BufferedOutput,
        count: inout Int, progress: ((Int) -> Void)?
    ) throws {
        let relationships = schema.relationships(of: entity)
        // The to-many relationships' members, read alongside the rows in owner order.
        var members: [Int: MemberCursor] = [:]
        for r in relationships {
            if let sql = Self.membersQuery(r, in: schema) { members[r.index] = try MemberCursor(db: db, sql: sql) }
        }
        let columns = (["Z_PK", "Z_OPT"] + (0..<entity.storedValueCount).map(entity.columnName(at:))).map(SQLGenerator.quote)
        let sql = "SELECT \(columns.joined(separator: ", ")) FROM \(SQLGenerator.quote(entity.name)) ORDER BY \"Z_PK\""
        let statement = try db.makeStatement(sql: sql)
        let rows = RawStatement(handle: statement.sqliteStatement, sql: sql)
        var keys: [Int64] = []
        defer { withExtendedLifetime(statement) {} }   // `rows` reads through its handle
        while try rows.step() {
            let key = rows.int64(0)
            try Self.writeObject(
                of: entity, relationships: relationships, key: key, version: rows.int64(1), prefixes: prefixes,
                value: { rows.column(Int32(2 + $0)) },
                nonUTF8Text: { slot in if case .text = rows.column(Int32(2 + slot)) { rows.nonUTF8Text(Int32(2 + slot)) } else { nil } },
                members: { r, keys in try members[r.index]!.members(of: key, into: &keys) },
                keys: &keys, to: &out)
            try out.flushIfFull()
            count += 1
            if count & 0xFFFF == 0 { progress?(count) }
        }
    }

    /// Writes one object's line: `value` reads the row's stored value at a slot, `nonUTF8Text`
    /// the bytes of a text value that is not valid UTF-8 (`nil` otherwise), and `members` appends
    /// the keys of a to-many relationship's members, by key.
    static func writeObject(
        of entity: EntityDescription, relationships: [ResolvedRelationship], key: Int64, version: Int64, prefixes: [String: URIPrefix],
        value: (Int) -> StoredValue, nonUTF8Text: (Int) -> Data?, members: (ResolvedRelationship, inout [Int64]) throws -> Void,
        keys: inout [Int64], to out: inout BufferedOutput
    ) rethrows {
        let prefix = prefixes[entity.name]!
        out.append("{\"uri\":\"")
        out.append(bytes: prefix.bytes)
        out.append(key)
        out.append("\",\"entity\":")
        out.appendJSONString(entity.name)
        out.append(",\"version\":")
        out.append(version)
        out.append(",\"attributes\":{")
        for (i, attribute) in entity.attributes.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            out.appendJSONString(attribute.name)
            out.append(UInt8(ascii: ":"))
            if let bytes = nonUTF8Text(i) {
                DumpValueCodec.write(textBytes: bytes, to: &out)
            } else {
                DumpValueCodec.write(value(i), of: attribute.type, to: &out)
            }
        }
        out.append("},\"relationships\":{")
        for (n, r) in relationships.enumerated() {
            if n > 0 { out.append(UInt8(ascii: ",")) }
            out.appendJSONString(r.description.name)
            out.append(UInt8(ascii: ":"))
            let destination = prefixes[r.destination.name]!
            if case .foreignKey(let slot) = r.storage {
                if case .integer(let target) = value(slot) {
                    out.append(UInt8(ascii: "\""))
                    out.append(bytes: destination.bytes)
                    out.append(target)
                    out.append(UInt8(ascii: "\""))
                } else {
                    out.append("null")
                }
                continue
            }
            keys.removeAll(keepingCapacity: true)
            try members(r, &keys)
            if let slot = entity.storedValueIndex(ofRelationship: r.index) {
                order(&keys, by: value(slot))
            }
            out.append(UInt8(ascii: "["))
            for (m, target) in keys.enumerated() {
                if m > 0 { out.append(UInt8(ascii: ",")) }
                out.append(UInt8(ascii: "\""))
                out.append(bytes: destination.bytes)
                out.append(target)
                out.append(UInt8(ascii: "\""))
            }
            out.append(UInt8(ascii: "]"))
        }
        out.append("}}\n")
    }

    /// The `(owner, member)` pairs of a to-many relationship, by owner then member key; `nil` for
    /// a to-one.
    static func membersQuery(_ r: ResolvedRelationship, in schema: Schema) -> String? {
        switch r.storage {
        case .foreignKey:
            return nil
        case .inverseForeignKey(let slot):
            let fk = SQLGenerator.quote(r.destination.columnName(at: slot))
            // A destination with sub-entities: the foreign key, under one name, in each table.
            let tables = r.concreteDestinations(in: schema).map { "SELECT \(fk), \"Z_PK\" FROM \(SQLGenerator.quote($0.destination.name))" }
            let from = tables.count == 1 && !r.leadsToSubentities ? SQLGenerator.quote(r.destination.name) : "(\(tables.isEmpty ? "SELECT NULL AS \(fk), NULL AS \"Z_PK\"" : tables.joined(separator: " UNION ALL ")))"
            return "SELECT \(fk), \"Z_PK\" FROM \(from) AS d WHERE \(fk) IS NOT NULL ORDER BY \(fk), \"Z_PK\""
        case .joinTable(let table, let own, let other):
            let (own, other) = (SQLGenerator.quote(own), SQLGenerator.quote(other))
            return "SELECT \(own), \(other) FROM \(SQLGenerator.quote(table.name)) ORDER BY \(own), \(other)"
        }
    }

    /// Puts an ordered relationship's members (by key) in the order its order slot keeps: members
    /// the order does not name go last, by key.
    static func order(_ keys: inout [Int64], by order: StoredValue) {
        guard keys.count > 1, case .blob(let data) = order, data.count % 8 == 0 else { return }
        var position: [Int64: Int] = [:]
        position.reserveCapacity(data.count / 8)
        data.withUnsafeBytes { bytes in
            for i in 0..<(bytes.count / 8) {
                let key = Int64(littleEndian: bytes.loadUnaligned(fromByteOffset: i * 8, as: Int64.self))
                if position[key] == nil { position[key] = i }
            }
        }
        let last = position.count
        keys.sort { (position[$0] ?? last, $0) < (position[$1] ?? last, $1) }
    }
}

/// A cursor over a to-many relationship's `(owner, member)` pairs in owner order, read in step
/// with the owners' rows (a merge join: no query per object, nothing held but the current pair).
final class MemberCursor {
    private let statement: Statement
    private let raw: RawStatement
    private var current: (owner: Int64, member: Int64)?

    init(db: Database, sql: String) throws {
        statement = try db.makeStatement(sql: sql)
        raw = RawStatement(handle: statement.sqliteStatement, sql: sql)
        try advance()
    }

    private func advance() throws {
        current = try raw.step() ? (raw.int64(0), raw.int64(1)) : nil
    }

    /// Appends the members of `owner` (owners must be asked for in increasing key order).
    func members(of owner: Int64, into keys: inout [Int64]) throws {
        while let pair = current, pair.owner < owner { try advance() }
        while let pair = current, pair.owner == owner {
            keys.append(pair.member)
            try advance()
        }
    }
}
