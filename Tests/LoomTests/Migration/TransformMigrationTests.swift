import Foundation
import Loom
@_spi(LoomStore) import LoomCore
@_spi(LoomStore) import LoomSQLite
import Synchronization
import Testing

@Suite("Transform stages: both versions, in chunks that resume", .timeLimit(.minutes(5)))
struct TransformMigrationTests {
    static func makeV1Store(at url: URL, people: Int = 2_500) async throws {
        try await fillV1(try await PersistentContainer(name: "people", for: PeopleV1.self, location: .file(url)), people: people)
    }

    /// Saves `people` V1 people and three notes into `container`, and closes it.
    static func fillV1(_ container: PersistentContainer, people: Int = 2_500) async throws {
        try await container.save { context in
            for i in 0..<people { context.insert(PeopleV1.Person(fullName: "Given\(i) Family \(i % 50)", age: Int16(i % 90))) }
            for i in 0..<3 { context.insert(PeopleV1.Note(text: "note \(i)")) }
        }
        try await container.close()
    }

    /// The people's primary keys in the version 1.0.0 store, in key order: the order the
    /// transform reads them in. (Not 1...2,500: a key block reserved ahead that crosses a
    /// synchronous reservation leaves a gap, more often on a loaded machine.)
    static func v1Keys(_ url: URL) throws -> [Int64] {
        let store = try SQLiteStore(url: url, schema: try Schema(versionedSchema: PeopleV1.self))
        defer { try? store.close() }
        return try store.fetchKeys(StoreQuery(entity: store.schema.entity(named: "Person")!)).sorted()
    }

    static func people(_ url: URL) async throws -> [String] {
        try await people(try await PersistentContainer(name: "people", for: PeopleV2.self, location: .file(url)))
    }

    /// Every V2 person as "first|last|age", by age and first name; closes the container.
    static func people(_ container: PersistentContainer) async throws -> [String] {
        let people = try await container.performBackgroundTask { context in
            try context.fetch(FetchRequest<PeopleV2.Person>(sortBy: [SortDescriptor(\.age), SortDescriptor(\.firstName)])).map { "\($0.firstName)|\($0.lastName)|\($0.age)" }
        }
        try await container.close()
        return people
    }

    @Test("The transform reads a value only the old version has and writes the new one, chunk by chunk, with progress")
    func transformSeesBothVersions() async throws {
        let url = TemporaryDirectory.make().appending(path: "people.loom")
        try await Self.makeV1Store(at: url)
        let steps = Mutex<[MigrationProgress]>([])
        let container = try await PersistentContainer(
            name: "people", for: PeopleV2.self, migrationPlan: PeoplePlan.self, location: .file(url),
            progress: { progress in steps.withLock { $0.append(progress) } })
        try await container.close()
        let people = try await Self.people(url)
        #expect(people.count == 2_500)
        #expect(people.first == "Given0|Family 0|0")
        #expect(people.allSatisfy { !$0.hasPrefix("|") && !$0.contains("||") })
        let transforms = steps.withLock { $0 }.filter { $0.step == "transform" }
        #expect(transforms.map(\.objectsDone) == [0, 1_000, 2_000, 2_500])
        #expect(transforms.allSatisfy { $0.entity == "Person" && $0.objectCount == 2_500 })
        #expect(steps.withLock { $0 }.last?.fractionCompleted == 1)
        #expect(!FileManager.default.fileExists(atPath: url.path + "-migration-source"))
        let state = try SQLiteStore.savedState(at: url)
        #expect(state.metadata["migrationStep"] == nil)
        #expect(state.metadata["versionIdentifier"] == "2.0.0")
    }

    @Test("A transform stage that would drop an entity still holding objects fails without allowsDataLoss, naming it, and changes nothing")
    func dataLossIsRefused() async throws {
        let url = TemporaryDirectory.make().appending(path: "people.loom")
        try await Self.makeV1Store(at: url, people: 10)
        let before = try SQLiteStore.contentDump(at: url)
        let error = await #expect(throws: LoomError.self) {
            _ = try await PersistentContainer(name: "people", for: PeopleV2.self, migrationPlan: StrictPeoplePlan.self, location: .file(url))
        }
        #expect(error?.code == .migrationFailed)
        #expect(error?.entityName == "Note")
        #expect(error?.message.contains("drops entity Note, which holds 3 objects") == true, "\(error?.message ?? "")")
        #expect(try SQLiteStore.contentDump(at: url) == before)
        #expect(!FileManager.default.fileExists(atPath: url.path + "-migration-source"))
    }

    @Test("A transform stage whose tables cannot be migrated fails naming the attribute, leaves the store as it was and removes its copy")
    func tablesThatCannotBeMigrated() async throws {
        let url = TemporaryDirectory.make().appending(path: "people.loom")
        try await Self.makeV1Store(at: url, people: 10)
        let before = try SQLiteStore.contentDump(at: url)
        let error = await #expect(throws: LoomError.self) {
            _ = try await PersistentContainer(name: "people", for: PeopleV2WithoutDefault.self, migrationPlan: UnmigratablePeoplePlan.self, location: .file(url))
        }
        #expect(error?.code == .migrationFailed)
        #expect(error?.attributeNames == ["firstName"])
        #expect(try SQLiteStore.contentDump(at: url) == before)
        #expect(!FileManager.default.fileExists(atPath: url.path + "-migration-source"))
    }

    @Test("A copy of the old version left behind by a process killed after the transform's last chunk is removed by the next open")
    func leftoverCopyIsRemoved() async throws {
        let url = TemporaryDirectory.make().appending(path: "people.loom")
        try await Self.makeV1Store(at: url)
        try await PersistentContainer(name: "people", for: PeopleV2.self, migrationPlan: PeoplePlan.self, location: .file(url)).close()
        // What a kill between the transform's last commit and the copy's removal leaves.
        try await Self.makeV1Store(at: URL(filePath: url.path + "-migration-source"))
        let container = try await PersistentContainer(name: "people", for: PeopleV2.self, migrationPlan: PeoplePlan.self, location: .file(url))
        try await container.close()
        #expect(!FileManager.default.fileExists(atPath: url.path + "-migration-source"))
        let people = try await Self.people(url)
        #expect(people.count == 2_500)
        #expect(people.allSatisfy { !$0.hasPrefix("|") })
    }

    @Test("A chunk that throws leaves the chunks before it committed; the next open resumes after them, and no chunk commits twice")
    func resumesAfterTheLastCommittedChunk() async throws {
        let url = TemporaryDirectory.make().appending(path: "people.loom")
        try await Self.makeV1Store(at: url)
        let keys = try Self.v1Keys(url)
        SplitNames.failAtKey.withLock { $0[url.path] = keys[1_499] }   // in the second chunk
        await #expect(throws: SplitNames.Failure.self) {
            _ = try await PersistentContainer(name: "people", for: PeopleV2.self, migrationPlan: CountingPeoplePlan.self, location: .file(url))
        }
        let state = try SQLiteStore.savedState(at: url)
        #expect(state.metadata["migrationStep"]?.contains("\"cursor\":\(keys[999])") == true, "\(state.metadata)")
        #expect(FileManager.default.fileExists(atPath: url.path + "-migration-source"))
        #expect(try PersistentContainer.requiredMigrationStages(forStoreAt: url, version: PeopleV2.self, migrationPlan: CountingPeoplePlan.self)
            == ["transform Person 1.0.0 → 2.0.0 (resumed after 1.0.0's key \(keys[999]))"])
        SplitNames.failAtKey.withLock { $0[url.path] = nil }
        let container = try await PersistentContainer(name: "people", for: PeopleV2.self, migrationPlan: CountingPeoplePlan.self, location: .file(url))
        try await container.close()
        let seen = SplitNames.seen.withLock { $0[url.path] ?? [:] }
        #expect(seen.count == 2_500)
        #expect(keys[0..<1_000].allSatisfy { seen[$0] == 1 })      // committed once, never again
        #expect(keys[1_000..<2_000].allSatisfy { seen[$0] == 2 })  // the failed chunk, then again
        #expect(keys[2_000..<2_500].allSatisfy { seen[$0] == 1 })
        let people = try await Self.people(url)
        #expect(people.allSatisfy { !$0.hasPrefix("|") })
        #expect(!FileManager.default.fileExists(atPath: url.path + "-migration-source"))
    }
}
