import Foundation
@_spi(LoomStore) import LoomCore
import LoomSQL
@_spi(LoomStore) import LoomSQLite

/// A parser of untrusted input, as the fuzzer (`scripts/fuzz`, `Fuzz/`) and the tests that
/// replay its corpora (`FuzzCorpusTests`) call it: one input in, every error caught.
///
/// An input may make the parser throw (that is its job); it must not trap, hang or grow memory
/// without bound. The fuzzer reports those; a test replaying the committed inputs keeps every
/// one it found.
///
/// Not isolated: call ``run(_:)`` from any thread. The targets that write files (`dump`,
/// `storeFile`) use a folder of their own per call, so calls may run in parallel.
package enum FuzzTarget: String, CaseIterable, Sendable {
    /// `loom query`'s language, parsed against ``FuzzTarget/schema`` and turned into SQL.
    case query
    /// `loom load`'s dump format, loaded into a new SQLite store.
    case dump
    /// A history row's packed changes, decoded as a store reads them back.
    case history
    /// A store's saved schema (its JSON record), rebuilt and turned into tables as an open does.
    case schema
    /// A whole store file, opened by the store and checked by `loom verify`.
    case storeFile = "store-file"
    /// JSON decoded into an import's sources, imported (uniqued, linked, in chunks) into a new
    /// SQLite store.
    case jsonImport = "import"

    /// Runs one input through the target's parser.
    package func run(_ input: [UInt8]) {
        switch self {
        case .query: Self.parseQuery(input)
        case .dump: Self.loadDump(input)
        case .history: Self.decodeHistory(input)
        case .schema: Self.rebuildSchema(input)
        case .storeFile: Self.openStoreFile(input)
        case .jsonImport: Self.importJSON(input)
        }
    }

    /// The inputs the target's corpus starts from: valid inputs that reach deep into the parser,
    /// which the fuzzer then mutates.
    package func seeds() throws -> [[UInt8]] {
        switch self {
        case .query: Self.querySeeds.map { Array($0.utf8) }
        case .dump: [Array(Self.seedDump.utf8)]
        case .history: Self.historySeeds
        case .schema: [Array(Self.schemaJSON.utf8)]
        case .storeFile: [try Self.seedStoreFile()]
        case .jsonImport: Self.importSeeds.map { Array($0.utf8) }
        }
    }

    // MARK: The schema the targets share

    /// Authors, books and tags: every attribute type, a to-one with its to-many inverse, a
    /// many-to-many and an ordered to-many.
    static let schemaJSON = #"""
    {"entities":[\#
    {"name":"Author","attributes":[\#
    {"name":"name","type":"string","isOptional":false,"isUnique":true,"isIndexed":false},\#
    {"name":"born","type":"date","isOptional":true,"isUnique":false,"isIndexed":true},\#
    {"name":"rating","type":"double","isOptional":true,"isUnique":false,"isIndexed":false},\#
    {"name":"active","type":"bool","isOptional":false,"isUnique":false,"isIndexed":false},\#
    {"name":"tag","type":"uuid","isOptional":true,"isUnique":false,"isIndexed":false},\#
    {"name":"site","type":"url","isOptional":true,"isUnique":false,"isIndexed":false},\#
    {"name":"fee","type":"decimal","isOptional":true,"isUnique":false,"isIndexed":false},\#
    {"name":"photo","type":"binary","isOptional":true,"isUnique":false,"isIndexed":false},\#
    {"name":"extra","type":"codable","isOptional":true,"isUnique":false,"isIndexed":false}],\#
    "relationships":[\#
    {"name":"books","destination":"Book","inverse":"author","kind":"toMany","deleteRule":"cascade","isOptional":true,"isUnique":false}],\#
    "uniquenessConstraints":[["name"]],"indexes":[["born","rating"]]},\#
    {"name":"Book","attributes":[\#
    {"name":"title","type":"string","isOptional":false,"isUnique":false,"isIndexed":true},\#
    {"name":"pages","type":"integer32","isOptional":false,"isUnique":false,"isIndexed":false},\#
    {"name":"copies","type":"integer16","isOptional":true,"isUnique":false,"isIndexed":false},\#
    {"name":"sales","type":"integer64","isOptional":true,"isUnique":false,"isIndexed":false},\#
    {"name":"weight","type":"float","isOptional":true,"isUnique":false,"isIndexed":false}],\#
    "relationships":[\#
    {"name":"author","destination":"Author","inverse":"books","kind":"toOne","deleteRule":"nullify","isOptional":true,"isUnique":false},\#
    {"name":"tags","destination":"Tag","inverse":"books","kind":"toMany","deleteRule":"nullify","isOptional":true,"isUnique":false},\#
    {"name":"chapters","destination":"Chapter","inverse":"book","kind":"orderedToMany","deleteRule":"cascade","isOptional":true,"isUnique":false}],\#
    "uniquenessConstraints":[],"indexes":[]},\#
    {"name":"Tag","attributes":[{"name":"label","type":"string","isOptional":false,"isUnique":false,"isIndexed":false}],\#
    "relationships":[{"name":"books","destination":"Book","inverse":"tags","kind":"toMany","deleteRule":"nullify","isOptional":true,"isUnique":false}],\#
    "uniquenessConstraints":[],"indexes":[]},\#
    {"name":"Chapter","attributes":[{"name":"heading","type":"string","isOptional":true,"isUnique":false,"isIndexed":false}],\#
    "relationships":[{"name":"book","destination":"Book","inverse":"chapters","kind":"toOne","deleteRule":"nullify","isOptional":true,"isUnique":false}],\#
    "uniquenessConstraints":[],"indexes":[]}]}
    """#

    /// ``schemaJSON`` as a schema: the one `query` parses against and `dump`'s seed is of.
    static let sharedSchema: Schema = {
        do {
            return try Schema(record: JSONDecoder().decode(SchemaRecord.self, from: Data(schemaJSON.utf8)))
        } catch {
            preconditionFailure("The fuzz targets' schema does not build: \(error)")
        }
    }()

    // MARK: query

    static let querySeeds = [
        "Author",
        #"Author where name == "Ann" sort born desc, name limit 10 offset 2"#,
        #"Book where author.name beginswith[c] "a" and pages > 100 or not (copies == nil)"#,
        #"Author where any books.title contains[cd] "x\u{e9}\n" and all books.pages >= 3"#,
        #"Author where books.@count > 2 && count(books) < 9 || rating in [1, 2.5, -3e2]"#,
        #"Author where born > "1990-01-01" and tag == "E621E1F8-C36C-495A-93FC-0C247A3E6E5F" and fee < "1.5""#,
        #"Book where author == nil or author == "loom://00000000-0000-0000-0000-000000000000/Author/3" sort author.name asc"#,
        #"Author where active and !`name` endswith "z" and site hasprefix "https:" and true or false"#,
    ]

    static func parseQuery(_ input: [UInt8]) {
        guard let text = String(validating: input, as: UTF8.self),
              let query = try? TextQuery(parsing: text, schema: sharedSchema) else { return }
        let sql = SQLGenerator(schema: sharedSchema, dialect: SQLiteDialect())
        _ = sql.selectKeys(query.storeQuery)
    }

    // MARK: dump

    /// A dump of two authors, three books, a tag and a chapter, as `loom dump` writes it.
    static var seedDump: String {
        let store = "6A3F1C52-8E0B-4F8D-9C7A-2B5E4D1F0A93"
        let header = DumpHeader(
            format: DumpHeader.formatName, formatVersion: DumpHeader.currentVersion,
            storeIdentifier: UUID(uuidString: store)!, versionHash: sharedSchema.versionHash,
            nextKeys: ["Author": 3, "Book": 4, "Tag": 2, "Chapter": 2], metadata: ["modelVersion": "1"], schema: sharedSchema.record)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let headerLine = String(decoding: (try? encoder.encode(header)) ?? Data(), as: UTF8.self)
        let uri = { (entity: String, key: Int) in "\"loom://\(store)/\(entity)/\(key)\"" }
        return [
            headerLine,
            #"{"uri":\#(uri("Author", 1)),"entity":"Author","version":1,"attributes":{"name":"Ann","born":-3600.5,"rating":4.5,"active":true,"tag":"E621E1F8-C36C-495A-93FC-0C247A3E6E5F","site":"https://a.example","fee":"12.50","photo":"AAEC","extra":"{\"a\":1}"},"relationships":{"books":[\#(uri("Book", 1)),\#(uri("Book", 2))]}}"#,
            #"{"uri":\#(uri("Author", 2)),"entity":"Author","version":3,"attributes":{"name":"B\u00e9a","born":null,"rating":{"real":"inf"},"active":false,"tag":null,"site":null,"fee":null,"photo":null,"extra":{"textBytes":"/w=="}},"relationships":{"books":[]}}"#,
            #"{"uri":\#(uri("Book", 1)),"entity":"Book","version":1,"attributes":{"title":"One","pages":10,"copies":2,"sales":9007199254740993,"weight":0.5},"relationships":{"author":\#(uri("Author", 1)),"tags":[\#(uri("Tag", 1))],"chapters":[\#(uri("Chapter", 1))]}}"#,
            #"{"uri":\#(uri("Book", 2)),"entity":"Book","version":2,"attributes":{"title":"Two","pages":{"text":"many"},"copies":null,"sales":null,"weight":null},"relationships":{"author":\#(uri("Author", 1)),"tags":[],"chapters":[]}}"#,
            #"{"uri":\#(uri("Book", 3)),"entity":"Book","version":1,"attributes":{"title":"Three","pages":3,"copies":null,"sales":-1,"weight":-0.0},"relationships":{"author":null,"tags":[\#(uri("Tag", 1))],"chapters":[]}}"#,
            #"{"uri":\#(uri("Tag", 1)),"entity":"Tag","version":1,"attributes":{"label":"new"},"relationships":{"books":[\#(uri("Book", 1)),\#(uri("Book", 3))]}}"#,
            #"{"uri":\#(uri("Chapter", 1)),"entity":"Chapter","version":1,"attributes":{"heading":"I"},"relationships":{"book":\#(uri("Book", 1))}}"#,
            "",
        ].joined(separator: "\n")
    }

    static func loadDump(_ input: [UInt8]) {
        withScratchFolder { folder in
            let dumpPath = folder.appending(path: "input.dump").path
            guard FileManager.default.createFile(atPath: dumpPath, contents: Data(input)) else { return }
            let descriptor = open(dumpPath, O_RDONLY)
            guard descriptor >= 0 else { return }
            defer { close(descriptor) }
            _ = try? LoomTools.load(from: descriptor, into: folder.appending(path: "loaded.loom"))
        }
    }

    // MARK: history

    /// Rows as `HistoryChangeGroup.encode` writes them: inserts (keys in runs), an update and a
    /// delete with tombstones of every storage class.
    static var historySeeds: [[UInt8]] {
        var inserts = PackedHistory()
        inserts.group(tag: 4, entity: "Book", properties: "", count: 5)   // an insert, keys in runs
        inserts.u32(2); inserts.u64(1); inserts.u32(4); inserts.u64(9); inserts.u32(1)
        inserts.group(tag: 1, entity: "Author", properties: "born,name", count: 2)   // an update
        inserts.u64(7); inserts.u64(UInt64(bitPattern: -1))
        var deletes = PackedHistory()
        deletes.group(tag: 3, entity: "Author", properties: "name,rating,photo,fee,born", count: 1)   // tombstones
        deletes.u64(3)
        deletes.bytes.append(3); deletes.text("Ann")
        deletes.bytes.append(2); deletes.u64((-1.5).bitPattern)
        deletes.bytes.append(4); deletes.u32(2); deletes.bytes += [0, 1]
        deletes.bytes.append(0)
        deletes.bytes.append(1); deletes.u64(UInt64(bitPattern: .min))
        return [inserts.bytes, deletes.bytes]
    }

    /// A writer of the packed format, for seeds: the encoder's own types are the store SPI's.
    private struct PackedHistory {
        var bytes: [UInt8] = []
        mutating func u32(_ value: Int) { withUnsafeBytes(of: UInt32(value).littleEndian) { bytes += $0 } }
        mutating func u64(_ value: UInt64) { withUnsafeBytes(of: value.littleEndian) { bytes += $0 } }
        mutating func text(_ text: String) { u32(text.utf8.count); bytes += text.utf8 }
        mutating func group(tag: UInt8, entity: String, properties: String, count: Int) {
            bytes.append(tag); text(entity); text(properties); u32(count)
        }
    }

    /// The key marks `history` decodes under: a store that handed out 65,536 keys of each of two
    /// entities (its readers bound a row's keys by what the store handed out). Under larger
    /// marks a few damaged bytes may claim millions of keys within the bound, which a real
    /// store of that size can hold, and the fuzzer spends seconds expanding each such input.
    static let historyKeyLimit = SQLHistory.keyLimit(marks: [1 << 16, 1 << 16])

    static func decodeHistory(_ input: [UInt8]) {
        _ = try? SQLHistory.transaction(
            number: 1, timestamp: 0, author: nil, context: nil, process: 1, processName: "fuzz", changes: Data(input),
            entityNames: nil, store: UUID(), location: "fuzz", keyLimit: historyKeyLimit)
    }

    // MARK: schema

    static func rebuildSchema(_ input: [UInt8]) {
        guard let record = try? JSONDecoder().decode(SchemaRecord.self, from: Data(input)),
              let schema = try? Schema(record: record) else { return }
        let sql = SQLGenerator(schema: schema, dialect: SQLiteDialect())
        _ = sql.createStatements()
        _ = sql.indexStatements()
        _ = schema.versionHash
    }

    // MARK: store file

    /// The store `seedDump` loads into: a whole SQLite file.
    static func seedStoreFile() throws -> [UInt8] {
        var result: Result<[UInt8], any Error> = .success([])
        withScratchFolder { folder in
            result = Result {
                let dumpURL = folder.appending(path: "seed.dump")
                try Data(seedDump.utf8).write(to: dumpURL)
                let descriptor = open(dumpURL.path, O_RDONLY)
                defer { close(descriptor) }
                let storeURL = folder.appending(path: "seed.loom")
                _ = try LoomTools.load(from: descriptor, into: storeURL)
                return try [UInt8](Data(contentsOf: storeURL))
            }
        }
        return try result.get()
    }

    static func openStoreFile(_ input: [UInt8]) {
        withScratchFolder { folder in
            let url = folder.appending(path: "input.loom")
            guard FileManager.default.createFile(atPath: url.path, contents: Data(input)) else { return }
            _ = try? StoreVerifier(url: url).verify()
            guard let saved = try? SQLiteStore.savedSchema(at: url),
                  let store = try? SQLiteStore(url: url, schema: saved) else { return }
            try? store.close()
        }
    }

    /// Runs `body` with a new empty folder, removed afterwards.
    static func withScratchFolder(_ body: (URL) -> Void) {
        let folder = FileManager.default.temporaryDirectory.appending(path: "loom-fuzz-\(UUID().uuidString)")
        guard (try? FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)) != nil else { return }
        defer { try? FileManager.default.removeItem(at: folder) }
        body(folder)
    }
}
