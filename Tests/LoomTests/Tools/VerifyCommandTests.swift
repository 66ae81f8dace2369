import Foundation
import GRDB
import Loom
@_spi(LoomStore) import LoomCore
import LoomTools
import Testing

/// `loom verify`, run as the built executable on real stores: a sound store, each kind of
/// damage planted by raw SQL after the store was closed, a store open in another connection,
/// and files that are not Loom stores.
@MainActor
@Suite("loom verify", .ownThreads)
struct VerifyCommandTests {
    @Test func aSoundStoreVerifiesCleanAsTextAndJSON() async throws {
        let store = try await VerifyFixture.makeStore()
        let text = try await LoomExecutable.run(["verify", store.url.path])
        #expect(text.status == 0, "\(text.standardOutput)\(text.standardError)")
        #expect(text.standardOutput.contains("No problems in \(VerifyFixture.objectCount) objects"))
        let json = try await LoomExecutable.run(["verify", "--json", store.url.path])
        #expect(json.status == 0)
        let report = try JSONDecoder().decode(VerificationReport.self, from: Data(json.standardOutput.utf8))
        #expect(report.healthy && report.findings.isEmpty && !report.isTruncated)
        #expect(report.objectCount == VerifyFixture.objectCount)
        #expect(report.storeIdentifier == store.identifier)
    }

    @Test(arguments: Corruption.allCases)
    func eachKindOfDamageIsNamedWithItsObject(_ corruption: Corruption) async throws {
        let store = try await VerifyFixture.makeStore()
        let expected = try corruption.plant(in: store)
        let (text, report) = try await Self.verifyDamaged(store, expecting: expected.kind)
        #expect(!report.healthy)
        let matching = report.findings.filter { $0.kind == expected.kind }
        #expect(!matching.isEmpty, "\(report.findings)")
        if let key = expected.key {
            let uri = "loom://\(store.identifier)/\(expected.entity ?? "")/\(key)"
            #expect(matching.contains { $0.object == uri }, "\(matching)")
            #expect(text.contains(uri))
        } else if expected.kind != .sqliteIntegrity {
            #expect(matching.contains { $0.entity == expected.entity }, "\(matching)")
        }
    }

    @Test func aStoreWithEveryAttributeTypeAndItsHistoryVerifiesClean() async throws {
        let store = try await ValueFixture.makeStore()
        let report = try StoreVerifier(url: store.url).verify()
        #expect(report.healthy, "\(report.findings)")
        #expect(report.objectCount == 2)
    }

    @Test(arguments: WrongValue.allCases)
    func eachWrongValueIsNamedWithItsAttributeAndObjectButNotItsValue(_ wrong: WrongValue) async throws {
        let store = try await ValueFixture.makeStore()
        let (key, kind) = try wrong.plant(in: store)
        let report = try StoreVerifier(url: store.url).verify()
        let uri = "loom://\(store.identifier)/Sample/\(key)"
        let matching = report.findings.filter { $0.kind == kind && $0.entity == "Sample" && $0.property == wrong.attribute && $0.object == uri }
        #expect(matching.count == 1, "\(report.findings)")
        for finding in report.findings {
            #expect(!finding.message.contains(wrong.shownValue), "\(finding.message)")
        }
        // The other object is untouched and not reported.
        #expect(report.findings.allSatisfy { $0.object == nil || $0.object == uri }, "\(report.findings)")
    }

    @Test func aRequiredColumnOfNullsIsReportedForEveryObject() async throws {
        let store = try await ValueFixture.makeStore()
        try StoreFileSQL.write(at: store.url) { db in
            try db.execute(sql: "ALTER TABLE Sample RENAME COLUMN string TO old_string; ALTER TABLE Sample ADD COLUMN string TEXT")
        }
        let report = try StoreVerifier(url: store.url).verify()
        let missing = report.findings.filter { $0.kind == .missingRequiredValue && $0.property == "string" }
        #expect(missing.count == 2, "\(report.findings)")
        #expect(report.findings.contains { $0.kind == .columnNullabilityMismatch })
    }

    @Test(arguments: DamagedHistory.allCases)
    func damagedHistoryIsReportedAndTheToolExitsWithOne(_ damage: DamagedHistory) async throws {
        let store = try await ValueFixture.makeStore()
        let number = try damage.plant(in: store)
        let (text, report) = try await Self.verifyDamaged(store, expecting: .malformedHistory)
        #expect(text.contains("History transaction #\(number) "), "\(text)")
        #expect(report.findings.map(\.kind) == [.malformedHistory], "\(report.findings)")
        #expect(report.findings.first?.message.contains(damage.expectedWords) == true, "\(report.findings)")
    }

    @Test func historyThatLoomHistoryCannotReadIsWhatVerifyReports() async throws {
        let store = try await ValueFixture.makeStore()
        _ = try DamagedHistory.garbageChanges.plant(in: store)
        let history = try await LoomExecutable.run(["history", store.url.path])
        #expect(history.status != 0)
        let verify = try await LoomExecutable.run(["verify", store.url.path])
        #expect(verify.status == 1)
        #expect(!verify.standardOutput.contains("No problems"))
    }

    /// Runs `loom verify` on a damaged store, as text and as JSON, expecting exit status 1 and a
    /// finding of `kind` in both; returns the text output and the report.
    static func verifyDamaged(_ store: VerifyFixture.Store, expecting kind: VerificationFinding.Kind) async throws -> (text: String, report: VerificationReport) {
        let text = try await LoomExecutable.run(["verify", store.url.path])
        #expect(text.status == 1, "\(text.standardOutput)\(text.standardError)")
        #expect(text.standardOutput.contains(kind.rawValue), "\(text.standardOutput)")
        let json = try await LoomExecutable.run(["verify", "--json", store.url.path])
        #expect(json.status == 1)
        return (text.standardOutput, try JSONDecoder().decode(VerificationReport.self, from: Data(json.standardOutput.utf8)))
    }

    @Test func verifyingLeavesTheStoreFileAsItWas() async throws {
        let store = try await VerifyFixture.makeStore()
        _ = try Corruption.danglingForeignKey.plant(in: store)
        let before = try FileSnapshot(store.url)
        #expect(try await LoomExecutable.run(["verify", store.url.path]).status == 1)
        #expect(try await LoomExecutable.run(["verify", "--json", "--quick", store.url.path]).status == 1)
        #expect(try FileSnapshot(store.url) == before)
    }

    @Test func aStoreOpenInAnotherConnectionIsVerifiedWithItsLatestCommits() async throws {
        let store = try await VerifyFixture.makeStore()
        let container = try PersistentContainer(name: "Graph", for: Publisher.self, Author.self, Profile.self, Novel.self, Tag.self, Chapter.self, Review.self, location: .file(store.url))
        container.viewContext.insert(Tag(name: "added while open"))
        try container.viewContext.save()
        let output = try await LoomExecutable.run(["verify", "--json", store.url.path])
        #expect(output.status == 0, "\(output.standardOutput)\(output.standardError)")
        let report = try JSONDecoder().decode(VerificationReport.self, from: Data(output.standardOutput.utf8))
        #expect(report.objectCount == VerifyFixture.objectCount + 1)
        // The open container goes on saving: verify took no lock it kept.
        container.viewContext.insert(Tag(name: "added after verify"))
        try container.viewContext.save()
        try await container.close()
    }

    @Test func theLibraryReportsProgressAndFindings() async throws {
        let store = try await VerifyFixture.makeStore()
        _ = try Corruption.versionZero.plant(in: store)
        var steps: [VerificationProgress] = []
        var verifier = StoreVerifier(url: store.url)
        verifier.integrityCheck = .quick
        let report = try verifier.verify { steps.append($0) }
        #expect(report.findings.map(\.kind) == [.invalidVersion])
        #expect(steps.first?.completed == 0 && steps.last?.completed == steps.last?.total)
        #expect(report.checkCount == steps.last?.total)
    }

    @Test func aMissingPathIsAClearErrorAndCreatesNothing() async throws {
        let folder = TemporaryDirectory.make()
        let output = try await LoomExecutable.run(["verify", folder.appending(path: "absent.loom").path])
        #expect(output.status == 2)
        #expect(output.standardError.contains("There is no store at"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).isEmpty)
    }

    @Test func aFileThatIsNotSQLiteIsAClearErrorAndIsUnchanged() async throws {
        let url = TemporaryDirectory.make().appending(path: "notes.loom")
        try Data("not a database\n".utf8).write(to: url)
        let before = try FileSnapshot(url)
        let output = try await LoomExecutable.run(["verify", url.path])
        #expect(output.status == 2)
        #expect(output.standardError.contains("is not a SQLite database"))
        #expect(try FileSnapshot(url) == before)
    }

    @Test func aSQLiteFileThatIsNotALoomStoreIsAClearErrorAndIsUnchanged() async throws {
        let url = TemporaryDirectory.make().appending(path: "people.sqlite")
        let queue = try DatabaseQueue(path: url.path)
        try await queue.write { try $0.execute(sql: "CREATE TABLE people (name TEXT); INSERT INTO people VALUES ('Ann')") }
        try queue.close()
        let before = try FileSnapshot(url)
        let output = try await LoomExecutable.run(["verify", url.path])
        #expect(output.status == 2)
        #expect(output.standardError.contains("is not a Loom store"))
        #expect(try FileSnapshot(url) == before)
    }

    /// A new store of `kind` with the dump tests' schema, and where it is.
    private static func emptyStore(_ kind: StoreKind) throws -> (location: String, store: any StoreMaintenance) {
        let location = try DumpLoadTests.newLocation(kind)
        return (location, try DumpLoadTests.openStore(location, kind, try Schema(DumpLoadTests.types)))
    }

    @Test(arguments: StoreKind.persistentCases)
    func damageWrittenThroughTheStoreIsFoundOnEveryStore(_ kind: StoreKind) async throws {
        let (location, store) = try Self.emptyStore(kind)
        let identifier = store.identifier
        // A tag with a key the key allocator never handed out, of version 0.
        let tag = try #require(store.schema.entity(named: "Tag"))
        var values = [StoredValue](repeating: .null, count: tag.storedValueCount)
        values[0] = .text("planted")
        try store.bulkLoad(as: identifier, metadata: [:]) { writer in
            try writer.insert(tag, key: 7, version: 0, values: values, textBytes: [])
        }
        try store.close()
        let output = try await LoomExecutable.run(["verify", "--json", location])
        #expect(output.status == 1, "\(output.standardOutput)\(output.standardError)")
        let report = try JSONDecoder().decode(VerificationReport.self, from: Data(output.standardOutput.utf8))
        let uri = "loom://\(identifier)/Tag/7"
        // SQLite's check names a row's first problem; the SPI's names each.
        #expect(report.findings.contains { $0.object == uri && $0.kind == .keyOutOfRange }, "\(report.findings)")
        #expect(report.objectCount == 1)
    }

    @Test(arguments: StoreKind.persistentCases)
    func damagedOrdersArePastAPageFoundOnEveryStore(_ kind: StoreKind) async throws {
        let (location, store) = try Self.emptyStore(kind)
        let identifier = store.identifier
        let playlist = try #require(store.schema.entity(named: "Playlist"))
        let songs = try #require(store.schema.relationships(of: playlist).first { $0.description.name == "songs" })
        let order = try #require(playlist.storedValueIndex(ofRelationship: songs.index))
        // More playlists than a page of rows holds: the damaged ones are on the third page.
        let count: Int64 = 1_201
        try store.bulkLoad(as: identifier, metadata: [:]) { writer in
            for key in 1...count {
                var values = [StoredValue](repeating: .null, count: playlist.storedValueCount)
                values[0] = .text("Playlist \(key)")
                if key == count - 1 { values[order] = .blob(Data([1, 2, 3])) }
                if key == count { values[order] = .blob(Data(repeatElement([5, 0, 0, 0, 0, 0, 0, 0] as [UInt8], count: 2).joined())) }
                try writer.insert(playlist, key: key, version: 1, values: values, textBytes: [])
            }
            try writer.setNextKey(count + 1, for: playlist)
        }
        try store.close()
        let output = try await LoomExecutable.run(["verify", "--json", location])
        #expect(output.status == 1, "\(output.standardOutput)\(output.standardError)")
        let report = try JSONDecoder().decode(VerificationReport.self, from: Data(output.standardOutput.utf8))
        #expect(report.findings.map(\.kind).sorted { $0.rawValue < $1.rawValue } == [.duplicateInOrder, .malformedOrder], "\(report.findings)")
        let malformed = try #require(report.findings.first { $0.kind == .malformedOrder })
        #expect(malformed.object == "loom://\(identifier)/Playlist/\(count - 1)")
        #expect(malformed.message == "Playlist \(count - 1)'s saved order of songs is not a list of 8-byte keys; Loom reads it as empty.")
        let duplicate = try #require(report.findings.first { $0.kind == .duplicateInOrder })
        #expect(duplicate.object == "loom://\(identifier)/Playlist/\(count)")
        #expect(duplicate.message == "Playlist \(count)'s saved order of songs lists Song 5 more than once.")
        #expect(report.objectCount == Int(count))
    }

    @Test func helpHasAnExample() async throws {
        let output = try await LoomExecutable.run(["verify", "--help"])
        #expect(output.status == 0)
        #expect(output.standardOutput.contains("$ loom verify Library.loom"))
        #expect(output.standardOutput.contains("--json"))
    }
}

/// A graph store with every kind of relationship, saved through Loom and closed.
@MainActor
enum VerifyFixture {
    struct Store {
        var url: URL
        var identifier: String
    }

    /// 1 publisher, 4 authors (with profiles and mentors), 8 novels (tags, 3 ordered chapters
    /// and a review each), 3 tags.
    static let objectCount = 1 + 4 * 2 + 8 * (1 + 3 + 1) + 3

    static func makeStore() async throws -> Store {
        let url = TemporaryDirectory.make().appending(path: "graph.loom")
        let container = try PersistentContainer(name: "Graph", for: Publisher.self, Author.self, Profile.self, Novel.self, Tag.self, Chapter.self, Review.self, location: .file(url))
        let context = container.viewContext
        let publisher = Publisher(name: "Pub")
        context.insert(publisher)
        let tags = (0..<3).map { Tag(name: "tag \($0)") }
        tags.forEach(context.insert)
        var mentor: Author?
        for i in 0..<4 {
            let author = Author(name: "Author \(i)")
            context.insert(author)
            author.publisher = publisher
            let profile = Profile(bio: "bio \(i)")
            context.insert(profile)
            author.profile = profile
            author.mentor = mentor
            mentor = author
            for n in 0..<2 {
                let novel = Novel(title: "Novel \(n)", author: author)
                context.insert(novel)
                novel.tags = Set(tags.prefix(n + 1))
                let chapters = ["One", "Two", "Three"].map(Chapter.init(title:))
                chapters.forEach(context.insert)
                novel.chapters = chapters
                context.insert(Review(text: "fine", novel: novel))
            }
        }
        try context.save()
        try await container.close()
        let identifier: String = try StoreFileSQL.value(at: url, "SELECT value FROM loom_metadata WHERE key = 'storeIdentifier'")
        return Store(url: url, identifier: identifier)
    }
}

/// A store of two `Sample`s, one attribute of every type each, saved in two transactions
/// (inserts, then an update of the first), so that its history has both kinds of group.
@MainActor
enum ValueFixture {
    static func makeStore() async throws -> VerifyFixture.Store {
        let url = TemporaryDirectory.make().appending(path: "values.loom")
        let container = try PersistentContainer(name: "Values", for: Sample.self, location: .file(url))
        let context = container.viewContext
        let first = Sample(), second = Sample()
        second.flag = true
        second.int16 = -32768
        second.int32 = .max
        second.int64 = .min
        second.float = .greatestFiniteMagnitude
        second.string = "é ✓"
        second.decimal = Decimal(string: "-12.345")!
        second.url = URL(string: "https://example.com/a?b=c")!
        second.uuid = UUID()
        second.optionalUUID = UUID()
        second.optionalDimensions = Dimensions(width: 1.5, height: -2)
        second.priority = .high
        context.insert(first)
        context.insert(second)
        try context.save()
        first.string = "changed"
        first.optionalString = "set"
        try context.save()
        try await container.close()
        let identifier: String = try StoreFileSQL.value(at: url, "SELECT value FROM loom_metadata WHERE key = 'storeIdentifier'")
        return VerifyFixture.Store(url: url, identifier: identifier)
    }
}

/// A value Loom cannot read back as its attribute's type, planted by raw SQL in the first
/// `Sample`: the attribute, the SQL of the value, the finding expected and how the value would
/// show in text (which no finding may contain).
enum WrongValue: String, CaseIterable, CustomTestStringConvertible {
    case boolSeven, boolText, int16Above, int16Below, int32Above, intText, int64Real, doubleText, doubleBlob, floatBeyondRange
    case stringBlob, stringNotUTF8, dateText, dataText, uuidTwoBytes, optionalUUIDOneByte, urlEmpty, decimalWord
    case enumBlob, codableNotJSON, codableText, optionalCodableNotJSON

    var testDescription: String { rawValue }

    var plan: (attribute: String, sql: String, kind: VerificationFinding.Kind, shown: String) {
        switch self {
        case .boolSeven: ("flag", "7", .valueOutOfRange, "7")
        case .boolText: ("flag", "'yes'", .wrongValueType, "yes")
        case .int16Above: ("int16", "40000", .valueOutOfRange, "40000")
        case .int16Below: ("int16", "-40000", .valueOutOfRange, "40000")
        case .int32Above: ("int32", "3000000000", .valueOutOfRange, "3000000000")
        case .intText: ("int", "'twelve'", .wrongValueType, "twelve")
        case .int64Real: ("int64", "1.5", .wrongValueType, "1.5")
        case .doubleText: ("double", "'pi'", .wrongValueType, "pi")
        case .doubleBlob: ("double", "x'0102'", .wrongValueType, "0102")
        case .floatBeyondRange: ("float", "1e300", .valueOutOfRange, "1e+300")
        case .stringBlob: ("string", "x'414243'", .wrongValueType, "ABC")
        case .stringNotUTF8: ("string", "CAST(x'41C328FF' AS TEXT)", .malformedValue, "A\u{FFFD}(")
        case .dateText: ("date", "'yesterday'", .wrongValueType, "yesterday")
        case .dataText: ("data", "'plain'", .wrongValueType, "plain")
        case .uuidTwoBytes: ("uuid", "x'0102'", .malformedValue, "0102")
        case .optionalUUIDOneByte: ("optionalUUID", "x'01'", .malformedValue, "01")
        case .urlEmpty: ("url", "''", .malformedValue, "\"\"")
        case .decimalWord: ("decimal", "'twelve'", .malformedValue, "twelve")
        case .enumBlob: ("genre", "x'00'", .wrongValueType, "00")
        case .codableNotJSON: ("dimensions", "CAST('{\"width\": 1,' AS BLOB)", .malformedValue, "width")
        case .codableText: ("dimensions", "'{}'", .wrongValueType, "{}")
        case .optionalCodableNotJSON: ("optionalDimensions", "x'FFFE'", .malformedValue, "FFFE")
        }
    }

    var attribute: String { plan.attribute }
    var shownValue: String { plan.shown }

    /// Plants the value and returns the object's key and the finding's kind.
    func plant(in store: VerifyFixture.Store) throws -> (Int64, VerificationFinding.Kind) {
        let plan = plan
        let key: Int64 = try StoreFileSQL.value(at: store.url, "SELECT MIN(Z_PK) FROM Sample")
        try StoreFileSQL.write(at: store.url) { db in
            try db.execute(sql: "UPDATE Sample SET \(plan.attribute) = \(plan.sql) WHERE Z_PK = ?", arguments: [key])
        }
        return (key, plan.kind)
    }
}

/// History rows damaged by raw SQL: what `loom history` reads and fails on.
enum DamagedHistory: String, CaseIterable, CustomTestStringConvertible {
    case garbageChanges, truncatedChanges, unknownEntity, entityListWithoutTheEntity, textTimestamp, blobAuthor

    var testDescription: String { rawValue }

    /// Words the finding's message has.
    var expectedWords: String {
        switch self {
        case .garbageChanges, .truncatedChanges: "packed changes that cannot be read"
        case .unknownEntity: "names the entity Sampla"
        case .entityListWithoutTheEntity: "entity list does not name Sample"
        case .textTimestamp: "timestamp that is not a number"
        case .blobAuthor: "author that is neither text nor NULL"
        }
    }

    /// Damages the newest history transaction and returns its number.
    func plant(in store: VerifyFixture.Store) throws -> Int64 {
        try StoreFileSQL.write(at: store.url) { db in
            let number = try Int64.fetchOne(db, sql: "SELECT MAX(number) FROM loom_history")!
            let changes = try Data.fetchOne(db, sql: "SELECT changes FROM loom_history WHERE number = ?", arguments: [number])!
            let update: (String, any DatabaseValueConvertible) = switch self {
            case .garbageChanges: ("changes", Data([0xFF, 0x00, 0x13]))
            case .truncatedChanges: ("changes", changes.dropLast(3))
            case .unknownEntity: ("changes", Self.renaming(changes))
            case .entityListWithoutTheEntity: ("entities", ",")
            case .textTimestamp: ("timestamp", "noon")
            case .blobAuthor: ("author", Data([1, 2]))
            }
            try db.execute(sql: "UPDATE loom_history SET \(update.0) = ? WHERE number = ?", arguments: [update.1, number])
            return number
        }
    }

    /// The packed changes with the entity name `Sample` spelt `Sampla` (same length).
    private static func renaming(_ changes: Data) -> Data {
        let bytes = [UInt8](changes), name = Array("Sample".utf8)
        var result = bytes
        for i in 0...(bytes.count - name.count) where Array(bytes[i..<i + name.count]) == name { result[i + name.count - 1] = UInt8(ascii: "a") }
        return Data(result)
    }
}

/// Raw SQL on a closed store file.
enum StoreFileSQL {
    static func write<T>(at url: URL, _ body: (Database) throws -> T) throws -> T {
        let queue = try DatabaseQueue(path: url.path)
        defer { try? queue.close() }
        return try queue.write(body)
    }

    static func value<T: DatabaseValueConvertible>(at url: URL, _ sql: String) throws -> T {
        try write(at: url) { db in try T.fetchOne(db, sql: sql)! }
    }
}

/// What verify must report for a planted corruption: its kind and the object (or, for damage
/// to the layout, the entity) concerned.
struct ExpectedFinding {
    var kind: VerificationFinding.Kind
    var entity: String?
    var key: Int64?
}

/// One kind of damage, planted by raw SQL (or by overwriting a page) in a closed store.
enum Corruption: String, CaseIterable, CustomTestStringConvertible {
    case danglingForeignKey, oneToOneMismatch, danglingJoinRow, duplicateInOrder, malformedOrder
    case versionZero, keyAboveAllocatorMark, duplicateUniqueValue, droppedUniqueIndex
    case missingColumn, missingTable, wrongColumnType, versionHashChanged, corruptedPage

    var testDescription: String { rawValue }

    func plant(in store: VerifyFixture.Store) throws -> ExpectedFinding {
        let url = store.url
        if self == .corruptedPage { return try corruptPage(at: url) }
        return try StoreFileSQL.write(at: url) { db throws -> ExpectedFinding in
            func key(_ sql: String) throws -> Int64 { try Int64.fetchOne(db, sql: sql)! }
            switch self {
            case .danglingForeignKey:
                let novel = try key("SELECT MIN(Z_PK) FROM Novel")
                try db.execute(sql: "UPDATE Novel SET Z_author = 999999 WHERE Z_PK = ?", arguments: [novel])
                return ExpectedFinding(kind: .danglingForeignKey, entity: "Novel", key: novel)
            case .oneToOneMismatch:
                // The profile forgets its author; the author still names the profile.
                let author = try key("SELECT MIN(Z_PK) FROM Author WHERE Z_profile IS NOT NULL")
                try db.execute(sql: "UPDATE Profile SET Z_author = NULL WHERE Z_author = ?", arguments: [author])
                return ExpectedFinding(kind: .inverseMismatch, entity: "Author", key: author)
            case .danglingJoinRow:
                let novel = try key("SELECT MIN(Z_PK) FROM Novel")
                try db.execute(sql: "INSERT INTO Z_Novel_tags (Z_SOURCE, Z_TARGET) VALUES (?, 999999)", arguments: [novel])
                return ExpectedFinding(kind: .danglingJoinRow, entity: "Novel", key: novel)
            case .duplicateInOrder:
                let novel = try key("SELECT MIN(Z_PK) FROM Novel")
                var order = try Data.fetchOne(db, sql: "SELECT Z_chapters_ORDER FROM Novel WHERE Z_PK = ?", arguments: [novel])!
                order += order.prefix(8)
                try db.execute(sql: "UPDATE Novel SET Z_chapters_ORDER = ? WHERE Z_PK = ?", arguments: [order, novel])
                return ExpectedFinding(kind: .duplicateInOrder, entity: "Novel", key: novel)
            case .malformedOrder:
                let novel = try key("SELECT MAX(Z_PK) FROM Novel")
                try db.execute(sql: "UPDATE Novel SET Z_chapters_ORDER = x'0102' WHERE Z_PK = ?", arguments: [novel])
                return ExpectedFinding(kind: .malformedOrder, entity: "Novel", key: novel)
            case .versionZero:
                let author = try key("SELECT MAX(Z_PK) FROM Author")
                try db.execute(sql: "UPDATE Author SET Z_OPT = 0 WHERE Z_PK = ?", arguments: [author])
                return ExpectedFinding(kind: .invalidVersion, entity: "Author", key: author)
            case .keyAboveAllocatorMark:
                let mark = try key("SELECT next FROM loom_keys WHERE entity = 'Tag'")
                try db.execute(sql: "INSERT INTO Tag (Z_PK, Z_OPT, name) VALUES (?, 1, 'from the future')", arguments: [mark + 10])
                return ExpectedFinding(kind: .keyOutOfRange, entity: "Tag", key: mark + 10)
            case .duplicateUniqueValue:
                let (first, second) = (try key("SELECT MIN(Z_PK) FROM Tag"), try key("SELECT MAX(Z_PK) FROM Tag"))
                try db.execute(sql: "DROP INDEX loom_unique_Tag_name")
                try db.execute(sql: "UPDATE Tag SET name = (SELECT name FROM Tag WHERE Z_PK = ?) WHERE Z_PK = ?", arguments: [first, second])
                return ExpectedFinding(kind: .uniquenessViolation, entity: "Tag", key: second)
            case .droppedUniqueIndex:
                try db.execute(sql: "DROP INDEX loom_unique_Publisher_name")
                return ExpectedFinding(kind: .missingUniqueIndex, entity: "Publisher")
            case .missingColumn:
                try db.execute(sql: "ALTER TABLE Author DROP COLUMN rating")
                return ExpectedFinding(kind: .missingColumn, entity: "Author")
            case .missingTable:
                try db.execute(sql: "DROP TABLE Review")
                return ExpectedFinding(kind: .missingTable, entity: "Review")
            case .wrongColumnType:
                try db.execute(sql: "ALTER TABLE Chapter RENAME COLUMN title TO old_title; ALTER TABLE Chapter ADD COLUMN title BLOB")
                return ExpectedFinding(kind: .columnTypeMismatch, entity: "Chapter")
            case .versionHashChanged:
                try db.execute(sql: "UPDATE loom_metadata SET value = '0123456789abcdef' WHERE key = 'versionHash'")
                return ExpectedFinding(kind: .schemaHashMismatch, entity: nil)
            case .corruptedPage:
                fatalError("planted by corruptPage(at:)")
            }
        }
    }

    /// Overwrites the header of the page that holds the Chapter table with garbage.
    private func corruptPage(at url: URL) throws -> ExpectedFinding {
        let (root, pageSize): (Int, Int) = try StoreFileSQL.write(at: url) { db in
            (try Int.fetchOne(db, sql: "SELECT rootpage FROM sqlite_master WHERE name = 'Chapter'")!,
             try Int.fetchOne(db, sql: "PRAGMA page_size")!)
        }
        let handle = try FileHandle(forUpdating: url)
        try handle.seek(toOffset: UInt64((root - 1) * pageSize))
        try handle.write(contentsOf: Data(repeating: 0xEE, count: 64))
        try handle.close()
        return ExpectedFinding(kind: .sqliteIntegrity, entity: "Chapter")
    }
}

/// A file's bytes and modification time.
struct FileSnapshot: Equatable {
    var bytes: Data
    var modified: Date?

    init(_ url: URL) throws {
        bytes = try Data(contentsOf: url)
        modified = try FileManager.default.attributesOfItem(atPath: url.path)[.modificationDate] as? Date
    }
}

/// Builds the 1M-object store the verify figure is measured on, at the path in
/// `LOOM_VERIFY_BENCH_STORE` (skipped without it): the graph models' empty store made by Loom,
/// then filled by raw SQL, every relationship kind populated and the key allocator moved past
/// every key.
///
///     LOOM_VERIFY_BENCH_STORE=/tmp/million.loom swift test --skip-build --filter VerifyBenchmarkStore
///     time .build/release/loom verify /tmp/million.loom
@Suite struct VerifyBenchmarkStore {
    static let path = ProcessInfo.processInfo.environment["LOOM_VERIFY_BENCH_STORE"]

    @Test(.enabled(if: path != nil)) @MainActor
    func buildAMillionObjectStore() async throws {
        let url = URL(filePath: Self.path!)
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: url.path + suffix) }
        let container = try PersistentContainer(name: "Graph", for: Publisher.self, Author.self, Profile.self, Novel.self, Tag.self, Chapter.self, Review.self, location: .file(url))
        try await container.close()
        let counts = ["Publisher": 100, "Author": 100_000, "Profile": 100_000, "Novel": 300_000, "Tag": 1_000, "Chapter": 300_000, "Review": 198_900]
        #expect(counts.values.reduce(0, +) == 1_000_000)
        func numbers(_ n: Int) -> String { "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < \(n)) " }
        try StoreFileSQL.write(at: url) { db in
            // An ordered relationship's saved order: the keys as 8-byte little-endian integers.
            db.add(function: DatabaseFunction("order_of", argumentCount: 1, pure: true) { values in
                withUnsafeBytes(of: (Int64.fromDatabaseValue(values[0]) ?? 0).littleEndian) { Data($0) }
            })
            try db.execute(sql: "INSERT INTO Publisher (Z_PK, Z_OPT, name) \(numbers(100)) SELECT i, 1, 'Publisher ' || i FROM n")
            try db.execute(sql: "INSERT INTO Author (Z_PK, Z_OPT, name, rating, Z_publisher, Z_profile, Z_mentor) \(numbers(100_000)) SELECT i, 1, 'Author ' || i, i % 5, 1 + i % 100, i, NULLIF(i - 1, 0) FROM n")
            try db.execute(sql: "INSERT INTO Profile (Z_PK, Z_OPT, bio, Z_author) \(numbers(100_000)) SELECT i, 1, 'Bio', i FROM n")
            try db.execute(sql: "INSERT INTO Novel (Z_PK, Z_OPT, title, pages, Z_author, Z_chapters_ORDER) \(numbers(300_000)) SELECT i, 1, 'Novel ' || i, 100, 1 + i % 100000, order_of(i) FROM n")
            try db.execute(sql: "INSERT INTO Tag (Z_PK, Z_OPT, name) \(numbers(1_000)) SELECT i, 1, 'Tag ' || i FROM n")
            try db.execute(sql: "INSERT INTO Z_Novel_tags (Z_SOURCE, Z_TARGET) \(numbers(300_000)) SELECT i, 1 + i % 1000 FROM n")
            try db.execute(sql: "INSERT INTO Chapter (Z_PK, Z_OPT, title, Z_novel) \(numbers(300_000)) SELECT i, 1, 'Chapter', i FROM n")
            try db.execute(sql: "INSERT INTO Review (Z_PK, Z_OPT, text, stars, Z_novel) \(numbers(198_900)) SELECT i, 1, 'Fine', 3, 1 + i % 300000 FROM n")
            for (entity, count) in counts {
                try db.execute(sql: "INSERT OR REPLACE INTO loom_keys (entity, next) VALUES (?, ?)", arguments: [entity, count + 1])
            }
        }
        let report = try StoreVerifier(url: url).verify()
        #expect(report.healthy, "\(report.findings.prefix(5))")
        #expect(report.objectCount == 1_000_000)
    }
}
