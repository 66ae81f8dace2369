import Foundation
import Loom
@_spi(LoomStore) import LoomCore
@_spi(LoomStore) import LoomPostgreSQL
import Testing

/// What a Core Data or SwiftData user tries on a hierarchy beyond a plain fetch, on every
/// store: faults reached through a parent's type, ties and windows over a mixed result,
/// counts with predicates, nested type tests, the requests Loom refuses across a hierarchy,
/// and a store reopened.
@MainActor
@Suite("Inheritance: edges", .timeLimit(.minutes(5)))
struct InheritanceEdgeTests {
    @Test("A fault by a parent-typed ID of a sub-entity's object is that object, of its own class", arguments: StoreKind.allCases)
    func faultThroughTheParentsType(kind: StoreKind) throws {
        let container = try kind.makeHierarchyContainer()
        try InheritanceFetchTests().seed(container.viewContext)
        let ids = try container.viewContext.fetchIDs(FetchRequest<Trip>(predicate: #Predicate { $0.name == "t8" }))
        let id: ObjectID<Trip> = try #require(ids.first)
        #expect(id.erased.entityName == "ConferenceTrip")
        let seen = try container.newBackgroundContext().performAndWait { context in
            let fault = try context.object(with: id)
            var seen = ["\(type(of: fault))", "\(fault.isFault)"]
            // The fetch through the parent and the one through the leaf find the same instance.
            let fetched = try context.fetch(FetchRequest<Trip>(predicate: #Predicate { $0.days == 8 }))
            let leaf = try context.fetch(FetchRequest<ConferenceTrip>())
            seen.append("\(fetched.count == 1 && fetched[0] === fault)")
            seen.append("\(leaf.contains { $0 === fault })")
            // Firing it reads the sub-entity's own attributes and the inherited ones.
            seen.append("\(fault.name):\(fault.days):\((fault as? ConferenceTrip)?.company ?? "-")")
            // Without sub-entities, a parent's fetch never returns it.
            var own = FetchRequest<Trip>(predicate: #Predicate { $0.days == 8 })
            own.includesSubentities = false
            seen.append("\(try context.fetch(own).count)")
            return seen
        }
        #expect(seen == ["ConferenceTrip", "true", "true", "true", "t8:8:Initech", "0"])
    }

    @Test("Sorts with ties across entities and windows over them give one stable merged order", arguments: StoreKind.allCases)
    func tiesAndWindowsAcrossEntities(kind: StoreKind) throws {
        let container = try kind.makeHierarchyContainer()
        let context = container.viewContext
        // Days 1…3, each held by one object of every concrete entity.
        for day in 1...3 {
            context.insert(Trip(name: "trip\(day)", days: day))
            context.insert(BusinessTrip(name: "business\(day)", days: day, company: "C"))
            context.insert(ConferenceTrip(name: "conference\(day)", days: day, company: "C", talk: nil))
            let personal = PersonalTrip(context: context)
            personal.name = "personal\(day)"
            personal.days = day
        }
        try context.save()
        let byDaysThenName = [SortDescriptor(\Trip.days, order: .reverse), SortDescriptor(\Trip.name)]
        let all = try context.fetch(FetchRequest<Trip>(sortBy: byDaysThenName)).map(\.name)
        #expect(all == ["business3", "conference3", "personal3", "trip3", "business2", "conference2", "personal2", "trip2",
                        "business1", "conference1", "personal1", "trip1"])
        // Every window is the slice of the whole order, wherever it starts and ends.
        for offset in [0, 1, 3, 4, 11, 12, 13] {
            for limit in [1, 2, 5, 12] {
                let page = try context.fetch(FetchRequest<Trip>(sortBy: byDaysThenName, fetchLimit: limit, fetchOffset: offset)).map(\.name)
                #expect(page == Array(all.dropFirst(offset).prefix(limit)), "offset \(offset), limit \(limit)")
                #expect(try context.count(for: FetchRequest<Trip>(fetchLimit: limit, fetchOffset: offset)) == min(limit, max(0, 12 - offset)))
            }
        }
        // A predicate on a parent attribute with a window; unsaved objects take their place.
        let unsaved = PersonalTrip(context: context)
        unsaved.name = "personal0"
        unsaved.days = 2
        let middle = try context.fetch(FetchRequest<Trip>(predicate: #Predicate { $0.days == 2 }, sortBy: [SortDescriptor(\Trip.name)], fetchLimit: 3, fetchOffset: 1))
        #expect(middle.map(\.name) == ["conference2", "personal0", "personal2"])
        // Unsorted, a window still takes the requested number of objects, as faults.
        let unsorted = try context.fetch(FetchRequest<Trip>(fetchLimit: 5, fetchOffset: 4))
        #expect(unsorted.count == 5)
        #expect(Set(unsorted.map(\.objectID)).count == 5)
    }

    @Test("A count with a predicate on a parent attribute covers every sub-entity, saved or not", arguments: StoreKind.allCases)
    func countsWithParentPredicates(kind: StoreKind) throws {
        let container = try kind.makeHierarchyContainer()
        try InheritanceFetchTests().seed(container.viewContext)
        let context = container.viewContext
        #expect(try context.count(for: FetchRequest<Trip>(predicate: #Predicate { $0.days > 3 })) == 5)
        #expect(try context.count(for: FetchRequest<Trip>(predicate: #Predicate { $0.name == "t4" || $0.name == "t3" })) == 2)
        #expect(try context.count(for: FetchRequest<BusinessTrip>(predicate: #Predicate { $0.days > 3 })) == 3)
        #expect(try context.count(for: FetchRequest<BusinessTrip>(predicate: #Predicate { $0.days > 3 && $0.company == "Acme" })) == 2)
        #expect(try context.count(for: FetchRequest<Trip>(predicate: #Predicate { $0.days > 100 })) == 0)
        // Unsaved: a new leaf object counts, a deleted one does not, a changed one moves.
        context.insert(ConferenceTrip(name: "t9", days: 9, company: "New", talk: nil))
        let t5 = try #require(try context.fetch(FetchRequest<Trip>(predicate: #Predicate { $0.name == "t5" })).first)
        context.delete(t5)
        let t1 = try #require(try context.fetch(FetchRequest<BusinessTrip>(predicate: #Predicate { $0.name == "t1" })).first)
        t1.days = 10
        #expect(try context.count(for: FetchRequest<Trip>(predicate: #Predicate { $0.days > 3 })) == 6)
        #expect(try context.count(for: FetchRequest<Trip>(predicate: #Predicate { $0.days > 3 })) == (try context.fetch(FetchRequest<Trip>(predicate: #Predicate { $0.days > 3 })).count))
        var saved = FetchRequest<Trip>(predicate: #Predicate { $0.days > 3 })
        saved.includesPendingChanges = false
        #expect(try context.count(for: saved) == 5)
        try context.save()
        #expect(try container.newBackgroundContext().performAndWait { try $0.count(for: FetchRequest<Trip>(predicate: #Predicate { $0.days > 3 })) } == 6)
    }

    @Test("Type tests combine with &&, || and ! at any depth", arguments: StoreKind.allCases)
    func typeTestsInsideLogic(kind: StoreKind) throws {
        let container = try kind.makeHierarchyContainer()
        try InheritanceFetchTests().seed(container.viewContext)
        let context = container.viewContext
        func names(_ predicate: Predicate<Trip>) throws -> [String] {
            try context.fetch(FetchRequest<Trip>(predicate: predicate, sortBy: [SortDescriptor(\.name)])).map(\.name)
        }
        // Trips: t2, t5; BusinessTrips: t1, t7; ConferenceTrips: t4, t8; PersonalTrips: t3, t6.
        #expect(try names(#Predicate { !($0 is BusinessTrip) || $0.days > 7 }) == ["t2", "t3", "t5", "t6", "t8"])
        #expect(try names(#Predicate { ($0 is PersonalTrip && $0.days > 4) || ($0 is ConferenceTrip && !($0 is PersonalTrip)) }) == ["t4", "t6", "t8"])
        #expect(try names(#Predicate { !(!($0 is ConferenceTrip)) }) == ["t4", "t8"])
        #expect(try names(#Predicate { $0 is BusinessTrip && !($0 is ConferenceTrip) }) == ["t1", "t7"])
        #expect(try names(#Predicate { $0 is PersonalTrip && $0 is BusinessTrip }) == [])
        // On a middle entity's fetch, and in a count.
        let conferences = try context.fetch(FetchRequest<BusinessTrip>(predicate: #Predicate { $0 is ConferenceTrip || $0.company == "Globex" }, sortBy: [SortDescriptor(\.name)]))
        #expect(conferences.map(\.name) == ["t1", "t4", "t8"])
        #expect(try context.count(for: FetchRequest<Trip>(predicate: #Predicate { !($0 is BusinessTrip) && !($0 is PersonalTrip) })) == 2)
    }

    @Test("A batch insert into an abstract entity is refused with an error that says so", arguments: StoreKind.allCases)
    func uncoveredRequestsRefused(kind: StoreKind) throws {
        let container = try kind.makeHierarchyContainer()
        try InheritanceFetchTests().seed(container.viewContext)
        let context = container.viewContext
        // Live queries, batch deletes and updates, batched fetches and aggregates cover a
        // hierarchy now (InheritanceLiveQueryTests, InheritanceBatchTests,
        // InheritanceAggregateTests); a batch insert into an abstract entity stays refused.
        let abstractBatchInsert = #expect(throws: LoomError.self) { try context.execute(BatchInsertRequest<Vehicle>(rows: [[.set(\Vehicle.wheels, to: 3)]])) }
        #expect(abstractBatchInsert?.code == .abstractEntity)
        // Nothing was deleted; the leaf's own requests run.
        #expect(try context.count(for: FetchRequest<Trip>()) == 8)
        _ = try context.liveQuery(FetchRequest<ConferenceTrip>())
        var own = FetchRequest<Trip>()
        own.includesSubentities = false
        _ = try context.liveQuery(own)
        _ = try context.execute(BatchInsertRequest<Bicycle>(rows: [[.set(\Bicycle.wheels, to: 2), .set(\Bicycle.gears, to: 5)]]))
        #expect(try context.count(for: FetchRequest<Vehicle>()) == 1)
    }

    @Test("A store saved with a hierarchy reopens with the same version hash, its objects of their classes", arguments: StoreKind.persistentCases)
    func reopenedStoreKeepsItsHierarchy(kind: StoreKind) async throws {
        let schema = try Schema(tripModels + vehicleModels)
        let open: () throws -> PersistentContainer
        let savedHash: () throws -> String
        if kind == .postgres {
            let configuration = try PostgresServer.configuration()
            open = { PersistentContainer(store: try PostgreSQLStore(configuration: configuration, schema: schema)) }
            savedHash = { try PostgreSQLStore.savedState(configuration: configuration).record.versionHash }
        } else {
            let url = TemporaryDirectory.make().appending(path: "trips.loom")
            open = { PersistentContainer(store: try SQLiteStore(url: url, schema: schema)) }
            savedHash = { try SQLiteStore.savedSchema(at: url).versionHash }
        }
        let first = try open()
        try InheritanceFetchTests().seed(first.viewContext)
        _ = Car(context: first.viewContext)
        try first.viewContext.save()
        let keyBefore = try first.viewContext.fetchIDs(FetchRequest<ConferenceTrip>()).map(\.primaryKey).max() ?? 0
        try await first.close()
        #expect(try savedHash() == schema.versionHash)
        #expect(try savedHash() == InheritanceSchemaTests.pinnedHash)

        let reopened = try open()
        #expect(try savedHash() == schema.versionHash)
        let context = reopened.viewContext
        let trips = try context.fetch(FetchRequest<Trip>(sortBy: [SortDescriptor(\.days)]))
        #expect(trips.map { "\($0.name):\(type(of: $0))" } == ["t1:BusinessTrip", "t2:Trip", "t3:PersonalTrip", "t4:ConferenceTrip",
                                                               "t5:Trip", "t6:PersonalTrip", "t7:BusinessTrip", "t8:ConferenceTrip"])
        #expect(try context.fetch(FetchRequest<Vehicle>()).map { "\(type(of: $0))" } == ["Car"])
        // Keys go on where they stopped; a new object is found through its parent.
        let next = ConferenceTrip(name: "t9", days: 9, company: "Later", talk: "Again")
        context.insert(next)
        try context.save()
        #expect(next.objectID.primaryKey > keyBefore)
        #expect(try context.count(for: FetchRequest<Trip>(predicate: #Predicate { $0 is ConferenceTrip })) == 3)
        try await reopened.close()
    }

    @Test("History records each change under its object's own entity", arguments: StoreKind.persistentCases)
    func historyNamesTheConcreteEntity(kind: StoreKind) throws {
        let container = try kind.makeHierarchyContainer()
        let context = container.viewContext
        context.insert(Trip(name: "a", days: 1))
        let business = BusinessTrip(name: "b", days: 2, company: "X")
        context.insert(business)
        context.insert(Bicycle(gears: 3))
        try context.save()
        business.days = 3
        try context.save()
        context.delete(business)
        try context.save()
        func describe(_ change: HistoryChange) -> String {
            switch change.kind {
            case .insert: "+\(change.objectID.entityName)"
            case .update(let properties): "~\(change.objectID.entityName)(\(properties.joined(separator: ",")))"
            case .delete: "-\(change.objectID.entityName)"
            }
        }
        let transactions = try context.fetchHistory(HistoryDescriptor())
        #expect(transactions.count == 3)
        #expect(Set(transactions[0].changes.map(describe)) == ["+Trip", "+BusinessTrip", "+Bicycle"])
        #expect(transactions[1].changes.map(describe) == ["~BusinessTrip(days)"])
        #expect(transactions[2].changes.map(describe) == ["-BusinessTrip"])
    }
}
