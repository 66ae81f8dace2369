import Foundation
import GRDB
import Loom
import Testing

/// The bad-input catalogue (`Loom.docc/BadInput.md`): the `loom` tool's bad command lines,
/// queries, dumps and files. Each exits with its documented status and one `Error:` line naming
/// the column, the line or the file; the store dumps the same bytes after as before, and a
/// failed `load` leaves nothing behind.
@Suite("Bad input: the loom tool", .ownThreads, .timeLimit(.minutes(5)))
struct BadInputToolTests {
    let folder = TemporaryDirectory.make()
    var store: URL { folder.appending(path: "library.loom") }

    init() async throws {
        try await LoomExecutable.makeStore(at: folder.appending(path: "library.loom"))
    }

    /// The store's dump and its file's bytes: what must not change.
    func state() async throws -> [Data] {
        let dump = try await LoomExecutable.run(["dump", store.path])
        try #require(dump.status == 0, "\(dump.standardError)")
        return [Data(dump.standardOutput.utf8), try Data(contentsOf: store)]
    }

    /// Runs `loom arguments…`, which must exit with `status` and one error line holding each of
    /// `mentions`, changing nothing in the store.
    @discardableResult
    func expectFailure(_ arguments: [String], status: Int32, mentioning mentions: [String], input: Data? = nil,
                       sourceLocation: SourceLocation = #_sourceLocation) async throws -> LoomExecutable.Output {
        let before = try await state()
        let output = try await LoomExecutable.run(arguments, input: input)
        #expect(output.status == status, "\(output.standardError)", sourceLocation: sourceLocation)
        #expect(output.standardError.hasPrefix("Error: "), "\(output.standardError)", sourceLocation: sourceLocation)
        for mention in mentions {
            #expect(output.standardError.contains(mention), "\(output.standardError) does not say \(mention)", sourceLocation: sourceLocation)
        }
        #expect(try await state() == before, "the store changed", sourceLocation: sourceLocation)
        return output
    }

    func query(_ text: String, status: Int32 = 2, mentioning mentions: [String], sourceLocation: SourceLocation = #_sourceLocation) async throws {
        try await expectFailure(["query", store.path, text], status: status, mentioning: mentions, sourceLocation: sourceLocation)
    }

    @Test func queryOfAnUnknownEntity() async throws {
        try await query("Nobody where name == 1", mentioning: ["Nobody", "column 1"])
    }

    @Test func queryOfAnEntityNamedWithSQL() async throws {
        try await query(#"Book"; DROP TABLE "Book"; --"#, mentioning: ["column"])
    }

    @Test func queryOfAnUnknownAttribute() async throws {
        try await query(#"Book where titel == "x""#, mentioning: ["titel", "did you mean 'title'?", "column 12"])
    }

    @Test func queryWithASyntaxError() async throws {
        try await query("Book where pages > 1 sortt title", mentioning: ["column 22"])
    }

    @Test func queryWithAnUnterminatedString() async throws {
        try await query(#"Book where title == "Dune"#, mentioning: ["column 21"])
    }

    @Test func queryWithAnIntegerPast64Bits() async throws {
        try await query("Book where pages > 99999999999999999999", mentioning: ["99999999999999999999", "column 20"])
    }

    @Test func queryComparingTextWithANumber() async throws {
        try await query("Book where title > 5", mentioning: ["Book.title", "column 20"])
    }

    @Test func queryWithANegativeLimit() async throws {
        try await query("Book limit -1", mentioning: ["column"])
    }

    @Test func queryNestedTooDeeply() async throws {
        // As deep as one command-line argument can be (the kernel limits one to 128 KiB).
        let depth = 30_000
        try await query("Book where " + String(repeating: "(", count: depth) + "pages > 1" + String(repeating: ")", count: depth), mentioning: ["column 268", "256 deep"])
    }

    @Test func queryNegatedTooDeeply() async throws {
        try await query("Book where " + String(repeating: "not ", count: 20_000) + "pages > 1", mentioning: ["column 1036", "256 deep"])
    }

    @Test func queryWithAVeryLongOrChain() async throws {
        // "Book where " and 1001 terms of "pages > 1" joined by " or ": the 1001st "or" is where
        // the chain passes the limit.
        let column = 11 + 1000 * "pages > 1 or ".count + "pages > 1 ".count + 1
        try await query("Book where " + Array(repeating: "pages > 1", count: 9_000).joined(separator: " or "), mentioning: ["column \(column)", "1000 conditions"])
    }

    @Test func queryWithAThousandConditions() async throws {
        // Within the parser's limit: the query reaches SQLite, which refuses an expression 1000 deep.
        try await query("Book where " + Array(repeating: "pages > 1", count: 1_000).joined(separator: " or "), mentioning: ["Expression tree is too large"])
    }

    @Test func queryWithAStrayCharacter() async throws {
        try await query("Book where pages > 1 ; drop", mentioning: ["column 22"])
    }

    @Test func anUnknownVerb() async throws {
        try await expectFailure(["frobnicate", store.path], status: 64, mentioning: ["frobnicate"])
    }

    @Test func anUnknownOption() async throws {
        try await expectFailure(["query", store.path, "Book", "--frobnicate"], status: 64, mentioning: ["--frobnicate"])
    }

    @Test func aHistoryLimitThatIsNotANumber() async throws {
        try await expectFailure(["history", store.path, "--limit", "many"], status: 64, mentioning: ["many"])
    }

    @Test func aFolderGivenAsTheStore() async throws {
        try await expectFailure(["inspect", folder.path], status: 2, mentioning: [folder.path])
    }

    /// The store's dump with `spoil` applied, loaded into a new path: exit 2 naming `mention`,
    /// and nothing left behind.
    func expectLoadRefused(mentioning mentions: [String], sourceLocation: SourceLocation = #_sourceLocation,
                           _ spoil: (inout [Data]) -> Void) async throws {
        let dump = try await state()[0]
        var lines = dump.split(separator: UInt8(ascii: "\n")).map { Data($0) }
        spoil(&lines)
        let destinationFolder = TemporaryDirectory.make()
        let destination = destinationFolder.appending(path: "copy.loom")
        try await expectFailure(["load", "-", destination.path], status: 2, mentioning: mentions,
                          input: lines.reduce(Data()) { $0 + $1 + Data("\n".utf8) }, sourceLocation: sourceLocation)
        #expect(try FileManager.default.contentsOfDirectory(atPath: destinationFolder.path).isEmpty, sourceLocation: sourceLocation)
    }

    @Test func aDumpLineThatIsNotUTF8() async throws {
        try await expectLoadRefused(mentioning: ["line 2"]) { lines in
            lines[1].insert(0xFF, at: lines[1].index(lines[1].startIndex, offsetBy: 10))
        }
    }

    @Test func aDumpOfAFutureFormatVersion() async throws {
        try await expectLoadRefused(mentioning: ["line 1"]) { lines in
            let header = String(decoding: lines[0], as: UTF8.self)
            lines[0] = Data(header.replacingOccurrences(of: #""formatVersion":"#, with: #""formatVersion":999,"was":"#).utf8)
        }
    }

    @Test func aDumpOfAnotherFormat() async throws {
        try await expectLoadRefused(mentioning: ["line 1"]) { lines in
            let header = String(decoding: lines[0], as: UTF8.self)
            lines[0] = Data(header.replacingOccurrences(of: #""loom-dump""#, with: #""pg-dump""#).utf8)
        }
    }

    @Test func aDumpWithAnObjectTwice() async throws {
        try await expectLoadRefused(mentioning: ["line 3"]) { lines in
            lines.insert(lines[1], at: 2)
        }
    }

    @Test func aDumpWithAnIntegerPast64Bits() async throws {
        try await expectLoadRefused(mentioning: ["line 2", "pages"]) { lines in
            let line = String(decoding: lines[1], as: UTF8.self)
            lines[1] = Data(line.replacingOccurrences(of: #""pages":0"#, with: #""pages":99999999999999999999999"#).utf8)
        }
    }

    @Test func aDumpWithAnObjectURIOfAnotherStore() async throws {
        try await expectLoadRefused(mentioning: ["line 2"]) { lines in
            let line = String(decoding: lines[1], as: UTF8.self)
            let uri = line.components(separatedBy: #""loom://"#)[1].components(separatedBy: "/")[0]
            lines[1] = Data(line.replacingOccurrences(of: uri, with: UUID().uuidString).utf8)
        }
    }

    @Test func aDumpMissingARequiredAttribute() async throws {
        try await expectLoadRefused(mentioning: ["line 2", "title"]) { lines in
            let line = String(decoding: lines[1], as: UTF8.self)
            lines[1] = Data(line.replacingOccurrences(of: #""title":"Dune","#, with: "").replacingOccurrences(of: #","title":"Dune""#, with: "").utf8)
        }
    }

    /// A copy of the store with the page holding its books overwritten by garbage.
    func damagedCopy() throws -> URL {
        var bytes = try Data(contentsOf: store)
        let pageSize = Int(bytes[16]) << 8 | Int(bytes[17])
        let queue = try DatabaseQueue(path: store.path)
        let root = try queue.read { try Int.fetchOne($0, sql: "SELECT rootpage FROM sqlite_master WHERE name = 'Book'") }
        try queue.close()
        let start = (try #require(root) - 1) * pageSize
        bytes.replaceSubrange(start..<(start + pageSize), with: Data(repeating: 0xA5, count: pageSize))
        let url = TemporaryDirectory.make().appending(path: "damaged.loom")
        try bytes.write(to: url)
        return url
    }

    @Test func verifyOfADamagedPage() async throws {
        let url = try damagedCopy()
        let before = try FileSnapshot(url)
        let output = try await LoomExecutable.run(["verify", url.path])
        #expect(output.status == 1 || output.status == 2, "\(output.standardOutput)\(output.standardError)")
        #expect((output.standardOutput + output.standardError).contains(url.path))
        #expect(try FileSnapshot(url) == before)
    }

    @Test func dumpOfADamagedPage() async throws {
        let url = try damagedCopy()
        let before = try FileSnapshot(url)
        let output = try await LoomExecutable.run(["dump", url.path])
        #expect(output.status == 2, "\(output.standardError)")
        #expect(output.standardError.hasPrefix("Error: ") && output.standardError.contains(url.path), "\(output.standardError)")
        #expect(try FileSnapshot(url) == before)
    }

    @Test func aPostgreSQLServerThatIsNotThere() async throws {
        try LoomExecutable.requirePostgreSQLTrait()
        let output = try await LoomExecutable.run(["inspect", "postgres://nobody@127.0.0.1:1/none"])
        #expect(output.status == 2, "\(output.standardError)")
        #expect(output.standardError.hasPrefix("Error: ") && output.standardError.contains("127.0.0.1"), "\(output.standardError)")
    }

    @Test func aPostgreSQLSchemaThatHoldsNoStore() async throws {
        try PostgresServer.requireServer()
        try LoomExecutable.requirePostgreSQLTrait()
        let base = try #require(PostgresServer.url)
        let location = base + (base.contains("?") ? "&" : "?") + "schema=absent_\(UInt32.random(in: 0...UInt32.max))"
        let output = try await LoomExecutable.run(["query", location, "Book"])
        #expect(output.status == 2, "\(output.standardError)")
        #expect(output.standardError.hasPrefix("Error: ") && output.standardError.contains("absent_"), "\(output.standardError)")
        let inspect = try await LoomExecutable.run(["inspect", location])
        #expect(inspect.status == 2, "inspecting must not have made a store: \(inspect.standardError)")
    }
}
