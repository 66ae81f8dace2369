import Foundation
import GRDB
import Loom
@_spi(LoomStore) import LoomCore
@_spi(LoomStore) import LoomSQLite
@_spi(LoomStore) import LoomPostgreSQL
import Testing

/// One key space per hierarchy: every entity of a hierarchy takes its keys from its root's
/// counter, on every store, whoever inserts (contexts, batch inserts, imports, another
/// container on the same storage), and a store written when each entity had its own counter
/// hands out no key in use after it is opened.
@MainActor
@Suite("Inheritance: key space", .timeLimit(.minutes(5)))
struct InheritanceKeySpaceTests {
    /// Every trip's key, of every concrete entity of the hierarchy.
    func tripKeys(_ context: ManagedObjectContext) throws -> [Int64] {
        try context.fetchIDs(FetchRequest<Trip>()).map(\.primaryKey)
    }

    /// Inserts `count` trips of the four concrete entities in turn.
    nonisolated func insertMixed(_ count: Int, prefix: String, into context: ManagedObjectContext) {
        for i in 0..<count {
            switch i % 4 {
            case 0: context.insert(Trip(name: "\(prefix)\(i)", days: i))
            case 1: context.insert(BusinessTrip(name: "\(prefix)\(i)", days: i, company: "C"))
            case 2: context.insert(ConferenceTrip(name: "\(prefix)\(i)", days: i, company: "C", talk: nil))
            default:
                let trip = PersonalTrip(context: context)
                trip.name = "\(prefix)\(i)"
                trip.days = i
            }
        }
    }

    @Test("Objects of sibling and nested sub-entities never share a key", arguments: StoreKind.allCases)
    func siblingsNeverShareAKey(kind: StoreKind) throws {
        let container = try kind.makeHierarchyContainer()
        let context = container.viewContext
        insertMixed(10, prefix: "a", into: context)
        // Unsaved objects already hold their permanent keys: distinct before the save too.
        let unsaved = context.inserted.compactMap { ($0 as? any PersistentModel)?.anyObjectID.primaryKey }
        #expect(Set(unsaved).count == 10)
        try context.save()
        // A second context inserting at the same time reserves from the same counter.
        let background = container.newBackgroundContext()
        try background.performAndWait { context in
            insertMixed(300, prefix: "b", into: context)
            try context.save()
        }
        insertMixed(200, prefix: "c", into: context)
        try context.save()
        let keys = try tripKeys(context)
        #expect(keys.count == 510)
        #expect(Set(keys).count == 510, "keys shared between entities of the hierarchy")
        // An abstract root's sub-entities share its space too.
        for i in 0..<6 { if i.isMultiple(of: 2) { _ = Car(context: context) } else { context.insert(Bicycle(gears: i)) } }
        try context.save()
        let vehicles = try context.fetchIDs(FetchRequest<Vehicle>()).map(\.primaryKey)
        #expect(Set(vehicles).count == 6)
        // A flat entity keeps a space of its own: another hierarchy's keys do not move it.
        #expect(vehicles.min() == 1)
    }

    @Test("Batch inserts and imports take their keys from the hierarchy's space", arguments: StoreKind.allCases)
    func batchesShareTheSpace(kind: StoreKind) throws {
        let container = try kind.makeHierarchyContainer()
        let context = container.viewContext
        insertMixed(8, prefix: "a", into: context)
        try context.save()
        let rows: [[BatchValue<BusinessTrip>]] = (0..<50).map { [.set(\BusinessTrip.name, to: "batch\($0)"), .set(\BusinessTrip.days, to: $0), .set(\BusinessTrip.company, to: "B")] }
        let batch = try context.execute(BatchInsertRequest<BusinessTrip>(rows: rows))
        #expect(batch.objectIDs.count == 50)
        let conferenceRows: [[BatchValue<ConferenceTrip>]] = (0..<20).map { [.set(\ConferenceTrip.name, to: "conf\($0)"), .set(\ConferenceTrip.days, to: $0)] }
        _ = try context.execute(BatchInsertRequest<ConferenceTrip>(rows: conferenceRows))
        let imported = try context.execute(ImportRequest<PersonalTrip, Int>(Array(0..<30), chunkSize: 7, uniquingBy: [\PersonalTrip.name]) { i in
            [.set(\.name, to: "imported\(i)"), .set(\.days, to: i), .set(\.reason, to: "r")]
        })
        #expect(imported.inserted == 30)
        // Objects inserted after the batches take keys past theirs.
        insertMixed(8, prefix: "z", into: context)
        try context.save()
        let keys = try tripKeys(context)
        #expect(keys.count == 8 + 50 + 20 + 30 + 8)
        #expect(Set(keys).count == keys.count, "keys shared between entities of the hierarchy")
    }

    @Test("Two containers on one store reserve from one counter per hierarchy", arguments: StoreKind.persistentCases)
    func twoContainersShareTheSpace(kind: StoreKind) async throws {
        let open = try legacyHarness(kind).open
        let first = try open(), second = try open()
        for round in 0..<4 {
            insertMixed(40, prefix: "first\(round)-", into: first.viewContext)
            insertMixed(40, prefix: "second\(round)-", into: second.viewContext)
            try second.viewContext.save()
            try first.viewContext.save()
        }
        let keys = try tripKeys(first.viewContext)
        #expect(keys.count == 320)
        #expect(Set(keys).count == 320, "keys shared between entities of the hierarchy")
        try await first.close()
        try await second.close()

        // Reopened, the space goes on past every key.
        let reopened = try open()
        insertMixed(8, prefix: "later", into: reopened.viewContext)
        try reopened.viewContext.save()
        let after = try tripKeys(reopened.viewContext)
        #expect(Set(after).count == 328)
        try await reopened.close()
    }

    // MARK: Stores written with a counter per entity

    /// Five trips saved (keys 1…5: Trip 1, 2; BusinessTrip 3; ConferenceTrip 4; PersonalTrip 5),
    /// then made into what a store written before one key space per hierarchy can hold:
    /// BusinessTrip 1 and PersonalTrip 2 share Trip's keys, ConferenceTrip 70 is past its own
    /// counter (a counter damaged by hand), and a counter per entity, BusinessTrip's the
    /// highest. `execute` runs raw SQL on the closed store, `$` standing for the schema prefix.
    func makeLegacyStore(open: () throws -> PersistentContainer, execute: (String) throws -> Void) async throws {
        let container = try open()
        let context = container.viewContext
        context.insert(Trip(name: "t1", days: 1))
        context.insert(Trip(name: "t2", days: 2))
        context.insert(BusinessTrip(name: "b", days: 3, company: "B"))
        context.insert(ConferenceTrip(name: "c", days: 4, company: "C", talk: nil))
        let personal = PersonalTrip(context: context)
        personal.name = "p"
        personal.days = 5
        try context.save()
        #expect(try tripKeys(context).sorted() == [1, 2, 3, 4, 5])
        try await container.close()
        try execute("UPDATE $\"BusinessTrip\" SET \"Z_PK\" = 1")
        try execute("UPDATE $\"PersonalTrip\" SET \"Z_PK\" = 2")
        try execute("UPDATE $\"ConferenceTrip\" SET \"Z_PK\" = 70")
        try execute("DELETE FROM $loom_keys")
        try execute("INSERT INTO $loom_keys (entity, next) VALUES ('Trip', 3), ('BusinessTrip', 40), ('PersonalTrip', 3), ('ConferenceTrip', 5)")
    }

    /// A new persistent store of the hierarchy: how to open it (a new container each time, as
    /// another process would), run raw SQL on it (see ``makeLegacyStore(open:execute:)``) and
    /// read its `loom_keys` rows without opening it.
    func legacyHarness(_ kind: StoreKind) throws -> (open: () throws -> PersistentContainer, execute: (String) throws -> Void, keyRows: () throws -> [String: Int64]) {
        let schema = try Schema(tripModels + vehicleModels)
        if kind == .postgres {
            let configuration = try PostgresServer.configuration()
            let admin = BackendTerminator(configuration)
            let prefix = "\"\(configuration.schemaName)\"."
            let keyRows = { () throws -> [String: Int64] in
                let rows = try admin.query("SELECT entity || '=' || next FROM \(prefix)loom_keys")
                return Dictionary(uniqueKeysWithValues: rows.map { row in
                    let parts = row.split(separator: "=")
                    return (String(parts[0]), Int64(parts[1])!)
                })
            }
            return ({ PersistentContainer(store: try PostgreSQLStore(configuration: configuration, schema: schema)) },
                    { sql in _ = try admin.query(sql.replacingOccurrences(of: "$", with: prefix)) }, keyRows)
        }
        let url = TemporaryDirectory.make().appending(path: "trips.loom")
        return ({ PersistentContainer(store: try SQLiteStore(url: url, schema: schema)) },
                { sql in try SQLiteStore.unsafeExecuteRawSQL(sql.replacingOccurrences(of: "$", with: ""), at: url) },
                { try SQLiteStore(readingAt: url).maintenanceState().nextKeys })
    }

    @Test("A store with a counter per entity opens with the root's counter past every key of the hierarchy", arguments: StoreKind.persistentCases)
    func legacyCountersMerge(kind: StoreKind) async throws {
        let (open, execute, keyRows) = try legacyHarness(kind)
        try await makeLegacyStore(open: open, execute: execute)
        #expect(try keyRows()["BusinessTrip"] == 40)

        let container = try open()
        // One row for the hierarchy, past the highest counter (40) and the highest key (70).
        #expect(try keyRows() == ["Trip": 71])
        let context = container.viewContext
        insertMixed(8, prefix: "new", into: context)
        try context.save()
        let keys = try tripKeys(context)
        #expect(keys.count == 13)
        let new = keys.filter { $0 > 5 && $0 != 70 }
        #expect(new.count == 8 && new.allSatisfy { $0 >= 71 }, "a new key reused one in use: \(keys.sorted())")
        #expect(Set(new).count == 8)
        // The old objects are all there, each under its own entity.
        let old = try context.fetch(FetchRequest<Trip>(sortBy: [SortDescriptor(\.days)])).filter { !$0.name.hasPrefix("new") }
        #expect(old.map { "\($0.name):\($0.objectID.erased.entityName)/\($0.objectID.primaryKey)" }
                == ["t1:Trip/1", "t2:Trip/2", "b:BusinessTrip/1", "c:ConferenceTrip/70", "p:PersonalTrip/2"])
        try await container.close()

        // Opening again changes nothing.
        let closed = try keyRows()
        #expect(closed.count == 1 && closed["Trip"]! > 71)
        let again = try open()
        #expect(try keyRows() == closed)
        try await again.close()
    }

    @Test("A store opened read-only keeps its counters per entity, byte for byte")
    func readOnlyOpenChangesNothing() async throws {
        let schema = try Schema(tripModels + vehicleModels)
        let url = TemporaryDirectory.make().appending(path: "trips.loom")
        try await makeLegacyStore(open: { PersistentContainer(store: try SQLiteStore(url: url, schema: schema)) },
                                  execute: { try SQLiteStore.unsafeExecuteRawSQL($0.replacingOccurrences(of: "$", with: ""), at: url) })
        let before = try SQLiteStore.contentDump(at: url)
        let store = try SQLiteStore(readingAt: url)
        #expect(try store.maintenanceState().nextKeys["BusinessTrip"] == 40)
        try store.close()
        #expect(try SQLiteStore.contentDump(at: url) == before)
    }
}
