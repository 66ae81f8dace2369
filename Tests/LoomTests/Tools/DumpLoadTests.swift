import Foundation
import GRDB
import Testing
import Loom
@_spi(LoomStore) import LoomCore
import LoomPostgreSQL
import LoomTools

/// `loom dump` and `loom load`: a dump loaded into a new store and dumped again is byte for
/// byte the same, the loaded store reads back through the application's model, and bad input
/// leaves no store behind.
@MainActor
@Suite("Dump and load", .ownThreads, .timeLimit(.minutes(5)))
struct DumpLoadTests {
    static let types: [any PersistentModel.Type] = StoreKind.graphTypes + [Sample.self, Playlist.self, Song.self]

    @Test("A random graph dumped, loaded into a new store and dumped again gives the same bytes", arguments: [1, 2, 3, 42] as [UInt64])
    func roundTripIsByteIdentical(seed: UInt64) throws {
        let original = TemporaryDirectory.make().appending(path: "original.loom")
        let container = PersistentContainer(store: try SQLiteStore(url: original, schema: try Schema(Self.types)))
        var random = SeededGenerator(seed: seed)
        try Self.fillRandomGraph(container.viewContext, &random)
        let before = try Self.summary(container.viewContext)

        let first = try Self.dump(original)
        let copy = TemporaryDirectory.make().appending(path: "copy.loom")
        let count = try Self.load(first, into: copy)
        #expect(count == first.split(separator: 0x0A).count - 1)
        let second = try Self.dump(copy)
        #expect(first == second)
        if first != second { Self.reportFirstDifference(first, second) }

        // The copy opens with the application's model and holds the same objects, with the same
        // URIs, attributes and relationships.
        let reopened = PersistentContainer(store: try SQLiteStore(url: copy, schema: try Schema(Self.types)))
        #expect(try Self.summary(reopened.viewContext) == before)
        // New objects get keys above the loaded ones.
        let song = Song(name: "new")
        reopened.viewContext.insert(song)
        try reopened.viewContext.save()
        let songs = try container.viewContext.fetch(FetchRequest<Song>())
        #expect(songs.allSatisfy { $0.objectID.erased.primaryKey < song.objectID.erased.primaryKey })
    }

    @Test("The tool dumps to standard output and loads from a file and from standard input")
    func commandLineRoundTrip() async throws {
        let (original, container) = try Self.makeSmallStore()
        let bytes = try Data(contentsOf: original)
        // While the store is open here: the dump reads it read-only and changes nothing.
        let dumped = try await LoomExecutable.run(["dump", original.path])
        #expect(dumped.status == 0, "\(dumped.standardError)")
        #expect(try Data(contentsOf: original) == bytes)
        #expect(try container.viewContext.fetch(FetchRequest<Author>()).count == 2)
        let folder = TemporaryDirectory.make()
        let file = folder.appending(path: "dump.ndjson")
        try Data(dumped.standardOutput.utf8).write(to: file)

        let fromFile = folder.appending(path: "from-file.loom")
        let loaded = try await LoomExecutable.run(["load", file.path, fromFile.path])
        #expect(loaded.status == 0, "\(loaded.standardError)")
        #expect(try await LoomExecutable.run(["dump", fromFile.path]).standardOutput == dumped.standardOutput)

        let fromInput = folder.appending(path: "from-stdin.loom")
        let piped = try await LoomExecutable.run(["load", "-", fromInput.path], input: Data(dumped.standardOutput.utf8))
        #expect(piped.status == 0, "\(piped.standardError)")
        #expect(try await LoomExecutable.run(["dump", fromInput.path]).standardOutput == dumped.standardOutput)
        #expect(try await LoomExecutable.run(["dump", "--help"]).standardOutput.contains("Example"))
        #expect(try await LoomExecutable.run(["load", "--help"]).standardOutput.contains("Example"))
    }

    @Test("Bad input fails with the line and field, and leaves no store", arguments: BadInput.allCases)
    func badInputLeavesNoStore(_ bad: BadInput) async throws {
        let (original, _) = try Self.makeSmallStore()
        var lines = String(decoding: try Self.dump(original), as: UTF8.self).split(separator: "\n").map(String.init)
        let (number, expected) = bad.spoil(&lines)
        let store = TemporaryDirectory.make().appending(path: "bad.loom")
        let output = try await LoomExecutable.run(["load", "-", store.path], input: Data((lines.joined(separator: "\n") + "\n").utf8))
        #expect(output.status != 0)
        #expect(output.standardError.contains("line \(number)"), "\(output.standardError)")
        #expect(output.standardError.contains(expected), "\(output.standardError)")
        #expect(!FileManager.default.fileExists(atPath: store.path))
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: store.deletingLastPathComponent().path)
        #expect(leftovers.isEmpty, "\(leftovers)")
    }

    @Test("Values JSON cannot carry as they are (text that is not UTF-8, -0.0, 2^53 + 1, every byte) load back byte for byte")
    func everyStoredByteRoundTrips() async throws {
        let original = TemporaryDirectory.make().appending(path: "exotic.loom")
        let container = PersistentContainer(store: try SQLiteStore(url: original, schema: try Schema(Self.types)))
        for _ in 0..<3 { container.viewContext.insert(Sample()) }
        try container.viewContext.save()
        try await container.close()
        try StoreFileSQL.write(at: original) { db in
            for (key, assignments) in Self.exoticValues.enumerated() {
                try db.execute(sql: "UPDATE Sample SET \(assignments) WHERE Z_PK = (SELECT Z_PK FROM Sample ORDER BY Z_PK LIMIT 1 OFFSET \(key))")
            }
        }
        let before = try Self.storedBytes(original)
        let first = try Self.dump(original)
        let copy = TemporaryDirectory.make().appending(path: "copy.loom")
        #expect(try Self.load(first, into: copy) == 3)
        let after = try Self.storedBytes(copy)
        #expect(after == before)
        for (key, value) in before where after[key] != value { Issue.record("\(key): \(value) became \(after[key] ?? "nothing")") }
        #expect(try Self.dump(copy) == first)
    }

    /// Per object, the values stored by raw SQL: text that is not UTF-8 (a lone continuation
    /// byte, an overlong form, a surrogate, a NUL), in text attributes and in others, reals JSON
    /// has no number for, integers a double cannot hold, blobs of every byte value.
    static let exoticValues = [
        """
        string = CAST(x'41C328FF0042' AS TEXT), optionalString = CAST(x'EDA080' AS TEXT), url = CAST(x'C0AF' AS TEXT),         decimal = CAST(x'80' AS TEXT), genre = CAST(x'E282' AS TEXT), int = CAST(x'FE' AS TEXT), data = CAST(x'FF' AS TEXT),         double = -0.0, float = 9e999, date = -9e999, int64 = 9007199254740993, optionalInt = -9223372036854775808
        """,
        """
        data = x'\((0...255).map { String(format: "%02X", $0) }.joined())', optionalData = x'', dimensions = x'FF00',         optionalDimensions = CAST('{"w":1}' AS BLOB), string = '', optionalString = CAST(x'00' AS TEXT),         double = 5e-324, float = -1.5, date = 1e308, int64 = -9007199254740993, optionalInt = 9223372036854775807
        """,
        """
        string = 'line\r\nbreak', flag = 7, int16 = 'not a number', uuid = x'01', double = 'text', date = x'00',         optionalString = CAST(x'F4908080' AS TEXT), optionalDate = 0.1, decimal = ' 1.5 '
        """,
    ]

    /// Every row of every table of a store file: each column's storage class and bytes (`hex`,
    /// so text is compared as stored, not as a `String` repairs it).
    static func storedBytes(_ url: URL) throws -> [String: String] {
        try StoreFileSQL.write(at: url) { db in
            var rows: [String: String] = [:]
            let tables = try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT IN ('loom_metadata', 'loom_history') AND name NOT LIKE 'sqlite_%'")
            for table in tables {
                let columns = try Row.fetchAll(db, sql: "SELECT name FROM pragma_table_info(?)", arguments: [table]).map { $0[0] as String }
                // Reals by 17 significant digits (exact), the rest by their bytes.
                let described = columns.map { c in
                    "typeof(\"\(c)\") || ':' || CASE typeof(\"\(c)\") WHEN 'real' THEN printf('%!.17g', \"\(c)\") ELSE hex(\"\(c)\") END"
                }.joined(separator: " || ' ' || ")
                for (n, row) in try String.fetchAll(db, sql: "SELECT \(described) FROM \"\(table)\" ORDER BY 1").enumerated() {
                    rows["\(table) \(n)"] = row
                }
            }
            return rows
        }
    }

    @Test("A dump with CRLF line endings, blank lines, a byte order mark or no final newline loads", arguments: LineEndings.allCases)
    func dumpsEditedElsewhereLoad(_ endings: LineEndings) async throws {
        let (original, _) = try Self.makeSmallStore()
        let dump = try Self.dump(original)
        let store = TemporaryDirectory.make().appending(path: "edited.loom")
        let output = try await LoomExecutable.run(["load", "-", store.path], input: endings.apply(to: dump))
        #expect(output.status == 0, "\(output.standardError)")
        #expect(try Self.dump(store) == dump)
    }

    @Test("A broken line of a CRLF dump is named by line and column")
    func crlfErrorsNameLineAndColumn() async throws {
        let (original, _) = try Self.makeSmallStore()
        var lines = String(decoding: try Self.dump(original), as: UTF8.self).split(separator: "\n").map(String.init)
        lines[2] = "{\"uri\": }"
        lines.insert("", at: 1)   // counted: the broken line is line 4 of the input
        let store = TemporaryDirectory.make().appending(path: "bad.loom")
        let output = try await LoomExecutable.run(["load", "-", store.path], input: Data(lines.joined(separator: "\r\n").utf8))
        #expect(output.status != 0)
        #expect(output.standardError.contains("line 4"), "\(output.standardError)")
        #expect(output.standardError.contains("column 9"), "\(output.standardError)")
        #expect(!FileManager.default.fileExists(atPath: store.path))
    }

    /// Ways a dump's lines come back from an editor or another system.
    enum LineEndings: String, CaseIterable, Sendable {
        case crlf, blankLines, blankLinesWithSpaces, crlfBlankLines, byteOrderMark, noFinalNewline, crlfWithoutFinalNewline, all

        func apply(to dump: Data) -> Data {
            var text = String(decoding: dump, as: UTF8.self)
            let crlf = [.crlf, .crlfBlankLines, .crlfWithoutFinalNewline, .all].contains(self)
            if [.blankLines, .crlfBlankLines, .all].contains(self) { text = "\n" + text.replacingOccurrences(of: "\n", with: "\n\n") }
            if self == .blankLinesWithSpaces { text = " \t\n" + text.replacingOccurrences(of: "\n", with: "\n  \n") }
            if crlf { text = text.replacingOccurrences(of: "\n", with: "\r\n") }
            if [.noFinalNewline, .crlfWithoutFinalNewline, .all].contains(self) { while text.last?.isNewline == true { text.removeLast() } }
            if [.byteOrderMark, .all].contains(self) { text = "\u{FEFF}" + text }
            return Data(text.utf8)
        }
    }

    @Test("Loading over an existing store is refused and leaves it unchanged")
    func existingStoreIsUnchanged() async throws {
        let (original, _) = try Self.makeSmallStore()
        let dump = try Self.dump(original)
        let (existing, _) = try Self.makeSmallStore()
        let bytes = try Data(contentsOf: existing)
        let output = try await LoomExecutable.run(["load", "-", existing.path], input: dump)
        #expect(output.status != 0)
        #expect(output.standardError.contains("exists"))
        #expect(try Data(contentsOf: existing) == bytes)
    }

    /// Kinds of broken dump lines, each with the line it breaks and a word of the message.
    enum BadInput: CaseIterable, Sendable {
        case malformedJSON, unknownEntity, danglingURI, wrongAttributeType, emptyInput

        func spoil(_ lines: inout [String]) -> (line: Int, message: String) {
            switch self {
            case .malformedJSON:
                lines[2] = String(lines[2].dropLast(3))
                return (3, "Not JSON")
            case .unknownEntity:
                let i = lines.firstIndex { $0.contains("\"entity\":\"Author\"") }!
                lines[i] = lines[i].replacingOccurrences(of: "\"entity\":\"Author\"", with: "\"entity\":\"Nobody\"")
                return (i + 1, "Unknown entity Nobody")
            case .danglingURI:
                // The first novel's author: a key no author has.
                let i = lines.firstIndex { $0.contains("\"entity\":\"Novel\"") }!
                let uri = lines[i].components(separatedBy: "\"author\":\"")[1].components(separatedBy: "\"")[0]
                let missing = uri.components(separatedBy: "/").dropLast().joined(separator: "/") + "/999999"
                lines[i] = lines[i].replacingOccurrences(of: "\"author\":\"\(uri)\"", with: "\"author\":\"\(missing)\"")
                return (i + 1, "not in the dump")
            case .wrongAttributeType:
                let i = lines.firstIndex { $0.contains("\"entity\":\"Author\"") }!
                lines[i] = lines[i].replacingOccurrences(of: "\"rating\":", with: "\"rating\":\"high\",\"x\":")
                return (i + 1, "attributes.rating")
            case .emptyInput:
                lines = []
                return (1, "header")
            }
        }
    }

    // MARK: Every store

    @Test("A dump loads into every store kind, which dumps the same bytes, verifies sound and reads back through the model", arguments: StoreKind.persistentCases)
    func dumpLoadsIntoEveryStore(_ kind: StoreKind) async throws {
        let (original, container) = try Self.makeSmallStore()
        let context = container.viewContext
        let dune = try #require(try context.fetch(FetchRequest<Novel>()).first { $0.title == "Dune" })
        let chapters = [Chapter(title: "Two"), Chapter(title: "One")]
        for chapter in chapters { context.insert(chapter) }
        dune.chapters = chapters   // an ordered to-many, in an order that is not the keys'
        try context.save()
        let dump = try Self.dump(original)

        let location = try Self.newLocation(kind)
        let loaded = try await LoomExecutable.run(["load", "-", location], input: dump)
        #expect(loaded.status == 0, "\(loaded.standardError)")
        let dumped = try await LoomExecutable.run(["dump", location])
        #expect(dumped.status == 0, "\(dumped.standardError)")
        #expect(Data(dumped.standardOutput.utf8) == dump)
        if Data(dumped.standardOutput.utf8) != dump { Self.reportFirstDifference(dump, Data(dumped.standardOutput.utf8)) }
        let verified = try await LoomExecutable.run(["verify", location])
        #expect(verified.status == 0, "\(verified.standardOutput)\(verified.standardError)")

        // The copy opens with the application's model: the same objects under the same URIs.
        let store = try Self.openStore(location, kind, try Schema(Self.types))
        let copy = PersistentContainer(store: store)
        #expect(try Self.summary(copy.viewContext) == Self.summary(context))
        try store.close()
    }

    @Test("Loading into a PostgreSQL schema that holds objects is refused and leaves them", PostgresServer.required, .enabled(if: LoomExecutable.opensPostgreSQL, LoomExecutable.withoutTraitReason))
    func loadingOverPostgreSQLObjectsIsRefused() async throws {
        let (original, _) = try Self.makeSmallStore()
        let dump = try Self.dump(original)
        let location = try Self.newLocation(.postgres)
        #expect(try await LoomExecutable.run(["load", "-", location], input: dump).status == 0)
        let again = try await LoomExecutable.run(["load", "-", location], input: dump)
        #expect(again.status != 0)
        #expect(again.standardError.contains("holds objects"), "\(again.standardError)")
        #expect(Data(try await LoomExecutable.run(["dump", location]).standardOutput.utf8) == dump)
    }

    /// Where a tool test's new store of `kind` lives: a file in a new folder, or a new schema on
    /// the test server, as the `loom` verbs take it.
    static func newLocation(_ kind: StoreKind) throws -> String {
        guard kind == .postgres else { return TemporaryDirectory.make().appending(path: "store.loom").path }
        let schema = try PostgresServer.configuration().schemaName
        try LoomExecutable.requirePostgreSQLTrait()
        let base = try #require(PostgresServer.url)
        return base + (base.contains("?") ? "&" : "?") + "schema=" + schema
    }

    /// The store at `location` (see ``newLocation(_:)``), opened with `schema`.
    static func openStore(_ location: String, _ kind: StoreKind, _ schema: Schema) throws -> any StoreMaintenance {
        guard kind == .postgres else { return try SQLiteStore(url: URL(filePath: location), schema: schema) }
        return try PostgreSQLStore(configuration: .init(url: location), schema: schema)
    }

    // MARK: Stores

    /// A small store of the graph models: two authors (the first the second's mentor), two novels.
    static func makeSmallStore() throws -> (URL, PersistentContainer) {
        let url = TemporaryDirectory.make().appending(path: "small.loom")
        let container = PersistentContainer(store: try SQLiteStore(url: url, schema: try Schema(types)))
        let context = container.viewContext
        let ann = Author(name: "Ann", rating: 4), bob = Author(name: "Bob")
        context.insert(ann); context.insert(bob)
        bob.mentor = ann
        let dune = Novel(title: "Dune", pages: 412, author: ann), emma = Novel(title: "Emma", author: bob)
        context.insert(dune); context.insert(emma)
        let tag = Tag(name: "classic")
        context.insert(tag)
        dune.tags = [tag]
        emma.tags = [tag]
        try context.save()
        return (url, container)
    }

    /// Objects of every model with random attribute values (extremes, nil, empty and unicode
    /// strings) and relationships of every kind, saved, then some deleted (keys with gaps).
    static func fillRandomGraph(_ context: ManagedObjectContext, _ random: inout SeededGenerator) throws {
        func pick<T>(_ values: [T]) -> T { values.randomElement(using: &random)! }
        func maybe(_ probability: Double = 0.5) -> Bool { Double.random(in: 0..<1, using: &random) < probability }
        let strings = ["", "plain", "é àçcent", "日本語のテキスト", "emoji 🧵🪡", "quote \" back\\slash / \n\t\r", "nul\u{0}inside", "\u{1F}ctrl"]
        let publishers = (0..<Int.random(in: 1...4, using: &random)).map { Publisher(name: "publisher \($0)") }
        for object in publishers { context.insert(object) }
        var authors: [Author] = []
        for i in 0..<Int.random(in: 4...15, using: &random) {
            let author = Author(name: "\(pick(strings)) \(i)", rating: pick([0, -1, Int.max, Int.min, Int.random(in: -99...99, using: &random)]))
            context.insert(author)
            author.born = maybe() ? Date(timeIntervalSinceReferenceDate: Double.random(in: -3e9...3e9, using: &random)) : nil
            if maybe() { author.publisher = pick(publishers) }
            if maybe(), let mentor = authors.randomElement(using: &random) { author.mentor = mentor }
            if maybe() {
                let profile = Profile(bio: pick(strings))
                context.insert(profile)
                author.profile = profile
            }
            authors.append(author)
        }
        let tags = (0..<Int.random(in: 1...6, using: &random)).map { Tag(name: "tag \($0) \(pick(strings))") }
        for object in tags { context.insert(object) }
        var chapters: [Chapter] = []
        for i in 0..<Int.random(in: 5...30, using: &random) {
            let novel = Novel(title: pick(strings) + " \(i)", pages: Int.random(in: 0...2000, using: &random), author: maybe(0.8) ? pick(authors) : nil)
            context.insert(novel)
            novel.year = maybe() ? Int.random(in: -3000...3000, using: &random) : nil
            novel.tags = Set(tags.filter { _ in maybe(0.3) })
            novel.chapters = (0..<Int.random(in: 0...5, using: &random)).map { Chapter(title: "chapter \($0) \(pick(strings))") }
            chapters += novel.chapters
            for _ in 0..<Int.random(in: 0...2, using: &random) { context.insert(Review(text: pick(strings), novel: novel)) }
        }
        let songs = (0..<Int.random(in: 2...10, using: &random)).map { _ in Song(name: pick(strings)) }
        for object in songs { context.insert(object) }
        for i in 0..<Int.random(in: 1...4, using: &random) {
            let playlist = Playlist(title: "playlist \(i)")
            context.insert(playlist)
            playlist.songs = songs.shuffled(using: &random).filter { _ in maybe(0.6) }
        }
        var samples: [Sample] = []
        for _ in 0..<Int.random(in: 3...12, using: &random) {
            let s = Sample()
            context.insert(s)
            s.flag = maybe()
            s.int = pick([0, 1, -1, Int.max, Int.min])
            s.int16 = pick([0, Int16.max, Int16.min, Int16.random(in: -99...99, using: &random)])
            s.int32 = pick([0, Int32.max, Int32.min])
            s.int64 = pick([0, Int64.max, Int64.min, Int64.random(in: .min ... .max, using: &random)])
            s.double = pick([0, -0.0, .pi, 1e308, -1e-308, .leastNonzeroMagnitude, 0.1, Double.random(in: -1e9...1e9, using: &random)])
            s.float = pick([0, .pi, Float.greatestFiniteMagnitude, Float.random(in: -1e6...1e6, using: &random)])
            s.string = pick(strings)
            s.date = Date(timeIntervalSinceReferenceDate: pick([0, -1e9, 7.25e8 + 0.123456, Double.random(in: -1e10...1e10, using: &random)]))
            s.data = Data((0..<Int.random(in: 0...40, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) })
            s.uuid = UUID()
            s.url = URL(string: pick(["https://example.com", "file:///tmp/a%20b", "https://example.com/path?q=1&r=%C3%A9#frag"]))!
            s.decimal = Decimal(string: pick(["0", "-1.5", "3.14159265358979323846264", "123456789012345678901234567890"]))!
            s.genre = pick([.fiction, .science, .history])
            s.priority = pick([.low, .normal, .high])
            s.dimensions = Dimensions(width: Double.random(in: 0...100, using: &random), height: pick([0, 1.5, 1e20]))
            s.optionalString = maybe() ? pick(strings) : nil
            s.optionalInt = maybe() ? Int.random(in: .min ... .max, using: &random) : nil
            s.optionalDate = maybe() ? Date(timeIntervalSinceReferenceDate: 12.5) : nil
            s.optionalData = maybe() ? Data() : nil
            s.optionalUUID = maybe() ? UUID() : nil
            s.optionalGenre = maybe() ? .history : nil
            s.optionalDimensions = maybe() ? Dimensions(width: 1, height: 2) : nil
            samples.append(s)
        }
        try context.save()
        // Gaps in the keys, and a key allocator above the highest key left.
        for chapter in chapters where maybe(0.2) { context.delete(chapter) }
        for sample in samples.suffix(2) { context.delete(sample) }
        try context.save()
    }

    /// What a context reads of every object, by URI: attributes and relationships (to-many
    /// sorted by URI, ordered ones in order).
    static func summary(_ context: ManagedObjectContext) throws -> [String: String] {
        func uri<M: PersistentModel>(_ object: M?) -> String { object.map { $0.objectID.uriRepresentation.absoluteString } ?? "nil" }
        func uris<M: PersistentModel, S: Sequence<M>>(_ objects: S) -> String { objects.map { uri($0) }.sorted().joined(separator: ",") }
        var out: [String: String] = [:]
        for a in try context.fetch(FetchRequest<Author>()) {
            out[uri(a)] = "\(a.name)|\(a.rating)|\(String(describing: a.born))|\(uri(a.publisher))|\(uri(a.mentor))|\(uris(a.students))|\(uri(a.profile))|\(uris(a.novels))"
        }
        for p in try context.fetch(FetchRequest<Publisher>()) { out[uri(p)] = "\(p.name)|\(uris(p.authors))" }
        for p in try context.fetch(FetchRequest<Profile>()) { out[uri(p)] = "\(p.bio)|\(uri(p.author))" }
        for n in try context.fetch(FetchRequest<Novel>()) {
            out[uri(n)] = "\(n.title)|\(n.pages)|\(String(describing: n.year))|\(uri(n.author))|\(uris(n.tags))|\(n.chapters.map { uri($0) })|\(uris(n.reviews))"
        }
        for t in try context.fetch(FetchRequest<Tag>()) { out[uri(t)] = "\(t.name)|\(uris(t.novels))" }
        for c in try context.fetch(FetchRequest<Chapter>()) { out[uri(c)] = "\(c.title)|\(uri(c.novel))" }
        for r in try context.fetch(FetchRequest<Review>()) { out[uri(r)] = "\(r.text)|\(r.stars)|\(uri(r.novel))" }
        for p in try context.fetch(FetchRequest<Playlist>()) { out[uri(p)] = "\(p.title)|\(p.songs.map { uri($0) })" }
        for s in try context.fetch(FetchRequest<Song>()) { out[uri(s)] = "\(s.name)|\(uris(s.playlists))" }
        for s in try context.fetch(FetchRequest<Sample>()) {
            out[uri(s)] = [
                "\(s.flag)", "\(s.int)", "\(s.int16)", "\(s.int32)", "\(s.int64)", "\(s.double.bitPattern)", "\(s.float.bitPattern)", s.string,
                "\(s.date.timeIntervalSinceReferenceDate.bitPattern)", s.data.base64EncodedString(), s.uuid.uuidString, s.url.absoluteString,
                "\(s.decimal)", "\(s.genre)", "\(s.priority)", "\(s.dimensions)", "\(String(describing: s.optionalString))",
                "\(String(describing: s.optionalInt))", "\(String(describing: s.optionalDate))", "\(String(describing: s.optionalData))",
                "\(String(describing: s.optionalUUID))", "\(String(describing: s.optionalGenre))", "\(String(describing: s.optionalDimensions))",
            ].joined(separator: "|")
        }
        return out
    }

    // MARK: Dumping and loading in process

    static func dump(_ store: URL) throws -> Data {
        let file = TemporaryDirectory.make().appending(path: "dump.ndjson")
        _ = FileManager.default.createFile(atPath: file.path, contents: nil)
        let handle = try FileHandle(forWritingTo: file)
        _ = try LoomTools.dump(storeAt: store, to: handle.fileDescriptor)
        try handle.close()
        return try Data(contentsOf: file)
    }

    static func load(_ dump: Data, into store: URL) throws -> Int {
        let file = TemporaryDirectory.make().appending(path: "load.ndjson")
        try dump.write(to: file)
        let handle = try FileHandle(forReadingFrom: file)
        defer { try? handle.close() }
        return try LoomTools.load(from: handle.fileDescriptor, into: store)
    }

    static func reportFirstDifference(_ a: Data, _ b: Data) {
        let (x, y) = (a.split(separator: 0x0A), b.split(separator: 0x0A))
        for (i, (l, r)) in zip(x, y).enumerated() where l != r {
            Issue.record("line \(i + 1) differs:\n\(String(decoding: l, as: UTF8.self))\n\(String(decoding: r, as: UTF8.self))")
            return
        }
        Issue.record("\(x.count) lines, then \(y.count)")
    }
}
