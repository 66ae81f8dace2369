import Foundation
import GRDB
import Loom
import Testing

/// `loom inspect`, `verify`, `dump` and `load` on a store whose model has hierarchies, run as
/// the built executable.
@Suite("Inheritance: loom tools", .ownThreads)
struct InheritanceToolTests {
    /// A SQLite store with the eight trips of the fetch tests and two vehicles, closed.
    private func makeStore() async throws -> URL {
        let url = TemporaryDirectory.make().appending(path: "trips.loom")
        let container = PersistentContainer(store: try SQLiteStore(url: url, schema: try Schema(tripModels + vehicleModels)))
        try await container.performBackgroundTask { context in
            try seedTrips(context)
            context.insert(Bicycle(gears: 3))
            _ = Car(context: context)
            try context.save()
        }
        try await container.close()
        return url
    }

    /// Checks that `loom verify` finds the closed store at `url` sound with `objects` objects,
    /// dumps it, loads the dump into a new store, and checks that the copy dumps the same;
    /// returns the copy.
    private func verifiedCopy(of url: URL, objects: Int) async throws -> URL {
        let verify = try await LoomExecutable.run(["verify", url.path])
        #expect(verify.status == 0, "\(verify.standardOutput)\(verify.standardError)")
        #expect(verify.standardOutput.contains("No problems in \(objects) objects"), "\(verify.standardOutput)")

        let dumped = try await LoomExecutable.run(["dump", url.path])
        #expect(dumped.status == 0, "\(dumped.standardError)")
        let folder = TemporaryDirectory.make()
        let file = folder.appending(path: "dump.ndjson")
        try Data(dumped.standardOutput.utf8).write(to: file)
        let copy = folder.appending(path: "copy.loom")
        let loaded = try await LoomExecutable.run(["load", file.path, copy.path])
        #expect(loaded.status == 0, "\(loaded.standardError)")
        #expect(try await LoomExecutable.run(["dump", copy.path]).standardOutput == dumped.standardOutput)
        return copy
    }

    @Test("loom inspect shows each entity's place in its hierarchy, as text and JSON")
    func inspectShowsTheHierarchy() async throws {
        let url = try await makeStore()
        let json = try await LoomExecutable.run(["inspect", "--json", url.path])
        #expect(json.status == 0, "\(json.standardError)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(json.standardOutput.utf8)) as? [String: Any])
        let entities = try #require(report["entities"] as? [[String: Any]])
        func entity(_ name: String) throws -> [String: Any] { try #require(entities.first { $0["name"] as? String == name }) }
        #expect(try entity("Vehicle")["abstract"] as? Bool == true)
        #expect(try entity("Vehicle")["subentities"] as? [String] == ["Bicycle", "Car"])
        #expect(try entity("Vehicle")["count"] as? Int == 0)
        #expect(try entity("Bicycle")["superentity"] as? String == "Vehicle")
        #expect(try entity("Bicycle")["abstract"] == nil)
        #expect(try entity("Trip")["subentities"] as? [String] == ["BusinessTrip", "PersonalTrip"])
        #expect(try entity("ConferenceTrip")["superentity"] as? String == "BusinessTrip")
        #expect(try entity("ConferenceTrip")["count"] as? Int == 2)
        #expect(report["versionHash"] as? String == InheritanceSchemaTests.pinnedHash)

        let text = try await LoomExecutable.run(["inspect", url.path])
        #expect(text.standardOutput.contains("Vehicle: 0 objects\n  (abstract; sub-entities Bicycle, Car)"))
        #expect(text.standardOutput.contains("BusinessTrip: 2 objects\n  (inherits from Trip; sub-entities ConferenceTrip)"))
    }

    @Test("loom verify finds a hierarchy's store sound; dump and load keep it")
    func verifyDumpAndLoad() async throws {
        let url = try await makeStore()
        let copy = try await verifiedCopy(of: url, objects: 10)

        // The loaded copy opens with the model: the same hash, its objects of their classes.
        let container = PersistentContainer(store: try SQLiteStore(url: copy, schema: try Schema(tripModels + vehicleModels)))
        let kinds = try await container.performBackgroundTask { context in
            try context.fetch(FetchRequest<Trip>(sortBy: [SortDescriptor(\.days)])).map { "\(type(of: $0))" }
        }
        #expect(kinds == ["BusinessTrip", "Trip", "PersonalTrip", "ConferenceTrip", "Trip", "PersonalTrip", "BusinessTrip", "ConferenceTrip"])
        try await container.close()
    }

    @Test("loom verify, dump and load keep the relationships of a hierarchy's leaves")
    func leafRelationshipsThroughTheTools() async throws {
        let url = TemporaryDirectory.make().appending(path: "media.loom")
        let container = PersistentContainer(store: try SQLiteStore(url: url, schema: try Schema(mediaModels)))
        try await container.performBackgroundTask { try seedMedia($0) }
        try await container.close()
        let copy = try await verifiedCopy(of: url, objects: 14)

        let reopened = PersistentContainer(store: try SQLiteStore(url: copy, schema: try Schema(mediaModels)))
        let graph = try await reopened.performBackgroundTask { context in
            try context.fetch(FetchRequest<Media>(sortBy: [SortDescriptor(\.title)])).map { media -> String in
                switch media {
                case let podcast as Podcast: "\(podcast.title) \(podcast.host?.name ?? "-") \(podcast.episodes.map(\.number)) \(podcast.basedOn?.title ?? "-")"
                case let film as Film: "\(film.title) \(film.themes.map(\.name).sorted())"
                default: media.title
                }
            }
        }
        #expect(graph == ["F1 [\"crime\", \"drama\"]", "F2 [\"drama\"]", "M1", "P1 Ann [1, 2, 3] F1", "P2 Ann [] -", "P3 Bob [1] -"])
        try await reopened.close()
    }

    @Test("loom verify, dump and load keep relationships declared on a parent and leading to one; verify finds a dangling key")
    func parentRelationshipsThroughTheTools() async throws {
        let url = TemporaryDirectory.make().appending(path: "animals.loom")
        let container = PersistentContainer(store: try SQLiteStore(url: url, schema: try Schema(animalModels)))
        try await container.performBackgroundTask { try seedAnimals($0) }
        try await container.close()
        let copy = try await verifiedCopy(of: url, objects: 12)

        let reopened = PersistentContainer(store: try SQLiteStore(url: copy, schema: try Schema(animalModels)))
        let graph = try await reopened.performBackgroundTask { context in
            try context.fetch(FetchRequest<Animal>(sortBy: [SortDescriptor(\.name)])).map { animal in
                "\(animal.name):\(type(of: animal)) \(animal.keeper?.name ?? "-") \(animal.visits.map(\.reason)) \(animal.toys.map(\.name).sorted()) \(animal.mother?.name ?? "-") \(animal.offspring.map(\.name).sorted())"
            }
        }
        #expect(graph == [
            "Lou:Animal Bob [] [] Tom []", "Max:GuideDog Ann [] [\"rope\"] Rex []",
            "Rex:Dog Ann [\"vaccine\", \"check-up\"] [\"ball\", \"rope\"] - [\"Max\"]", "Tom:Cat Ann [\"teeth\"] [\"ball\"] - [\"Lou\"]",
        ])
        try await reopened.close()

        // A visit whose animal is gone from every table of the hierarchy is a dangling key; one
        // whose animal is a cat is not.
        try await DatabaseQueue(path: copy.path).write { db in
            try db.execute(sql: "UPDATE \"Visit\" SET \"Z_animal\" = 999999 WHERE \"reason\" = 'vaccine'")
        }
        let verify = try await LoomExecutable.run(["verify", copy.path])
        #expect(verify.status != 0)
        #expect(verify.standardOutput.contains("Visit") && verify.standardOutput.contains("999999"), "\(verify.standardOutput)")
        #expect(!verify.standardOutput.contains("teeth"), "\(verify.standardOutput)")
    }

    @Test("loom verify checks a uniqueness constraint across a hierarchy; dump and load keep it")
    func uniquenessAcrossTheHierarchyThroughTheTools() async throws {
        let url = TemporaryDirectory.make().appending(path: "accounts.loom")
        let container = PersistentContainer(store: try SQLiteStore(url: url, schema: try Schema(accountModels)))
        try await container.performBackgroundTask { try InheritanceUniquenessTests.seed($0) }
        try await container.close()
        let copy = try await verifiedCopy(of: url, objects: 3)

        // loom inspect says which constraint holds across the hierarchy, on each entity it covers.
        let text = try await LoomExecutable.run(["inspect", url.path])
        #expect(text.standardOutput.contains("Admin: 1 objects\n  (inherits from Account)\n  email: string unique\n  nickname: string\n  level: integer64\n  unique across Account and its sub-entities: email"), "\(text.standardOutput)")
        #expect(!text.standardOutput.contains("Badge: 0 objects\n  code: string\n  unique across"))
        let json = try await LoomExecutable.run(["inspect", "--json", url.path])
        let report = try #require(try JSONSerialization.jsonObject(with: Data(json.standardOutput.utf8)) as? [String: Any])
        let guest = try #require((report["entities"] as? [[String: Any]])?.first { $0["name"] as? String == "Guest" })
        let across = try #require(guest["uniqueAcrossHierarchy"] as? [[String: Any]])
        #expect(across.first?["declaredOn"] as? String == "Account")
        #expect(across.first?["attributes"] as? [String] == ["email"])

        // The loaded copy holds the constraint across its tables.
        let reopened = PersistentContainer(store: try SQLiteStore(url: copy, schema: try Schema(accountModels)))
        let error = try await reopened.performBackgroundTask { context -> LoomError? in
            Admin(context: context).email = "c@x"
            return #expect(throws: LoomError.self) { try context.save() }
        }
        #expect(error?.code == .uniquenessViolation)
        try await reopened.close()

        // Damaged outside Loom: an admin's trigger dropped, and an admin with the guest's value.
        let queue = try DatabaseQueue(path: url.path)
        try await queue.write { db in
            try db.execute(sql: "DROP TRIGGER \"loom_hierarchy_Account_email_Admin_insert\"")
            try db.execute(sql: "INSERT INTO \"Admin\" (\"Z_PK\", \"Z_OPT\", \"email\", \"nickname\", \"level\") VALUES (99, 1, 'c@x', '', 0)")
        }
        try queue.close()
        let verify = try await LoomExecutable.run(["verify", url.path])
        #expect(verify.status != 0)
        #expect(verify.standardOutput.contains("lacks the triggers of Admin"), "\(verify.standardOutput)")
        #expect(verify.standardOutput.contains("Admin 99 and Guest 3 have the same email, which must be unique across Account's sub-entities"), "\(verify.standardOutput)")
    }
}
