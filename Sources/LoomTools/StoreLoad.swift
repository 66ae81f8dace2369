package import Foundation
@_spi(LoomStore) import LoomCore
@_spi(LoomStore) import LoomSQLite

extension LoomTools {
    /// Makes a new SQLite store at `url` from a dump (see ``dump(storeAt:to:progress:)``) read
    /// from the file descriptor `input`, and returns how many objects it loaded.
    ///
    /// ```swift
    /// let input = try FileHandle(forReadingFrom: URL(filePath: "library.ndjson"))
    /// let count = try LoomTools.load(from: input.fileDescriptor, into: URL(filePath: "Copy.loom"))
    /// ```
    ///
    /// The store is made from the schema in the dump's header, without the application's model,
    /// and keeps the dumped store's identifier and every object's key and version, so that the
    /// dump's URIs name the same objects in it, and a dump of it is byte for byte the same. The
    /// key allocator starts above both the loaded keys and the dumped store's own high-water mark.
    ///
    /// Each relationship is written from the side that stores it: a to-one from its URI (the
    /// foreign key), a many-to-many from its owning side (the join table's `Z_SOURCE`), an
    /// ordered to-many's order from its array. The other side's array is checked for its form
    /// (URIs of the right entity of this store) and otherwise taken as given; `loom verify`
    /// checks that both sides agree. A to-one or many-to-many URI of an object the dump does not
    /// have is an error.
    ///
    /// Lines end with LF or CRLF; blank lines (empty, or spaces and tabs), a UTF-8 byte order mark
    /// at the start and a last line without a newline are accepted, so a dump that went through
    /// an editor or another system loads. Every value is stored with the bytes the dump carries,
    /// text that is not valid UTF-8 (`{"textBytes": …}`) included.
    ///
    /// Nothing is written to `url` until the whole dump has loaded: the store is built in a
    /// temporary file beside it, in one transaction, and renamed to `url` at the end. On any
    /// error the temporary file is removed and `url` does not exist. The load writes no history
    /// transaction: the dump is a snapshot of the objects, not of their history, and a history
    /// entry per object would double the store and the time it takes; the loaded store's history
    /// starts empty.
    ///
    /// Memory grows by 12 bytes per object (the key and input line of each, to name the line of
    /// a dangling reference found at the end) and is otherwise the same whatever the dump's size.
    ///
    /// Not isolated: call it from any thread; it blocks that thread until it is done, and calls
    /// `progress` on it.
    ///
    /// - Parameters:
    ///   - progress: Called with the number of objects loaded so far, every 65,536 objects.
    /// - Throws: ``LoomToolError`` with code ``LoomToolError/Code/destinationExists`` when
    ///   `url` exists (load makes a new store; remove it or choose another path),
    ///   ``LoomToolError/Code/badInput`` naming the line and field for a malformed line, an
    ///   unknown entity or attribute, a value of the wrong type, a duplicate or dangling URI or a
    ///   broken uniqueness constraint, and ``LoomToolError/Code/storeFailure`` when the store
    ///   cannot be written.
    package static func load(from input: Int32, into url: URL, progress: ((Int) -> Void)? = nil) throws(LoomToolError) -> Int {
        let path = url.path
        if FileManager.default.fileExists(atPath: path) {
            throw LoomToolError(.destinationExists, "\(path) exists; load makes a new store: remove it or choose another path.")
        }
        let temporary = url.deletingLastPathComponent().appending(path: ".\(url.lastPathComponent).loading-\(getpid())")
        removeStoreFiles(temporary)
        do {
            let count = try StoreLoader.load(from: input, progress: progress) { header, schema, fill in
                try SQLiteStore.loadNewFile(at: temporary, schema: schema, metadata: header.metadata, identifier: header.storeIdentifier, fill)
            }
            try FileManager.default.moveItem(at: temporary, to: url)
            return count
        } catch {
            removeStoreFiles(temporary)
            if let error = error as? LoomToolError { throw error }
            throw LoomToolError(.storeFailure, "The store at \(path) could not be written: \(error)")
        }
    }

    /// Loads a dump as the SQLite variant (`into: URL`) does into the store at `location`:
    /// a SQLite file path, or a PostgreSQL URL (`postgres://user@host:port/db?schema=name`).
    ///
    /// A PostgreSQL store is made in the URL's schema, which must hold no store, or an empty one
    /// of the dump's schema; the load runs in one transaction through the store, so a failed load
    /// leaves that schema without objects (the empty store stays, and a new load may fill it).
    /// Text that is not valid UTF-8 cannot be loaded there (PostgreSQL refuses it).
    ///
    /// Not isolated: call it from any thread; it blocks that thread until it is done.
    ///
    /// - Throws: ``LoomToolError`` as the SQLite variant (`into: URL`) does;
    ///   ``LoomToolError/Code/destinationExists`` when the PostgreSQL schema holds objects or a
    ///   store of another schema.
    package static func load(from input: Int32, into location: String, progress: ((Int) -> Void)? = nil) throws(LoomToolError) -> Int {
        guard PostgreSQLLocation.isURL(location) else { return try load(from: input, into: URL(filePath: location), progress: progress) }
        guard PostgreSQLLocation.isAvailable else {
            // Refused before the input is read: a dump piped in would be read for nothing.
            throw LoomToolError(.storeFailure, PostgreSQLLocation.unavailable(location).message)
        }
        do {
            return try StoreLoader.load(from: input, progress: progress) { header, schema, fill in
                let store = try PostgreSQLLocation.openForLoading(location, schema: schema)
                defer { try? store.close() }
                do {
                    return try store.bulkLoad(as: header.storeIdentifier, metadata: header.metadata, fill)
                } catch let error as LoomError where error.code == .invalidRequest {
                    throw LoomToolError(.destinationExists, "\(CredentialRedaction.redacting(location)) holds objects; load makes a new store: choose another schema (?schema=name). \(error.message)")
                }
            }
        } catch let error as LoomToolError {
            throw error
        } catch {
            throw LoomToolError(.storeFailure, "The store at \(CredentialRedaction.redacting(location)) could not be written: \(error)")
        }
    }

    /// Removes a store file and its WAL, shared-memory and journal files.
    static func removeStoreFiles(_ url: URL) {
        for suffix in ["", "-wal", "-shm", "-journal"] { try? FileManager.default.removeItem(atPath: url.path + suffix) }
    }
}

/// Loads one dump into a new store, through the store SPI's bulk writer.
final class StoreLoader {
    private let header: DumpHeader
    private let schema: Schema
    private let writer: any StoreBulkWriter
    private var entities: [String: EntityLoader] = [:]
    private let prefixes: [String: URIPrefix]
    private var count = 0

    private init(header: DumpHeader, schema: Schema, writer: any StoreBulkWriter) {
        self.header = header
        self.schema = schema
        self.writer = writer
        prefixes = Dictionary(uniqueKeysWithValues: schema.entities.map { ($0.name, URIPrefix(storeIdentifier: header.storeIdentifier, entityName: $0.name)) })
        for entity in schema.entities { entities[entity.name] = EntityLoader(entity) }
    }

    /// Reads the dump from `input`: its header first, with which `open` makes the store and calls
    /// the fill it is given with the store's bulk writer; the fill loads every object.
    static func load(
        from input: Int32, progress: ((Int) -> Void)?,
        into open: (DumpHeader, Schema, _ fill: (any StoreBulkWriter) throws -> Int) throws -> Int
    ) throws -> Int {
        let reader = LineReader(descriptor: input)
        var read: (DumpHeader, Schema)?
        // The header is the first line that is not blank.
        while read == nil, try reader.withNextLine({ line -> Void in if !isBlank(line) { read = try readHeader(line, reader.lineNumber) } }) != nil {}
        guard let read else {
            throw LoomToolError(.badInput, "The input is empty; a dump starts with its header line (see loom dump --help).", line: max(1, reader.lineNumber))
        }
        let (header, schema) = read
        let count = try open(header, schema) { writer in
            let loader = StoreLoader(header: header, schema: schema, writer: writer)
            while try reader.withNextLine({ line -> Void in if !isBlank(line) { try loader.loadObject(line, reader.lineNumber) } }) != nil {
                if loader.count & 0xFFFF == 0, loader.count > 0 { progress?(loader.count) }
            }
            try loader.finish()
            return loader.count
        }
        progress?(count)
        return count
    }

    /// Whether a line is empty or only spaces and tabs: skipped wherever it is.
    private static func isBlank(_ line: UnsafeBufferPointer<UInt8>) -> Bool {
        line.allSatisfy { $0 == 0x20 || $0 == 0x09 }
    }

    private static func readHeader(_ line: UnsafeBufferPointer<UInt8>, _ number: Int) throws -> (DumpHeader, Schema) {
        let header: DumpHeader
        do {
            header = try JSONDecoder().decode(DumpHeader.self, from: Data(line))
        } catch let DecodingError.keyNotFound(key, context) {
            throw LoomToolError(.badInput, "The header lacks \(key.stringValue); is this a loom dump?", line: number,
                                field: (context.codingPath + [key]).map(\.stringValue).joined(separator: "."))
        } catch let DecodingError.typeMismatch(_, context), let DecodingError.valueNotFound(_, context), let DecodingError.dataCorrupted(context) {
            throw LoomToolError(.badInput, "The header is not a loom dump's header: \(context.debugDescription)", line: number,
                                field: context.codingPath.map(\.stringValue).joined(separator: "."))
        }
        guard header.format == DumpHeader.formatName else {
            throw LoomToolError(.badInput, "The header's format is not \(DumpHeader.formatName).", line: number, field: "format")
        }
        guard header.formatVersion == DumpHeader.currentVersion else {
            throw LoomToolError(.badInput, "This loom reads dump format \(DumpHeader.currentVersion), not \(header.formatVersion).", line: number, field: "formatVersion")
        }
        let schema: Schema
        do {
            schema = try Schema(record: header.schema)
        } catch {
            throw LoomToolError(.badInput, "The header's schema is not valid: \(error)", line: number, field: "schema")
        }
        guard schema.versionHash == header.versionHash else {
            throw LoomToolError(.badInput, "The header's version hash is not its schema's (\(schema.versionHash)); the header was edited.", line: number, field: "versionHash")
        }
        for name in header.nextKeys.keys where schema.entity(named: name) == nil {
            throw LoomToolError(.badInput, "The key allocator names \(name), which is not an entity of the schema.", line: number, field: "nextKeys.\(name)")
        }
        return (header, schema)
    }

    // MARK: Objects

    private func loadObject(_ line: UnsafeBufferPointer<UInt8>, _ number: Int) throws {
        let json: JSONValue
        do {
            json = try JSONParser.parse(line)
        } catch {
            throw LoomToolError(.badInput, "Not JSON at column \(error.column): \(error.message).", line: number)
        }
        func bad(_ field: String, _ message: String) -> LoomToolError { LoomToolError(.badInput, message, line: number, field: field) }
        guard case .object(let members) = json else { throw bad("", "A dump line is a JSON object, not \(json.kind).") }
        for member in members where !["uri", "entity", "version", "attributes", "relationships"].contains(member.name) {
            throw bad(member.name, "Unknown field \(member.name); an object's line has uri, entity, version, attributes and relationships.")
        }
        guard case .string(let entityName) = json.member("entity") else { throw bad("entity", "The entity's name is missing or not a string.") }
        guard let loader = entities[entityName] else { throw bad("entity", "Unknown entity \(entityName); the header's schema has \(schema.entities.map(\.name).joined(separator: ", ")).") }
        guard case .string(let uri) = json.member("uri") else { throw bad("uri", "The object's URI is missing or not a string.") }
        let key = try self.key(of: uri, entity: loader.entity, field: "uri", bad)
        guard case .number(let versionText) = json.member("version"), let version = Int64(versionText), version >= 1 else {
            throw bad("version", "The version is missing or not an integer of at least 1.")
        }
        var values = [StoredValue](repeating: .null, count: loader.entity.storedValueCount)
        // Text that is not valid UTF-8, by slot: bound as its bytes, which a `StoredValue` cannot hold.
        var textBytes: [(slot: Int, bytes: Data)] = []
        guard case .object(let attributes) = json.member("attributes") else { throw bad("attributes", "The attributes are missing or not an object.") }
        for (name, value) in attributes.lazy.map({ ($0.name, $0.value) }) {
            guard let i = loader.entity.attributeIndex(named: name) else { throw bad("attributes.\(name)", "\(entityName) has no attribute \(name).") }
            if let bytes = DumpValueCodec.textBytes(value) {
                textBytes.append((i, bytes))
                continue
            }
            switch DumpValueCodec.read(value, of: loader.entity.attributes[i].type) {
            case .success(let stored): values[i] = stored
            case .failure(let mismatch):
                throw bad("attributes.\(name)", "Expected \(mismatch.expected) for \(English.a(loader.entity.attributes[i].type.rawValue)) attribute, found \(mismatch.found).")
            }
        }
        if let missing = loader.entity.attributes.first(where: { a in !attributes.contains { $0.name == a.name } }) {
            throw bad("attributes.\(missing.name)", "The attribute \(missing.name) is missing (write null for nil).")
        }
        guard case .object(let relationships) = json.member("relationships") else { throw bad("relationships", "The relationships are missing or not an object.") }
        var links: [(ResolvedRelationship, [Int64])] = []
        for (name, value) in relationships.lazy.map({ ($0.name, $0.value) }) {
            guard let j = loader.entity.relationshipIndex(named: name) else { throw bad("relationships.\(name)", "\(entityName) has no relationship \(name).") }
            let r = schema.relationship(j, of: loader.entity)
            let field = "relationships.\(name)"
            if case .foreignKey(let slot) = r.storage {
                switch value {
                case .null: break
                case .string(let target): values[slot] = .integer(try self.key(of: target, entity: r.destination, field: field, bad))
                default: throw bad(field, "A to-one relationship is a URI or null, not \(value.kind).")
                }
                continue
            }
            guard case .array(let elements) = value else { throw bad(field, "A to-many relationship is an array of URIs, not \(value.kind).") }
            var targets: [Int64] = []
            targets.reserveCapacity(elements.count)
            for (n, element) in elements.enumerated() {
                guard case .string(let target) = element else { throw bad("\(field)[\(n)]", "Expected a URI, found \(element.kind).") }
                targets.append(try self.key(of: target, entity: r.destination, field: "\(field)[\(n)]", bad))
            }
            if let slot = loader.entity.storedValueIndex(ofRelationship: j) { values[slot] = Self.order(targets) }
            // A many-to-many is written from its owning side, the join table's `Z_SOURCE`.
            if case .joinTable(_, let own, _) = r.storage, own == JoinTable.sourceColumn { links.append((r, targets)) }
        }
        if let missing = loader.entity.relationships.first(where: { r in !relationships.contains { $0.name == r.name } }) {
            throw bad("relationships.\(missing.name)", "The relationship \(missing.name) is missing (write null or [] when empty).")
        }
        do {
            try writer.insert(loader.entity, key: key, version: version, values: values, textBytes: textBytes)
        } catch {
            // A store may insert later than asked (in batches): a key loaded before is named here.
            if loader.line(of: key) != nil { throw bad("uri", "A second object with the URI \(uri).") }
            let reason = error.message.hasSuffix(".") ? error.message : error.message + "."
            throw bad(error.attributeNames.first.map { "attributes.\($0)" } ?? "", "\(entityName)/\(key) cannot be stored: \(reason)")
        }
        loader.loaded(key, line: number)
        for (r, targets) in links {
            guard case .joinTable(let table, _, _) = r.storage else { continue }
            for (n, target) in targets.enumerated() {
                do {
                    try writer.link(table, source: key, target: target)
                } catch {
                    throw bad("relationships.\(r.description.name)[\(n)]", "The link cannot be stored (listed twice?): \(error.message).")
                }
            }
        }
        count += 1
    }

    /// An ordered relationship's keys as its order slot keeps them: 8 bytes each, little-endian.
    private static func order(_ keys: [Int64]) -> StoredValue {
        var data = Data(capacity: keys.count * 8)
        for key in keys { withUnsafeBytes(of: key.littleEndian) { data.append(contentsOf: $0) } }
        return .blob(data)
    }

    /// The key of an object URI of `entity` in the dumped store, or an error naming what is wrong.
    private func key(of uri: String, entity: EntityDescription, field: String, _ bad: (String, String) -> LoomToolError) throws -> Int64 {
        if let key = prefixes[entity.name]!.key(of: uri) { return key }
        // An object of a sub-entity, named by its own entity (a hierarchy's keys are its own).
        for member in schema.concreteEntities(of: entity) where member !== entity {
            if let key = prefixes[member.name]?.key(of: uri) { return key }
        }
        guard let url = URL(string: uri), let id = try? AnyObjectID(uriRepresentation: url) else {
            throw bad(field, "\(uri) is not a Loom object URI (loom://<store>/<Entity>/<key>).")
        }
        if id.storeIdentifier != header.storeIdentifier {
            throw bad(field, "\(uri) is a URI of store \(id.storeIdentifier), not of the dumped store \(header.storeIdentifier).")
        }
        throw bad(field, "\(uri) is a URI of \(English.a(id.entityName)), where \(English.a(entity.name)) is expected.")
    }

    // MARK: Finishing

    /// Checks that every stored reference leads to a loaded object, and sets the key allocator
    /// and the store identifier.
    private func finish() throws {
        for entity in schema.entities {
            for r in schema.relationships(of: entity) {
                if let (owner, target) = try writer.firstDanglingReference(of: r) {
                    let uri = prefixes[r.destination.name]!.text + String(target)
                    throw LoomToolError(.badInput, "\(entity.name)/\(owner)'s \(r.description.name) names \(uri), which is not in the dump.",
                                        line: entities[entity.name]!.line(of: owner), field: "relationships.\(r.description.name)")
                }
            }
        }
        // One key space per hierarchy: the root's row hands out keys to all of its entities, so
        // it starts past every key of the hierarchy and every row the dump has for it (a dump of
        // a store written when each entity had its own row may have several).
        for root in schema.entities where root.superentity == nil {
            var highest: Int64?, saved: Int64?
            for entity in schema.entities where entity.rootEntity === root {
                if let key = try writer.highestKey(of: entity) { highest = max(highest ?? key, key) }
                if let next = header.nextKeys[entity.name] { saved = max(saved ?? next, next) }
            }
            if highest != nil || saved != nil {
                try writer.setNextKey(max(saved ?? 1, (highest ?? 0) + 1), for: root)
            }
        }
    }
}

/// One entity of the load, and the input line of each object loaded.
private final class EntityLoader {
    let entity: EntityDescription
    private var keys: [Int64] = []
    private var lines: [Int32] = []

    init(_ entity: EntityDescription) {
        self.entity = entity
    }

    /// Records that the object with `key` was loaded from input line `line`.
    func loaded(_ key: Int64, line: Int) {
        keys.append(key)
        lines.append(Int32(clamping: line))
    }

    /// The input line of the object with `key`.
    func line(of key: Int64) -> Int? {
        keys.firstIndex(of: key).map { Int(lines[$0]) }
    }
}
