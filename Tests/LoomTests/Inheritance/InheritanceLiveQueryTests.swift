import Foundation
@_spi(LoomTesting) @testable import LoomCore
import Loom
@_spi(LoomStore) import LoomSQLite
@_spi(LoomStore) import LoomPostgreSQL
import Testing

/// Live queries across a hierarchy: a live query of a parent entity lists the objects of each
/// sub-entity, sorted, filtered (type filters too), sectioned and windowed as a fetch of the
/// same request, and every change (inserted, updated into or out of the predicate, deleted, in
/// this context, a sibling, a child or another coordinator) turns the last result into the new
/// one exactly. Built on ``LiveQueryTests/Check``.
@Suite("Inheritance: live queries", .timeLimit(.minutes(5)))
struct InheritanceLiveQueryTests {
    typealias Dice = LiveQueryTests.Dice

    /// One random edit of the trips and vehicles in `context`: a trip of any concrete entity
    /// inserted, deleted, renamed, its days (sort, sections, predicates) or its own
    /// sub-entity's attribute changed; a vehicle inserted, deleted or given other wheels.
    static func edit(_ dice: inout Dice, _ context: ManagedObjectContext) throws {
        let trips = try context.fetch(FetchRequest<Trip>(sortBy: [SortDescriptor(\.name)]))
        let vehicles = try context.fetch(FetchRequest<Vehicle>(sortBy: [SortDescriptor(\.wheels)]))
        func some() -> Trip { trips[dice.next(trips.count)] }
        func company() -> String { "C\(dice.next(3))" }
        // About 30 trips: changes often touch what a query shows.
        switch trips.count > 30 ? 3 : dice.next(12) {
        case 0, 1, 2:
            let name = "T\(dice.unique())", days = dice.next(20)
            switch dice.next(4) {
            case 0: context.insert(Trip(name: name, days: days))
            case 1: context.insert(BusinessTrip(name: name, days: days, company: company()))
            case 2: context.insert(ConferenceTrip(name: name, days: days, company: company(), talk: dice.next(2) == 0 ? nil : "talk"))
            default:
                let trip = PersonalTrip(context: context)
                trip.name = name
                trip.days = days
                trip.reason = dice.next(2) == 0 ? "family" : "rest"
            }
        case 3 where !trips.isEmpty: context.delete(some())
        case 4 where !trips.isEmpty, 5 where !trips.isEmpty: some().days = dice.next(20)
        case 6 where !trips.isEmpty: some().name = "T\(dice.unique())"
        case 7 where !trips.isEmpty:
            // A sub-entity's own attribute, which a predicate through `as?` reads.
            switch some() {
            case let business as BusinessTrip: business.company = company()
            case let personal as PersonalTrip: personal.reason = personal.reason == "family" ? "rest" : "family"
            default: break
            }
        case 8:
            if dice.next(2) == 0 { context.insert(Bicycle(gears: dice.next(5))) } else { Car(context: context).wheels = 3 + dice.next(2) }
        case 9 where !vehicles.isEmpty: vehicles[dice.next(vehicles.count)].wheels = dice.next(6)
        case 10 where vehicles.count > 2: context.delete(vehicles[dice.next(vehicles.count)])
        default:
            if !trips.isEmpty { some().days += 1 }
        }
    }

    /// What a trip shows of itself, its own entity's attributes included.
    static func fingerprint(_ trip: Trip) -> String {
        var text = "\(trip.name) \(trip.days)"
        if let business = trip as? BusinessTrip { text += " \(business.company)" }
        if let personal = trip as? PersonalTrip { text += " \(personal.reason)" }
        return text
    }

    /// The queries under test, each as a live query and an observer checked against a fetch.
    static func checks(_ context: ManagedObjectContext) throws -> [any Verifiable] {
        typealias Check = LiveQueryTests.Check
        func none<M>(_: M) -> NoSection { NoSection() }

        let all = FetchRequest<Trip>(sortBy: [SortDescriptor(\.days), SortDescriptor(\.name)])
        let q1 = Check("all trips", try context.liveQuery(all), try LiveResultsObserver(all, in: context), fetch: all, key: none, fingerprint: fingerprint)

        var byDays = FetchRequest<Trip>(predicate: #Predicate { $0.days >= 8 }, sortBy: [SortDescriptor(\.name, order: .reverse)])
        let q2 = Check("by days", try context.liveQuery(byDays, sectionedBy: \.days), try LiveResultsObserver(byDays, sectionedBy: \.days, in: context),
                       fetch: { byDays.sortBy.insert(SortDescriptor(\.days), at: 0); return byDays }(), key: \.days, fingerprint: fingerprint)

        let typed = FetchRequest<Trip>(predicate: #Predicate { $0 is BusinessTrip || $0.days < 5 }, sortBy: [SortDescriptor(\.name)])
        let q3 = Check("business or short", try context.liveQuery(typed), try LiveResultsObserver(typed, in: context), fetch: typed, key: none, fingerprint: fingerprint)

        let cast = FetchRequest<Trip>(predicate: #Predicate { ($0 as? BusinessTrip)?.company == "C1" }, sortBy: [SortDescriptor(\.days, order: .reverse)])
        let q4 = Check("company C1 through as?", try context.liveQuery(cast), try LiveResultsObserver(cast, in: context), fetch: cast, key: none, fingerprint: fingerprint)

        var middle = FetchRequest<BusinessTrip>(sortBy: [SortDescriptor(\.days)])
        let q5 = Check("business by company", try context.liveQuery(middle, sectionedBy: \.company), try LiveResultsObserver(middle, sectionedBy: \.company, in: context),
                       fetch: { middle.sortBy.insert(SortDescriptor(\.company), at: 0); return middle }(), key: \.company,
                       fingerprint: { fingerprint($0) })

        let window = FetchRequest<Trip>(sortBy: [SortDescriptor(\.days, order: .reverse), SortDescriptor(\.name)], fetchLimit: 4, fetchOffset: 2)
        let q6 = Check("window", try context.liveQuery(window), try LiveResultsObserver(window, in: context), fetch: window, key: none, fingerprint: fingerprint)

        var own = FetchRequest<Trip>(sortBy: [SortDescriptor(\.name)])
        own.includesSubentities = false
        let q7 = Check("trips only", try context.liveQuery(own), try LiveResultsObserver(own, in: context), fetch: own, key: none, fingerprint: fingerprint)

        let unsorted = FetchRequest<Trip>(predicate: #Predicate { $0.days < 12 && !($0 is PersonalTrip) })
        let q8 = Check("unsorted, no personal trips", try context.liveQuery(unsorted), try LiveResultsObserver(unsorted, in: context), fetch: unsorted, key: none, fingerprint: fingerprint)

        var vehicles = FetchRequest<Vehicle>()
        let q9 = Check("vehicles by wheels", try context.liveQuery(vehicles, sectionedBy: \.wheels), try LiveResultsObserver(vehicles, sectionedBy: \.wheels, in: context),
                       fetch: { vehicles.sortBy.insert(SortDescriptor(\.wheels), at: 0); return vehicles }(), key: \.wheels, fingerprint: { "\($0.wheels)" })
        return [q1, q2, q3, q4, q5, q6, q7, q8, q9]
    }

    @Test("Random edits of every sub-entity, in this context, a sibling, a child, saved and rolled back: every change turns the last result into the new one, which a fresh fetch equals",
          .serialized, arguments: StoreKind.allCases, [1, 2] as [UInt64])
    func differential(kind: StoreKind, seed: UInt64) throws {
        let container = try kind.makeHierarchyContainer()
        let observer = container.newBackgroundContext(name: "observer")
        let checks = try observer.performAndWait { context in
            context.automaticallyMergesChanges = true
            context.mergePolicy = .mergeByPropertyObjectTrump
            try seedTrips(context)
            return try Self.checks(context)
        }
        let steps = kind == .postgres ? 300 : 700
        try LiveQueryTests.drive(steps, seed: seed, container: container, observer: observer, checks: checks, edit: Self.edit)
        let changed = observer.performAndWait { _ in checks.map(\.changeCount) }
        #expect(changed.allSatisfy { $0 > steps / 40 }, "changes seen per query: \(changed)")
    }

    @Test("Each change of a sub-entity's object is an exact change of the parent's result: inserted, moved by a sort key, out of and into the predicate, deleted", arguments: StoreKind.allCases)
    @MainActor
    func exactChanges(kind: StoreKind) throws {
        let container = try kind.makeHierarchyContainer()
        let context = container.viewContext
        try seedTrips(context)
        // Trips by days: t1 B, t2 T, t3 P, t4 C, t5 T, t6 P, t7 B, t8 C.
        let live = try context.liveQuery(FetchRequest<Trip>(predicate: #Predicate { $0.days < 8 }, sortBy: [SortDescriptor(\.days)]))
        func next() throws -> LiveResults<Trip, NoSection> { try #require(try live.channel.poll()) }
        func names(_ results: LiveResults<Trip, NoSection>) throws -> [String] {
            try results.items.map { try context.existingObject(with: $0).name }
        }
        let first = try next()
        #expect(try names(first) == ["t1", "t2", "t3", "t4", "t5", "t6", "t7"])
        // Each item's ID names its own entity.
        #expect(first.items.map(\.erased.entityName) == ["BusinessTrip", "Trip", "PersonalTrip", "ConferenceTrip", "Trip", "PersonalTrip", "BusinessTrip"])
        #expect(Set(first.items.map(\.erased.primaryKey)).count == 7)

        let inserted = ConferenceTrip(name: "new", days: 0, company: "X", talk: nil)
        context.insert(inserted)
        context.processPendingChanges()
        var results = try next()
        #expect(results.changes?.insertedItems == [ResultPosition(section: 0, item: 0)])
        #expect(results.changes?.deletedItems == [])
        #expect(results.items.first?.erased == inserted.anyObjectID)

        // A PersonalTrip moves to the end; a ConferenceTrip leaves the predicate.
        let trips = try context.fetch(FetchRequest<Trip>(sortBy: [SortDescriptor(\.days)]))
        trips.first { $0.name == "t3" }!.days = 7
        trips.first { $0.name == "t4" }!.days = 9
        context.processPendingChanges()
        results = try next()
        #expect(try names(results) == ["new", "t1", "t2", "t5", "t6", "t7", "t3"])
        #expect(results.changes?.deletedItems == [ResultPosition(section: 0, item: 4)])
        #expect(results.changes?.movedItems.count == 1)

        // t8 (a ConferenceTrip) comes into the predicate; a BusinessTrip is deleted; saved.
        let t4 = trips.first { $0.name == "t4" } as! ConferenceTrip
        trips.first { $0.name == "t8" }!.days = 2
        context.delete(trips.first { $0.name == "t1" }!)
        try context.save()
        results = try next()
        #expect(try names(results) == ["new", "t2", "t8", "t5", "t6", "t7", "t3"])
        #expect(results.changes?.insertedItems == [ResultPosition(section: 0, item: 2)])
        #expect(results.changes?.deletedItems == [ResultPosition(section: 0, item: 1)])
        // A change to no object it lists, or to a property it does not read, delivers nothing.
        t4.talk = "later"
        context.processPendingChanges()
        #expect(try live.channel.poll() == nil)
    }

    @Test("Another coordinator's saves (as another process) reach a live query over a hierarchy", arguments: StoreKind.persistentCases)
    @MainActor
    func remoteCommits(kind: StoreKind) async throws {
        let open = try InheritanceKeySpaceTests().legacyHarness(kind).open
        let here = try open(), there = try open()
        let view = here.viewContext
        try seedTrips(view)
        var results = try view.liveQuery(FetchRequest<Trip>(predicate: #Predicate { $0.days > 4 }, sortBy: [SortDescriptor(\.name)]), sectionedBy: \.days).makeAsyncIterator()
        let first = try #require(try await results.next(isolation: #isolation))
        #expect(first.sections.map(\.key) == [5, 6, 7, 8])
        try await there.performBackgroundTask { context in
            let trips = try context.fetch(FetchRequest<Trip>())
            trips.first { $0.name == "t8" }!.days = 1
            context.delete(trips.first { $0.name == "t6" }!)
            context.insert(BusinessTrip(name: "t9", days: 5, company: "Far"))
            try context.save()
        }
        let next = try #require(try await results.next(isolation: #isolation))
        #expect(next.sections.map(\.key) == [5, 7])
        let items = try next.sections.map { try $0.items.map { try view.existingObject(with: $0).name } }
        #expect(items == [["t5", "t9"], ["t7"]])
        #expect(next.changes?.deletedSections == [1, 3])
        #expect(next.changes?.insertedItems == [ResultPosition(section: 0, item: 1)])
        try await here.close()
        try await there.close()
    }

    @Test("A store whose hierarchy still has objects sharing a key refuses a live query over it, naming both; each entity's own live query runs", arguments: StoreKind.persistentCases)
    @MainActor
    func collidingKeysRefused(kind: StoreKind) async throws {
        let keySpace = InheritanceKeySpaceTests()
        let (open, execute, _) = try keySpace.legacyHarness(kind)
        try await keySpace.makeLegacyStore(open: open, execute: execute)
        let container = try open()
        let context = container.viewContext
        let error = #expect(throws: LoomError.self) { try context.liveQuery(FetchRequest<Trip>()) }
        #expect(error?.code == .invalidRequest)
        #expect(error?.message.contains("share a key") == true)
        #expect(error?.message.contains("Trip/1") == true || error?.message.contains("Trip/2") == true)
        // A middle entity whose own objects do not collide is still part of the hierarchy checked.
        #expect(throws: LoomError.self) { try context.liveQuery(FetchRequest<BusinessTrip>()) }
        // Each entity alone is fine, and the store is unchanged.
        var own = FetchRequest<Trip>(sortBy: [SortDescriptor(\.name)])
        own.includesSubentities = false
        let trips = try #require(try context.liveQuery(own).channel.poll())
        #expect(trips.items.map(\.erased.primaryKey) == [1, 2])
        let personal = try #require(try context.liveQuery(FetchRequest<PersonalTrip>()).channel.poll())
        #expect(personal.items.map(\.erased.primaryKey) == [2])
        #expect(try context.count(for: FetchRequest<Trip>()) == 5)
        try await container.close()
    }
}
