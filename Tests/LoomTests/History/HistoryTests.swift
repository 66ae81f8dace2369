import Foundation
import Loom
@_spi(LoomStore) @testable import LoomCore
import LoomSQL
@_spi(LoomStore) import LoomSQLite
import Testing

@Suite("Persistent history", .timeLimit(.minutes(5)))
struct HistoryTests {
    typealias Author = LibraryRelsV2.Author
    typealias Book = LibraryRelsV2.Book
    typealias Tag = LibraryRelsV2.Tag

    static func container(options: SQLiteStore.Options = SQLiteStore.Options()) throws -> PersistentContainer {
        PersistentContainer(store: try SQLiteStore(url: TemporaryDirectory.make().appending(path: "history.loom"), schema: try LibraryRelsV2.schema(), options: options))
    }

    static func describe(_ change: HistoryChange) -> String {
        switch change.kind {
        case .insert: "+\(change.objectID)"
        case .update(let properties): "~\(change.objectID)(\(properties.joined(separator: ",")))"
        case .delete: "-\(change.objectID)"
        }
    }

    @Test("Every save records a transaction, in commit order: its author, context and process, and each object inserted, updated (which properties) or deleted")
    func savesAreRecorded() async throws {
        let container = try Self.container()
        let importer = container.newBackgroundContext(name: "importer")
        try await importer.perform { context in
            context.transactionAuthor = "import"
            let ann = Author(name: "Ann")
            let book = Book(title: "B1")
            let tag = Tag(name: "red")
            context.insert(ann)
            context.insert(book)
            context.insert(tag)
            book.writer = ann
            try context.save()
            book.title = "B1, revised"
            book.labels.insert(tag)
            try context.save()
            context.delete(tag)
            try context.save()
        }
        let transactions = try await container.performBackgroundTask { try $0.fetchHistory(HistoryDescriptor()) }
        #expect(transactions.map(\.token.transactionNumber) == [1, 2, 3])
        #expect(transactions.allSatisfy { $0.author == "import" && $0.contextName == "importer" && $0.processIdentifier == getpid() })
        #expect(transactions[0].changes.map(Self.describe) == ["+Author/1", "+Book/1", "+Tag/1"])
        #expect(transactions[1].changes.map(Self.describe) == ["~Book/1(labels,title)", "~Tag/1(books)"])
        #expect(transactions[2].changes.map(Self.describe) == ["~Book/1(labels)", "-Tag/1"])
        #expect(zip(transactions, transactions.dropFirst()).allSatisfy { $0.timestamp <= $1.timestamp && $0.token < $1.token })
        let current = try await container.performBackgroundTask { try $0.currentHistoryToken() }
        #expect(current == transactions.last?.token)
        try await container.close()
    }

    @Test("A transaction prints as text (what `loom history` shows) and round-trips through JSON (`loom history --json`)")
    func textAndJSON() async throws {
        let container = try Self.container()
        try await container.save { context in
            context.transactionAuthor = "import"
            let book = Book(title: "B1")
            context.insert(book)
            context.insert(Tag(name: "red"))
        }
        try await container.save { context in
            let book = try context.fetch(FetchRequest<Book>()).first!
            book.title = "B2"
            book.labels.insert(try context.fetch(FetchRequest<Tag>()).first!)
            context.delete(try context.fetch(FetchRequest<Tag>()).first!)
        }
        let transactions = try await container.performBackgroundTask { try $0.fetchHistory(HistoryDescriptor()) }
        let lines = transactions.map(\.description).joined(separator: "\n").split(separator: "\n").map(String.init)
        #expect(lines.count == 6)
        #expect(lines[0].hasPrefix("#1 ") && lines[0].contains("author: import, context: ") && lines[0].contains("process: "))
        #expect(Array(lines[1...2]) == ["  + Book/1", "  + Tag/1"])
        #expect(lines[3].hasPrefix("#2 ") && lines[3].contains("author: -"))
        // The link made and undone by the tag's deletion is reported as a change of `labels`,
        // as the save's own didSave event reports it.
        #expect(Array(lines[4...5]) == ["  ~ Book/1 (labels, title)", "  - Tag/1"])
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        let decoded = try decoder.decode([HistoryTransaction].self, from: try encoder.encode(transactions))
        #expect(decoded.map(\.token) == transactions.map(\.token))
        #expect(decoded.map(\.changes) == transactions.map(\.changes))
        #expect(decoded.map(\.author) == transactions.map(\.author))
        try await container.close()
    }

    @Test("A deletion's tombstone keeps the attributes marked .preserveValueOnDeletion, as saved, and nothing else")
    func tombstones() async throws {
        let container = PersistentContainer(store: try SQLiteStore(url: TemporaryDirectory.make().appending(path: "t.loom"), schema: try Schema(TombstoneNote.self)))
        try await container.save { context in
            context.insert(TombstoneNote(serverID: "s1", text: "one", rank: 1, digest: Data([1, 2])))
            context.insert(TombstoneNote(serverID: "s2", text: "two", rank: nil, digest: Data()))
        }
        try await container.save { context in
            let notes = try context.fetch(FetchRequest<TombstoneNote>(sortBy: [SortDescriptor(\.serverID)]))
            notes[0].serverID = "edited, never saved"
            for note in notes { context.delete(note) }
        }
        let deletions = try await container.performBackgroundTask { context in
            try context.fetchHistory(HistoryDescriptor()).last!.changes
        }
        #expect(deletions.count == 2)
        let tombstones = deletions.map(\.tombstone)
        #expect(tombstones.map { $0?.value(\TombstoneNote.serverID) } == ["s1", "s2"])
        #expect(tombstones.map { $0?.value(\TombstoneNote.rank) } == [1, .some(nil)])
        #expect(tombstones[0]?.value(\TombstoneNote.digest) == Data([1, 2]))
        #expect(tombstones[0]?.value(\TombstoneNote.text) == nil)   // not preserved
        #expect(tombstones[0]?.attributeNames == ["digest", "rank", "serverID"])
        #expect(deletions[1].description == #"- TombstoneNote/2 {digest: <0 bytes>, rank: NULL, serverID: "s2"}"#)
        let decoded = try JSONDecoder().decode([HistoryChange].self, from: try JSONEncoder().encode(deletions))
        #expect(decoded == deletions)
        try await container.close()
    }

    @Test("A migration ends the history: a token from before it is historyTokenExpired, and saves after it are read from the new current token")
    func migrationEndsHistory() async throws {
        let url = TemporaryDirectory.make().appending(path: "m.loom")
        let before = PersistentContainer(store: try SQLiteStore(url: url, schema: try Schema(TombstoneNote.self)))
        try await before.save { $0.insert(TombstoneNote(serverID: "s1", text: "one", rank: nil, digest: Data())) }
        let old = try await before.performBackgroundTask { try $0.currentHistoryToken()! }
        try await before.close()
        // Adding an entity is inferred: the store is migrated when opened with the new model.
        let after = PersistentContainer(store: try SQLiteStore(url: url, schema: try Schema(TombstoneNote.self, HistoryExtra.self)))
        let expired = await #expect(throws: LoomError.self) {
            try await after.performBackgroundTask { _ = try $0.fetchHistory(HistoryDescriptor(after: old)) }
        }
        #expect(expired?.code == .historyTokenExpired)
        let current = try await after.performBackgroundTask { try $0.currentHistoryToken()! }
        #expect(current > old)
        try await after.save { $0.insert(HistoryExtra(note: "new")) }
        let read = try await after.performBackgroundTask { try $0.fetchHistory(HistoryDescriptor(after: current)) }
        #expect(read.map { $0.changes.map(\.description) } == [["+ HistoryExtra/1"]])
        try await after.close()
    }

    @Test("A descriptor selects after a token, by author, by entity, and up to a limit")
    func descriptorFilters() async throws {
        let container = try Self.container()
        for (author, title) in [("a", "B1"), ("b", "B2"), ("a", "B3")] {
            try await container.save { context in
                context.transactionAuthor = author
                context.insert(Book(title: title))
            }
        }
        try await container.save { context in context.insert(Tag(name: "lonely")) }
        let found = try await container.performBackgroundTask { context -> [[Int64]] in
            let all = try context.fetchHistory(HistoryDescriptor())
            let first = all[0].token
            return [
                try context.fetchHistory(HistoryDescriptor(after: first)).map(\.token.transactionNumber),
                try context.fetchHistory(HistoryDescriptor(authors: ["a"])).map(\.token.transactionNumber),
                try context.fetchHistory(HistoryDescriptor(entityNames: ["Tag"])).map(\.token.transactionNumber),
                try context.fetchHistory(HistoryDescriptor(after: first, fetchLimit: 2)).map(\.token.transactionNumber),
            ]
        }
        #expect(found == [[2, 3, 4], [1, 3], [4], [2, 3]])
        try await container.close()
    }

    @Test("A save of many objects is a few history rows, read back object by object")
    func largeSavesAreGrouped() async throws {
        let container = try Self.container()
        try await container.save { context in for i in 0..<1_000 { context.insert(Book(title: "B\(i)")) } }
        let changes = try await container.performBackgroundTask { try $0.fetchHistory(HistoryDescriptor()).first?.changes.count }
        #expect(changes == 1_000)
        try await container.close()
    }

    @Test("A save that only inserts objects of one entity gets the same history row values through its short path as through the groups")
    func insertOnlyRowValues() throws {
        let schema = try LibraryRelsV2.schema()
        let book = try #require(schema.entity(named: "Book"))
        let author = try #require(schema.entity(named: "Author"))
        func changes(_ inserts: [(EntityDescription, Int64)], update: Bool = false) -> StoreChangeSet {
            var changes = StoreChangeSet()
            changes.inserts = inserts.map { StoreChangeSet.Insert(entity: $0.0, key: $0.1, values: []) }
            if update { changes.updates = [StoreChangeSet.Update(entity: author, key: 9, expectedVersion: 1, changes: [(0, .text("Ann"))])] }
            return changes
        }
        // Buffers kept from one save to the next, as the store keeps them.
        var entities = Array("left over".utf8), packed: [UInt8] = [1, 2, 3]
        for (save, short) in [
            (changes([(book, 7)]), true),
            (changes([(book, 3), (book, 1), (book, 2)]), true),
            (changes([(book, 3), (author, 1), (book, 2)]), false),
            (changes([(book, 4)], update: true), false),
        ] {
            #expect((HistoryChangeGroup.onlyInsertedEntity(of: save) != nil) == short)
            SQLHistory.rowValues(of: save, in: schema, entities: &entities, packed: &packed)
            let groups = HistoryChangeGroup.groups(of: save, in: schema)
            #expect(String(decoding: entities, as: UTF8.self) == SQLHistory.entityList(groups))
            #expect(packed == [UInt8](HistoryChangeGroup.encode(groups)))
            #expect(HistoryChangeGroup.decode(Data(packed), keyLimit: .max) == groups)
        }
    }

    @Test("Keys in runs are recorded as runs (a few bytes for 100,000 new objects), read back key by key; the one-by-one form still reads; damaged runs are refused")
    func keysAsRuns() throws {
        func group(_ kind: HistoryChangeGroup.Kind, _ keys: [Int64], _ properties: String = "") -> HistoryChangeGroup {
            HistoryChangeGroup(entityName: "Book", kind: kind, properties: properties, keys: keys)
        }
        let blocks = Array(Int64(1)...64) + Array(Int64(129)...100_064)
        let cases: [[HistoryChangeGroup]] = [
            [group(.insert, blocks)],
            [group(.insert, [5, 9, 2, 7])],                                   // no runs: one by one
            [group(.update, [1, 2, 3, 10, 11, 12, 13], "title"), group(.delete, Array(Int64(40)...80))],
            [group(.insert, [.max - 2, .max - 1, .max, 1, 2, 3])],            // a run ends at Int64.max
            [group(.insert, [3, 4, 5, 4, 5, 6, 7])],                          // runs that repeat keys
        ]
        for groups in cases {
            let packed = HistoryChangeGroup.encode(groups)
            #expect(HistoryChangeGroup.decode(packed, keyLimit: .max) == groups)
        }
        let large = HistoryChangeGroup.encode([group(.insert, blocks)])
        #expect(large.count < 64, "100,000 keys in two runs took \(large.count) bytes")
        #expect(large.first == 4)   // an insert group in runs
        #expect(HistoryChangeGroup.encode([group(.insert, [5, 9, 2, 7])]).first == 0)

        // A row written one key at a time (every store before runs) reads as before.
        var oneByOne: [UInt8] = [0, 4, 0, 0, 0] + Array("Book".utf8) + [0, 0, 0, 0, 3, 0, 0, 0]
        for key: Int64 in [1, 2, 3] { withUnsafeBytes(of: key.littleEndian) { oneByOne += $0 } }
        #expect(HistoryChangeGroup.decode(Data(oneByOne), keyLimit: .max) == [group(.insert, [1, 2, 3])])

        // Damaged runs: cut short, a zero-length run, lengths that do not add up to the count,
        // a run past Int64.max.
        func runs(count: UInt32, _ runs: [(Int64, UInt32)]) -> Data {
            var bytes: [UInt8] = [4, 4, 0, 0, 0] + Array("Book".utf8) + [0, 0, 0, 0]
            withUnsafeBytes(of: count.littleEndian) { bytes += $0 }
            withUnsafeBytes(of: UInt32(runs.count).littleEndian) { bytes += $0 }
            for (first, length) in runs {
                withUnsafeBytes(of: first.littleEndian) { bytes += $0 }
                withUnsafeBytes(of: length.littleEndian) { bytes += $0 }
            }
            return Data(bytes)
        }
        #expect(HistoryChangeGroup.decode(runs(count: 10, [(1, 10)]), keyLimit: .max) == [group(.insert, Array(1...10))])
        #expect(HistoryChangeGroup.decode(runs(count: 10, [(1, 10)]).dropLast(3), keyLimit: .max) == nil)
        #expect(HistoryChangeGroup.decode(runs(count: 10, [(1, 0), (1, 10)]), keyLimit: .max) == nil)
        #expect(HistoryChangeGroup.decode(runs(count: 10, [(1, 4), (9, 4)]), keyLimit: .max) == nil)
        #expect(HistoryChangeGroup.decode(runs(count: 10, [(1, 11)]), keyLimit: .max) == nil)
        #expect(HistoryChangeGroup.decode(runs(count: 3, [(.max - 1, 3)]), keyLimit: .max) == nil)
        #expect(HistoryChangeGroup.decode(runs(count: 2, [(1, 1), (5, 1), (7, 1)]), keyLimit: .max) == nil)
    }

    @Test("Tombstones whose attribute names repeat are damaged history: refused, not a trap")
    func tombstonesWithRepeatedNamesAreRefused() throws {
        let repeated = HistoryChangeGroup(entityName: "Book", kind: .delete, properties: "title,title", keys: [1],
                                          tombstones: [[.text("a"), .text("b")]])
        let packed = HistoryChangeGroup.encode([repeated])
        #expect(HistoryChangeGroup.decode(packed, keyLimit: .max) == nil)
        #expect(throws: LoomError.self) {
            try SQLHistory.transaction(number: 1, timestamp: 0, author: nil, context: nil, process: 1, processName: "p", changes: packed,
                                       entityNames: nil, store: UUID(), location: "here", keyLimit: .max)
        }
    }

    @Test("Deleted history: an older token is historyTokenExpired naming the oldest kept, never a skip; numbers are never reused")
    func deletingHistory() async throws {
        let container = try Self.container()
        for i in 0..<5 { try await container.save { context in context.insert(Book(title: "B\(i)")) } }
        try await container.performBackgroundTask { context in
            let all = try context.fetchHistory(HistoryDescriptor())
            try context.deleteHistory(through: all[2].token)   // #1…#3 gone
            #expect(try context.fetchHistory(HistoryDescriptor()).map(\.token.transactionNumber) == [4, 5])
            #expect(try context.fetchHistory(HistoryDescriptor(after: all[2].token)).map(\.token.transactionNumber) == [4, 5])
            let error = #expect(throws: LoomError.self) { try context.fetchHistory(HistoryDescriptor(after: all[0].token)) }
            #expect(error?.code == .historyTokenExpired)
            #expect(error?.message.contains("the oldest transaction kept is #4") == true, "\(error?.message ?? "")")
        }
        try await container.save { context in context.insert(Book(title: "B5")) }
        let numbers = try await container.performBackgroundTask { try $0.fetchHistory(HistoryDescriptor()).map(\.token.transactionNumber) }
        #expect(numbers == [4, 5, 6])
        // Everything deleted: the next save still takes the next number.
        let last = try await container.performBackgroundTask { context in
            let current = try #require(try context.currentHistoryToken())
            try context.deleteHistory(through: current)
            #expect(try context.fetchHistory(HistoryDescriptor()).isEmpty)
            return current
        }
        try await container.save { context in context.insert(Book(title: "B6")) }
        let after = try await container.performBackgroundTask { try $0.fetchHistory(HistoryDescriptor(after: last)).map(\.token.transactionNumber) }
        #expect(after == [7])
        try await container.close()
    }

    @Test("A token of another store is historyTokenForeignStore")
    func foreignToken() async throws {
        let container = try Self.container()
        let foreign = HistoryToken(storeIdentifier: UUID(), transactionNumber: 1)
        try await container.performBackgroundTask { context in
            let error = #expect(throws: LoomError.self) { try context.fetchHistory(HistoryDescriptor(after: foreign)) }
            #expect(error?.code == .historyTokenForeignStore)
        }
        try await container.close()
    }

    @Test("With history off, saves record nothing")
    func historyOff() async throws {
        let container = try Self.container(options: SQLiteStore.Options(recordsHistory: false))
        try await container.save { context in context.insert(Book(title: "B1")) }
        let (transactions, token) = try await container.performBackgroundTask { context in
            (try context.fetchHistory(HistoryDescriptor()).count, try context.currentHistoryToken())
        }
        #expect(transactions == 0)
        #expect(token == nil)
        try await container.close()
    }

    @Test("Tokens are Codable and compare by number; a token encoded without a fingerprint (before tokens had one) still decodes")
    func tokens() throws {
        let store = UUID()
        let a = HistoryToken(storeIdentifier: store, transactionNumber: 3), b = HistoryToken(storeIdentifier: store, transactionNumber: 10, fingerprint: 1_700_000_000_123_456)
        #expect(a < b)
        let decoded = try JSONDecoder().decode(HistoryToken.self, from: JSONEncoder().encode(b))
        #expect(decoded == b && decoded.fingerprint == 1_700_000_000_123_456)
        let old = try JSONDecoder().decode(HistoryToken.self, from: Data(#"{"storeIdentifier":"\#(store.uuidString)","transactionNumber":3}"#.utf8))
        #expect(old == a && old.fingerprint == nil)
    }

    static func kindContainer(_ kind: StoreKind) throws -> PersistentContainer {
        try kind.makeContainer(Book.self, Author.self, Tag.self)
    }

    @Test("A token past the store's last transaction is historyTokenAhead naming the last one, for reading and for deleting (which deletes nothing); a negative token is an invalid request, never 'partly deleted'", arguments: StoreKind.persistentCases)
    func tokenAheadOfTheStore(kind: StoreKind) async throws {
        let container = try Self.kindContainer(kind)
        for i in 0..<3 { try await container.save { context in context.insert(Book(title: "B\(i)")) } }
        try await container.performBackgroundTask { context in
            let current = try #require(try context.currentHistoryToken())
            #expect(current.fingerprint != nil)
            for number in [current.transactionNumber + 1, current.transactionNumber + 1_000] {
                let ahead = HistoryToken(storeIdentifier: current.storeIdentifier, transactionNumber: number)
                let error = #expect(throws: LoomError.self) { try context.fetchHistory(HistoryDescriptor(after: ahead)) }
                #expect(error?.code == .historyTokenAhead)
                #expect(error?.message.contains("last transaction is #\(current.transactionNumber)") == true, "\(error?.message ?? "")")
                let purge = #expect(throws: LoomError.self) { try context.deleteHistory(through: ahead) }
                #expect(purge?.code == .historyTokenAhead)
            }
            #expect(try context.fetchHistory(HistoryDescriptor()).count == 3)
            // The current token and 0 (before the first) are fine.
            #expect(try context.fetchHistory(HistoryDescriptor(after: current)).isEmpty)
            #expect(try context.fetchHistory(HistoryDescriptor(after: HistoryToken(storeIdentifier: current.storeIdentifier, transactionNumber: 0))).count == 3)

            let negative = HistoryToken(storeIdentifier: current.storeIdentifier, transactionNumber: -1)
            for purged in [false, true] {
                if purged { try context.deleteHistory(through: HistoryToken(storeIdentifier: current.storeIdentifier, transactionNumber: 1)) }
                let error = #expect(throws: LoomError.self) { try context.fetchHistory(HistoryDescriptor(after: negative)) }
                #expect(error?.code == .invalidRequest)
                #expect(error?.message.contains("negative") == true && error?.message.contains("deleted") == false, "\(error?.message ?? "")")
            }
            #expect(try context.fetchHistory(HistoryDescriptor()).count == 2)
        }
        try await container.close()
    }

    @Test("A store without transactions takes no token past 0: historyTokenAhead says it has no history", arguments: StoreKind.persistentCases)
    func tokenOfAnEmptyStore(kind: StoreKind) async throws {
        let container = try Self.kindContainer(kind)
        try await container.performBackgroundTask { context throws in
            #expect(try context.currentHistoryToken() == nil)
            let token = HistoryToken(storeIdentifier: container.coordinator.storeIdentifier, transactionNumber: 4)
            let error = #expect(throws: LoomError.self) { try context.fetchHistory(HistoryDescriptor(after: token)) }
            #expect(error?.code == .historyTokenAhead)
            #expect(error?.message.contains("none") == true)
        }
        try await container.close()
    }

    @Test("A token whose number the store gave to another transaction (another fingerprint) is historyTokenMismatch; tokens without a fingerprint are checked by number", arguments: StoreKind.persistentCases)
    func tokenOfAnotherTransaction(kind: StoreKind) async throws {
        let container = try Self.kindContainer(kind)
        for i in 0..<3 { try await container.save { context in context.insert(Book(title: "B\(i)")) } }
        try await container.performBackgroundTask { context in
            let all = try context.fetchHistory(HistoryDescriptor())
            let token = all[0].token
            let fingerprint = try #require(token.fingerprint)
            #expect(try context.currentHistoryToken() == all.last?.token)
            #expect(try context.fetchHistory(HistoryDescriptor(after: token)).map(\.token) == Array(all.dropFirst()).map(\.token))
            let other = HistoryToken(storeIdentifier: token.storeIdentifier, transactionNumber: token.transactionNumber, fingerprint: fingerprint + 1)
            let error = #expect(throws: LoomError.self) { try context.fetchHistory(HistoryDescriptor(after: other)) }
            #expect(error?.code == .historyTokenMismatch)
            #expect(error?.message.contains("restored from an older copy") == true)
            let purge = #expect(throws: LoomError.self) { try context.deleteHistory(through: other) }
            #expect(purge?.code == .historyTokenMismatch)
            #expect(try context.fetchHistory(HistoryDescriptor()).count == 3)
            let unfingerprinted = HistoryToken(storeIdentifier: token.storeIdentifier, transactionNumber: token.transactionNumber)
            #expect(try context.fetchHistory(HistoryDescriptor(after: unfingerprinted)).count == 2)
        }
        try await container.close()
    }

    @Test("A SQLite store restored from an older copy: a consumer's token past it is historyTokenAhead, and once the copy has committed past it, historyTokenMismatch; tokens before the copy still read")
    func restoredFromBackup() async throws {
        let folder = TemporaryDirectory.make()
        let url = folder.appending(path: "history.loom"), backup = folder.appending(path: "backup.loom")
        let schema = try LibraryRelsV2.schema()
        func open(_ url: URL) throws -> PersistentContainer { PersistentContainer(store: try SQLiteStore(url: url, schema: schema)) }
        var container = try open(url)
        for i in 0..<2 { try await container.save { context in context.insert(Book(title: "B\(i)")) } }
        let common = try await container.performBackgroundTask { try #require(try $0.currentHistoryToken()) }
        try await container.close()
        for suffix in ["", "-wal"] where FileManager.default.fileExists(atPath: url.path + suffix) {
            try FileManager.default.copyItem(atPath: url.path + suffix, toPath: backup.path + suffix)
        }
        container = try open(url)
        for i in 2..<4 { try await container.save { context in context.insert(Book(title: "B\(i)")) } }
        let consumer = try await container.performBackgroundTask { try #require(try $0.currentHistoryToken()) }
        #expect(consumer.transactionNumber == 4)
        try await container.close()

        let restored = try open(backup)
        try await restored.performBackgroundTask { context in
            let error = #expect(throws: LoomError.self) { try context.fetchHistory(HistoryDescriptor(after: consumer)) }
            #expect(error?.code == .historyTokenAhead)
            #expect(error?.message.contains("last transaction is #2") == true, "\(error?.message ?? "")")
        }
        for i in 0..<3 { try await restored.save { context in context.insert(Book(title: "R\(i)")) } }
        try await restored.performBackgroundTask { context throws in
            let error = #expect(throws: LoomError.self) { try context.fetchHistory(HistoryDescriptor(after: consumer)) }
            #expect(error?.code == .historyTokenMismatch)
            #expect(try context.fetchHistory(HistoryDescriptor(after: common)).map(\.token.transactionNumber) == [3, 4, 5])
        }
        try await restored.close()
    }

    @Test("Change sets of one history transaction merge as one save records them: inserted then updated is inserted, updates unite, updated then deleted is deleted, inserted then deleted is nothing")
    func mergingGroups() throws {
        func group(_ kind: HistoryChangeGroup.Kind, _ keys: [Int64], _ properties: String = "", entity: String = "Book") -> HistoryChangeGroup {
            HistoryChangeGroup(entityName: entity, kind: kind, properties: properties, keys: keys)
        }
        // Distinct objects: joined group by group.
        #expect(HistoryChangeGroup.merging([group(.insert, [1, 2]), group(.update, [5], "title")], [group(.insert, [3, 4]), group(.update, [6], "title")])
            == [group(.insert, [1, 2, 3, 4]), group(.update, [5, 6], "title")])
        var tombstoned = group(.delete, [5], "isbn")
        tombstoned.tombstones = [[.text("x")]]
        let merged = HistoryChangeGroup.merging(
            [group(.insert, [1, 2]), group(.update, [5, 7], "title"), group(.update, [8], "pages")],
            [group(.update, [1, 7], "pages"), tombstoned, group(.delete, [2]), group(.update, [9], "title", entity: "Author")])
        #expect(merged == [group(.insert, [1]), group(.update, [8], "pages"), group(.update, [7], "pages,title"), group(.update, [9], "title", entity: "Author"), tombstoned])
        // Several change sets merged at once (a batch request's chunks, merged before the
        // commit) record what merging them two by two records.
        let sets = [
            [group(.insert, [1, 2]), group(.update, [5, 7], "title")],
            [group(.update, [1, 7], "pages"), group(.insert, [3])],
            [group(.delete, [2, 5]), group(.update, [3], "title"), group(.insert, [10], entity: "Author")],
            [group(.insert, [11, 12], entity: "Author")],
        ]
        let pairwise = sets.dropFirst().reduce(sets[0]) { HistoryChangeGroup.merging($0, $1) }
        #expect(HistoryChangeGroup.merging(sets) == pairwise)
        #expect(pairwise == [group(.insert, [1, 3]), group(.insert, [10, 11, 12], entity: "Author"), group(.update, [7], "pages,title"), group(.delete, [5])])
    }
}

@Model final class TombstoneNote {
    @Attribute(.preserveValueOnDeletion) var serverID: String
    var text: String
    @Attribute(.preserveValueOnDeletion) var rank: Int?
    @Attribute(.preserveValueOnDeletion) var digest: Data
    init(serverID: String, text: String, rank: Int?, digest: Data) {
        self.serverID = serverID
        self.text = text
        self.rank = rank
        self.digest = digest
    }
}

@Model final class HistoryExtra {
    var note: String
    init(note: String) { self.note = note }
}
