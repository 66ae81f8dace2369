import Foundation
import Loom
import Testing

/// Batch deletes and updates of a parent cover every concrete entity's table, in one store
/// transaction, with the flat path's results, events and history.
@MainActor
@Suite("Inheritance: batch requests", .timeLimit(.minutes(5)))
struct InheritanceBatchTests {
    func names(_ context: ManagedObjectContext) throws -> [String] {
        try context.fetch(FetchRequest<Trip>(sortBy: [SortDescriptor(\.name)])).map { "\($0.name):\($0.days)" }
    }

    @Test("A batch delete of a parent deletes in every sub-entity's table, reports each object's own entity, and the context follows", arguments: StoreKind.allCases)
    func batchDeleteAcrossHierarchy(kind: StoreKind) throws {
        let container = try kind.makeHierarchyContainer()
        let context = container.viewContext
        try seedTrips(context)
        let held = try context.fetch(FetchRequest<Trip>())   // registered: the context must see them go
        #expect(held.count == 8)
        let result = try context.execute(BatchDeleteRequest<Trip>(predicate: #Predicate { $0.days > 4 }))
        #expect(result.deletedCount == 4)
        #expect(Set(result.deleted.map { "\($0.entityName)" }) == ["Trip", "BusinessTrip", "ConferenceTrip", "PersonalTrip"])
        #expect(try names(context) == ["t1:1", "t2:2", "t3:3", "t4:4"])
        #expect(!context.hasChanges)   // deleted in the store, nothing pending in the context
        #expect(try context.count(for: FetchRequest<Trip>(predicate: #Predicate { $0.days > 4 })) == 0)
        let fresh = try container.newBackgroundContext().performAndWait { context in try context.count(for: FetchRequest<Trip>()) }
        #expect(fresh == 4)
        // A type test: the business trips and their sub-entity's, nothing else.
        let business = try context.execute(BatchDeleteRequest<Trip>(predicate: #Predicate { $0 is BusinessTrip }))
        #expect(Set(business.deleted.map(\.entityName)) == ["BusinessTrip", "ConferenceTrip"])
        #expect(try names(context) == ["t2:2", "t3:3"])
        // A middle entity's request covers its leaf and nothing above it.
        try seedTrips(context)
        let middle = try context.execute(BatchDeleteRequest<BusinessTrip>())
        #expect(middle.deletedCount == 4)
        #expect(try context.count(for: FetchRequest<Trip>()) == 6)
    }

    @Test("A batch delete by IDs of a parent deletes exactly the named objects of its sub-entities", arguments: StoreKind.allCases)
    func batchDeleteByIDsAcrossHierarchy(kind: StoreKind) throws {
        let container = try kind.makeHierarchyContainer()
        let context = container.viewContext
        let trip = Trip(name: "a", days: 1)
        let business = BusinessTrip(name: "b", days: 2, company: "Acme")
        let conference = ConferenceTrip(name: "c", days: 3, company: "Acme", talk: nil)
        context.insert(trip)
        context.insert(business)
        context.insert(conference)
        try context.save()
        // One key space per hierarchy: the three have keys of their own (a store written before
        // it may still hold siblings sharing a key; each ID keeps its entity for those).
        #expect(Set([trip.objectID.primaryKey, business.objectID.primaryKey, conference.objectID.primaryKey]).count == 3)
        let ids = [try #require(ObjectID<Trip>(business.objectID.erased)), try #require(ObjectID<Trip>(conference.objectID.erased))]
        let result = try context.execute(BatchDeleteRequest<Trip>(objectIDs: ids))
        #expect(Set(result.deleted) == Set(ids.map(\.erased)))
        #expect(try names(context) == ["a:1"])
        // Gone already: skipped, nothing else deleted.
        let again = try context.execute(BatchDeleteRequest<Trip>(objectIDs: ids))
        #expect(again.deletedCount == 0)
        #expect(try names(context) == ["a:1"])
    }

    @Test("A batch update of a parent updates every sub-entity's table, with unchanged objects counted and the context following", arguments: StoreKind.allCases)
    func batchUpdateAcrossHierarchy(kind: StoreKind) throws {
        let container = try kind.makeHierarchyContainer()
        let context = container.viewContext
        try seedTrips(context)
        let conference = try #require(try context.fetch(FetchRequest<ConferenceTrip>(predicate: #Predicate { $0.name == "t4" })).first)
        let result = try context.execute(BatchUpdateRequest<Trip>(predicate: #Predicate { $0.days >= 4 }, set: [.set(\.days, to: 6)]))
        #expect(result.updatedCount == 4)   // t4, t5, t7, t8; t6 already has 6 days
        #expect(result.unchanged == 1)
        #expect(Set(result.updated.map(\.entityName)) == ["Trip", "BusinessTrip", "ConferenceTrip"])
        #expect(try names(context) == ["t1:1", "t2:2", "t3:3", "t4:6", "t5:6", "t6:6", "t7:6", "t8:6"])
        #expect(conference.days == 6)   // the registered object follows
        #expect(conference.company == "Acme")
        // An abstract parent: each concrete sub-entity's objects.
        context.insert(Bicycle(gears: 3))
        let car = Car(context: context)
        car.wheels = 4
        try context.save()
        let vehicles = try context.execute(BatchUpdateRequest<Vehicle>(set: [.set(\.wheels, to: 3)]))
        #expect(Set(vehicles.updated.map(\.entityName)) == ["Bicycle", "Car"])
        #expect(try context.fetch(FetchRequest<Vehicle>()).map(\.wheels) == [3, 3])
        let gone = try context.execute(BatchDeleteRequest<Vehicle>())
        #expect(gone.deletedCount == 2)
        #expect(try context.count(for: FetchRequest<Vehicle>()) == 0)
    }

    @Test("A batched fetch of a parent gives the plain fetch's objects in its order, a batch at a time, unsaved changes included", arguments: StoreKind.allCases)
    func batchedFetchAcrossHierarchy(kind: StoreKind) throws {
        let container = try kind.makeHierarchyContainer()
        let context = container.viewContext
        try seedTrips(context)
        context.insert(BusinessTrip(name: "t9", days: 4, company: "Unsaved"))   // ties t4 on days
        let t5 = try #require(try context.fetch(FetchRequest<Trip>(predicate: #Predicate { $0.name == "t5" })).first)
        t5.days = 1                                                              // ties t1
        let t3 = try #require(try context.fetch(FetchRequest<Trip>(predicate: #Predicate { $0.name == "t3" })).first)
        context.delete(t3)
        let sorts: [[SortDescriptor<Trip>]] = [[], [SortDescriptor(\.days)], [SortDescriptor(\.days, order: .reverse), SortDescriptor(\.name)], [SortDescriptor(\.name, order: .reverse)]]
        let predicates: [Predicate<Trip>?] = [nil, #Predicate { $0.days > 2 }, #Predicate { $0 is BusinessTrip || $0.days == 1 }]
        for sort in sorts {
            for predicate in predicates {
                for (offset, limit) in [(0, nil), (2, 3), (7, 5), (0, 0), (12, nil)] as [(Int, Int?)] {
                    var request = FetchRequest<Trip>(predicate: predicate, sortBy: sort)
                    request.fetchOffset = offset
                    request.fetchLimit = limit
                    let plain = try context.fetch(request)
                    for size in [1, 3, 0] {
                        let batched = try context.fetch(request, batchSize: size)
                        #expect(batched.count == plain.count)
                        #expect(batched.objectIDs.map(\.erased) == plain.map(\.objectID.erased), "sort \(sort), offset \(offset), limit \(limit.map(String.init) ?? "-"), batch \(size)")
                        #expect(zip(batched, plain).allSatisfy { $0 === $1 })   // the same registered objects, of their classes
                    }
                }
            }
        }
        // Read from a fresh context: the objects load a batch at a time, each of its own class.
        try context.save()
        let classes = try container.newBackgroundContext().performAndWait { context in
            try context.fetch(FetchRequest<Trip>(sortBy: [SortDescriptor(\.name)]), batchSize: 2).map { "\($0.name):\(type(of: $0))" }
        }
        #expect(classes == ["t1:BusinessTrip", "t2:Trip", "t4:ConferenceTrip", "t5:Trip", "t6:PersonalTrip", "t7:BusinessTrip", "t8:ConferenceTrip", "t9:BusinessTrip"])
        // Off: the entity's own objects only; an abstract entity's own are none.
        var own = FetchRequest<Trip>(sortBy: [SortDescriptor(\.name)])
        own.includesSubentities = false
        #expect(try context.fetch(own, batchSize: 2).map(\.name) == ["t2", "t5"])
        var vehicles = FetchRequest<Vehicle>()
        vehicles.includesSubentities = false
        #expect(try context.fetch(vehicles, batchSize: 2).isEmpty)
        let negative = #expect(throws: LoomError.self) { try context.fetch(FetchRequest<Trip>(), batchSize: -1) }
        #expect(negative?.code == .invalidRequest)
    }

    @Test("History records a batch request over a hierarchy as one transaction naming each object's own entity", arguments: StoreKind.persistentCases)
    func historyNamesEachEntity(kind: StoreKind) throws {
        let container = try kind.makeHierarchyContainer()
        let context = container.viewContext
        try seedTrips(context)
        let start = try context.currentHistoryToken()
        _ = try context.execute(BatchUpdateRequest<Trip>(predicate: #Predicate { $0.days == 4 || $0.days == 5 }, set: [.set(\.days, to: 9)]))
        _ = try context.execute(BatchDeleteRequest<Trip>(predicate: #Predicate { $0.days == 1 || $0.days == 3 }))
        let transactions = try context.fetchHistory(HistoryDescriptor(after: start))
        #expect(transactions.count == 2)
        let described = transactions.map { transaction in
            Set(transaction.changes.map { change in
                switch change.kind {
                case .insert: "+\(change.objectID.entityName)"
                case .update(let properties): "~\(change.objectID.entityName)(\(properties.joined(separator: ",")))"
                case .delete: "-\(change.objectID.entityName)"
                }
            })
        }
        #expect(described == [["~ConferenceTrip(days)", "~Trip(days)"], ["-BusinessTrip", "-PersonalTrip"]])
    }
}
