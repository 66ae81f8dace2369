import Foundation
import Loom
@_spi(LoomStore) import LoomCore
import Testing

/// Fetching across a hierarchy, on every store: a fetch of a parent entity returns objects of
/// each sub-entity's own class, counts and windows cover them all, IDs name the concrete
/// entity, and an abstract entity cannot be inserted.
@MainActor
@Suite("Inheritance: fetches", .timeLimit(.minutes(5)))
struct InheritanceFetchTests {
    /// Two trips of each concrete kind, saved (``seedTrips(_:)``).
    func seed(_ context: ManagedObjectContext) throws {
        try seedTrips(context)
    }

    /// The class of each trip, by name.
    func kinds(_ trips: [Trip]) -> [String: String] {
        Dictionary(uniqueKeysWithValues: trips.map { ($0.name, String(describing: type(of: $0))) })
    }

    @Test("A fetch of the parent returns every sub-entity's objects, each of its own class", arguments: StoreKind.allCases)
    func parentFetchIsPolymorphic(kind: StoreKind) throws {
        let container = try kind.makeHierarchyContainer()
        try seed(container.viewContext)
        // Another context, which registered none of them.
        let fetched = try container.newBackgroundContext().performAndWait { context in
            let trips = try context.fetch(FetchRequest<Trip>(sortBy: [SortDescriptor(\.days)]))
            return trips.map { "\($0.name):\(type(of: $0))" }
        }
        #expect(fetched == ["t1:BusinessTrip", "t2:Trip", "t3:PersonalTrip", "t4:ConferenceTrip", "t5:Trip", "t6:PersonalTrip", "t7:BusinessTrip", "t8:ConferenceTrip"])
        let context = container.viewContext
        let trips = try context.fetch(FetchRequest<Trip>(sortBy: [SortDescriptor(\.days)]))
        #expect(trips.map(\.name) == ["t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8"])
        #expect(kinds(trips) == [
            "t1": "BusinessTrip", "t2": "Trip", "t3": "PersonalTrip", "t4": "ConferenceTrip",
            "t5": "Trip", "t6": "PersonalTrip", "t7": "BusinessTrip", "t8": "ConferenceTrip",
        ])
        let conference = try #require(trips[3] as? ConferenceTrip)
        #expect(conference.company == "Acme")
        #expect(conference.talk == "Loom")
        #expect((trips[2] as? PersonalTrip)?.reason == "family")
        #expect(try context.count(for: FetchRequest<Trip>()) == 8)
    }

    @Test("A middle entity's fetch includes its sub-entities; a leaf's only its own", arguments: StoreKind.allCases)
    func middleAndLeafFetches(kind: StoreKind) throws {
        let container = try kind.makeHierarchyContainer()
        try seed(container.viewContext)
        let context = container.viewContext
        let business = try context.fetch(FetchRequest<BusinessTrip>(sortBy: [SortDescriptor(\.name)]))
        #expect(business.map(\.name) == ["t1", "t4", "t7", "t8"])
        #expect(business.map(\.company) == ["Globex", "Acme", "Acme", "Initech"])
        let conferences = try context.fetch(FetchRequest<ConferenceTrip>(sortBy: [SortDescriptor(\.days, order: .reverse)]))
        #expect(conferences.map(\.name) == ["t8", "t4"])
        #expect(try context.count(for: FetchRequest<BusinessTrip>()) == 4)
        #expect(try context.count(for: FetchRequest<ConferenceTrip>()) == 2)
    }

    @Test("includesSubentities off returns only the entity's own objects", arguments: StoreKind.allCases)
    func withoutSubentities(kind: StoreKind) throws {
        let container = try kind.makeHierarchyContainer()
        try seed(container.viewContext)
        let context = container.viewContext
        var request = FetchRequest<Trip>(sortBy: [SortDescriptor(\.name)])
        request.includesSubentities = false
        let own = try context.fetch(request)
        #expect(own.map(\.name) == ["t2", "t5"])
        #expect(own.allSatisfy { type(of: $0) == Trip.self })
        #expect(try context.count(for: request) == 2)
        var vehicles = FetchRequest<Vehicle>()
        vehicles.includesSubentities = false
        #expect(try context.fetch(vehicles).isEmpty)
        #expect(try context.count(for: vehicles) == 0)
    }

    @Test("Predicates and sorts on parent attributes over a mixed result, windowed", arguments: StoreKind.allCases)
    func predicatesSortsAndWindows(kind: StoreKind) throws {
        let container = try kind.makeHierarchyContainer()
        try seed(container.viewContext)
        let context = container.viewContext
        let long = try context.fetch(FetchRequest<Trip>(predicate: #Predicate { $0.days > 3 }, sortBy: [SortDescriptor(\.days, order: .reverse)]))
        #expect(long.map(\.name) == ["t8", "t7", "t6", "t5", "t4"])
        // A window over the merged order, not over each entity's.
        let page = try context.fetch(FetchRequest<Trip>(sortBy: [SortDescriptor(\.days)], fetchLimit: 3, fetchOffset: 2))
        #expect(page.map(\.name) == ["t3", "t4", "t5"])
        #expect(try context.count(for: FetchRequest<Trip>(fetchLimit: 3, fetchOffset: 6)) == 2)
        #expect(try context.count(for: FetchRequest<Trip>(fetchOffset: 20)) == 0)
        #expect(try context.fetch(FetchRequest<Trip>(sortBy: [SortDescriptor(\.days)], fetchOffset: 20)).isEmpty)
        let acme = try context.fetch(FetchRequest<BusinessTrip>(predicate: #Predicate { $0.company == "Acme" && $0.days < 7 }))
        #expect(acme.map(\.name) == ["t4"])
        let named = try context.fetch(FetchRequest<Trip>(predicate: #Predicate { $0.name.starts(with: "t") }, sortBy: [SortDescriptor(\.name, order: .reverse)], fetchLimit: 2))
        #expect(named.map(\.name) == ["t8", "t7"])
        let bad = #expect(throws: LoomError.self) { try context.fetch(FetchRequest<Trip>(fetchLimit: -1)) }
        #expect(bad?.code == .invalidRequest)
    }

    @Test("Unsaved objects of sub-entities are in the parent's fetch and count", arguments: StoreKind.allCases)
    func pendingChangesAcrossTheHierarchy(kind: StoreKind) throws {
        let container = try kind.makeHierarchyContainer()
        try seed(container.viewContext)
        let context = container.viewContext
        context.insert(ConferenceTrip(name: "t0", days: 0, company: "New", talk: nil))
        let t7 = try #require(try context.fetch(FetchRequest<BusinessTrip>(predicate: #Predicate { $0.name == "t7" })).first)
        context.delete(t7)
        let trips = try context.fetch(FetchRequest<Trip>(sortBy: [SortDescriptor(\.days)]))
        #expect(trips.map(\.name) == ["t0", "t1", "t2", "t3", "t4", "t5", "t6", "t8"])
        #expect(try context.count(for: FetchRequest<Trip>()) == 8)
        var saved = FetchRequest<Trip>()
        saved.includesPendingChanges = false
        #expect(try context.count(for: saved) == 8)
        #expect(Set(try context.fetch(saved).map(\.name)) == ["t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8"])
    }

    @Test("An ID names the concrete entity; a fault by ID is of the right class", arguments: StoreKind.allCases)
    func idsAndFaults(kind: StoreKind) throws {
        let container = try kind.makeHierarchyContainer()
        try seed(container.viewContext)
        let ids = try container.viewContext.fetchIDs(FetchRequest<Trip>(sortBy: [SortDescriptor(\.days)]))
        #expect(ids.map(\.erased.entityName) == ["BusinessTrip", "Trip", "PersonalTrip", "ConferenceTrip", "Trip", "PersonalTrip", "BusinessTrip", "ConferenceTrip"])
        let found = try container.newBackgroundContext().performAndWait { other in
            let fault = try other.object(with: ids[3])
            let wasFault = fault.isFault
            let existing = try other.existingObject(with: ids[0])
            // The same object, whichever way it is reached.
            let business = try other.fetch(FetchRequest<BusinessTrip>(predicate: #Predicate { $0.name == "t1" }))
            return ["\(type(of: fault))", "\(wasFault)", fault.name, (fault as? ConferenceTrip)?.talk ?? "-",
                    (existing as? BusinessTrip)?.company ?? "-", "\(business.first === existing)"]
        }
        #expect(found == ["ConferenceTrip", "true", "t4", "Loom", "Globex", "true"])
        // An ID types as its entity or any ancestor, never as a sibling.
        let personalID = try #require(ids.first { $0.erased.entityName == "PersonalTrip" })
        #expect(ObjectID<Trip>(personalID.erased) == personalID)
        #expect(ObjectID<PersonalTrip>(personalID.erased) != nil)
        #expect(ObjectID<BusinessTrip>(personalID.erased) == nil)
        let decoded = try JSONDecoder().decode(ObjectID<Trip>.self, from: JSONEncoder().encode(personalID))
        #expect(decoded == personalID)
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(ObjectID<BusinessTrip>.self, from: JSONEncoder().encode(personalID)) }
    }

    @Test("An abstract entity's fetch returns its sub-entities' objects", arguments: StoreKind.allCases)
    func abstractFetch(kind: StoreKind) throws {
        let container = try kind.makeHierarchyContainer()
        let context = container.viewContext
        context.insert(Bicycle(gears: 21))
        let car = Car(context: context)
        car.wheels = 4
        car.seats = 7
        try context.save()
        let vehicles = try context.fetch(FetchRequest<Vehicle>(sortBy: [SortDescriptor(\.wheels)]))
        #expect(vehicles.count == 2)
        #expect((vehicles[0] as? Bicycle)?.gears == 21)
        #expect(vehicles[0].wheels == 2)
        #expect((vehicles[1] as? Car)?.seats == 7)
        #expect(try context.count(for: FetchRequest<Vehicle>(predicate: #Predicate { $0.wheels > 2 })) == 1)
    }

    @Test("Inserting an abstract entity's object is refused with an error; the store is unchanged", arguments: StoreKind.allCases)
    func abstractInsertRefused(kind: StoreKind) throws {
        let container = try kind.makeHierarchyContainer()
        let context = container.viewContext
        context.insert(Bicycle(gears: 3))
        let vehicle = Vehicle(wheels: 3)
        context.insert(vehicle)                     // not a trap
        #expect(vehicle.managedObjectContext == nil)
        #expect(context.pendingStoreError?.code == .abstractEntity)
        let error = try #require(throws: LoomError.self) { try context.save() }
        #expect(error.code == .abstractEntity)
        #expect(error.message.contains("Vehicle is abstract"))
        #expect(error.message.contains("Bicycle, Car"))
        // Nothing was saved by the failed save; the next save saves the rest.
        #expect(try container.newBackgroundContext().performAndWait { try $0.count(for: FetchRequest<Bicycle>()) } == 0)
        #expect(context.pendingStoreError == nil)
        try context.save()
        #expect(try container.newBackgroundContext().performAndWait { try $0.count(for: FetchRequest<Vehicle>()) } == 1)

        let dynamic = #expect(throws: LoomError.self) { try DynamicObject(entity: Vehicle.entity, context: context) }
        #expect(dynamic?.code == .abstractEntity)
    }

    @Test("A hierarchy's objects survive reopening the store, read through its saved schema", arguments: StoreKind.persistentCases)
    func savedSchemaKeepsTheHierarchy(kind: StoreKind) throws {
        let container = try kind.makeHierarchyContainer()
        try seed(container.viewContext)
        let schema = container.coordinator.schema
        let reread = try Schema(record: schema.record)
        #expect(reread.versionHash == schema.versionHash)
        let trip = try #require(reread.entity(named: "Trip"))
        let objects = try container.viewContext.fetch(DynamicFetchRequest(entityName: "ConferenceTrip"))
        #expect(objects.count == 2)
        #expect(reread.concreteEntities(of: trip).count == 4)
    }
}

/// Type filtering in `#Predicate`: `is` and `as?`, as Foundation's macro writes them on Linux.
@MainActor
@Suite("Inheritance: type filtering", .timeLimit(.minutes(5)))
struct InheritanceTypeFilterTests {
    @Test("`$0 is BusinessTrip` keeps the objects of that entity and its sub-entities", arguments: StoreKind.allCases)
    func isFilters(kind: StoreKind) throws {
        let container = try kind.makeHierarchyContainer()
        try InheritanceFetchTests().seed(container.viewContext)
        let context = container.viewContext
        let business = try context.fetch(FetchRequest<Trip>(predicate: #Predicate { $0 is BusinessTrip }, sortBy: [SortDescriptor(\.name)]))
        #expect(business.map(\.name) == ["t1", "t4", "t7", "t8"])
        let notBusiness = try context.fetch(FetchRequest<Trip>(predicate: #Predicate { !($0 is BusinessTrip) && $0.days > 2 }, sortBy: [SortDescriptor(\.name)]))
        #expect(notBusiness.map(\.name) == ["t3", "t5", "t6"])
        #expect(try context.count(for: FetchRequest<Trip>(predicate: #Predicate { $0 is ConferenceTrip || $0 is PersonalTrip })) == 4)
        // Unsaved objects are judged the same way.
        context.insert(ConferenceTrip(name: "t9", days: 9, company: "X", talk: nil))
        #expect(try context.count(for: FetchRequest<Trip>(predicate: #Predicate { $0 is BusinessTrip })) == 5)
    }

    @Test("A sub-entity's attribute through `as?` reads NULL on the other entities", arguments: StoreKind.allCases)
    func conditionalCastReadsSubentityAttributes(kind: StoreKind) throws {
        let container = try kind.makeHierarchyContainer()
        try InheritanceFetchTests().seed(container.viewContext)
        let context = container.viewContext
        let acme = try context.fetch(FetchRequest<Trip>(predicate: #Predicate { ($0 as? BusinessTrip)?.company == "Acme" }, sortBy: [SortDescriptor(\.name)]))
        #expect(acme.map(\.name) == ["t4", "t7"])
        let talks = try context.fetch(FetchRequest<Trip>(predicate: #Predicate { ($0 as? ConferenceTrip)?.talk != nil }))
        #expect(talks.map(\.name) == ["t4"])
        let notAcme = try context.fetch(FetchRequest<Trip>(predicate: #Predicate { ($0 as? BusinessTrip)?.company != "Acme" }, sortBy: [SortDescriptor(\.name)]))
        // Swift's rule, which Loom's comparisons follow: `nil != "Acme"` is true, so the trips
        // that are not business trips are in too (as SwiftData evaluating the predicate in Swift).
        #expect(notAcme.map(\.name) == ["t1", "t2", "t3", "t5", "t6", "t8"])
        let noCompany = try context.fetch(FetchRequest<Trip>(predicate: #Predicate { ($0 as? BusinessTrip)?.company == nil }, sortBy: [SortDescriptor(\.name)]))
        #expect(noCompany.map(\.name) == ["t2", "t3", "t5", "t6"])
        // Unsaved objects are judged the same way as saved ones.
        _ = PersonalTrip(context: context)
        #expect(try context.count(for: FetchRequest<Trip>(predicate: #Predicate { ($0 as? BusinessTrip)?.company != "Acme" })) == 7)
    }
}
