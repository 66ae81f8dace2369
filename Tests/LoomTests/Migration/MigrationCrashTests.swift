import Foundation
import Loom
@_spi(LoomStore) import LoomCore
@_spi(LoomStore) import LoomSQLite
import Testing

/// Migrations killed at random instants, and migrations started by several processes at once:
/// each in child processes (Swift Testing exit tests), as the trap tests do. Serialized: the kill
/// tests' children read one job file.
@Suite("Migrations under kill -9 and concurrent start-up", .serialized, .ownThreads)
struct MigrationCrashTests {
    /// Where a child finds its store and when to kill itself: a file named after the test
    /// process (the parent of the child).
    static func jobFile(parent: Int32, _ kind: String) -> URL {
        FileManager.default.temporaryDirectory.appending(path: "loom-\(kind)-\(parent).job")
    }

    static func copy(_ from: URL, to: URL) throws {
        try? FileManager.default.removeItem(at: to)
        try FileManager.default.copyItem(at: from, to: to)
    }

    static func open(_ url: URL) async throws -> PersistentContainer {
        try await PersistentContainer(name: "shelf", for: ShelfV3.self, migrationPlan: ShelfPlan.self, location: .file(url))
    }

    /// The plans the kill tests migrate with, by the name the job file gives.
    static func open(_ url: URL, plan: String) async throws -> PersistentContainer {
        switch plan {
        case "people": try await PersistentContainer(name: "people", for: PeopleV2.self, migrationPlan: PeoplePlan.self, location: .file(url))
        default: try await open(url)
        }
    }

    @Test("Killed (SIGKILL) at 100 random instants of a two-stage migration: every reopen finds the old version whole or resumes, and ends as an uninterrupted run")
    func killedAtRandomInstants() async throws {
        let template = TemporaryDirectory.make().appending(path: "template.loom")
        try await VersionedMigrationTests.makeV1Store(at: template, count: 10_000)
        let versions: [any VersionedSchema.Type] = [ShelfV1.self, ShelfV2.self, ShelfV3.self]
        try await Self.kill(template: template, plan: "shelf", versions: versions, rounds: 100)
    }

    @Test("Killed (SIGKILL) at 30 random instants of a chunked transform: every reopen resumes after the last committed chunk, and ends as an uninterrupted run")
    func transformKilledAtRandomInstants() async throws {
        let template = TemporaryDirectory.make().appending(path: "template.loom")
        try await TransformMigrationTests.makeV1Store(at: template, people: 10_000)
        try await Self.kill(template: template, plan: "people", versions: [PeopleV1.self, PeopleV2.self], rounds: 30)
    }

    /// Copies `template` and migrates the copy in a child process killed after a random delay,
    /// `rounds` times; after each, checks what the kill left, reopens, and compares the result
    /// with an uninterrupted run's.
    static func kill(template: URL, plan: String, versions: [any VersionedSchema.Type], rounds: Int) async throws {
        let folder = template.deletingLastPathComponent()
        let templateRows = try SQLiteStore.contentDump(at: template)
        let hashes = try versions.map { try Schema(versionedSchema: $0).versionHash }

        // The uninterrupted run, and how long it takes.
        let reference = folder.appending(path: "reference.loom")
        try Self.copy(template, to: reference)
        let start = ContinuousClock.now
        try await Self.open(reference, plan: plan).close()
        let duration = ContinuousClock.now - start
        let expected = try SQLiteStore.contentDump(at: reference)
        let micros = Int(duration.components.seconds * 1_000_000 + duration.components.attoseconds / 1_000_000_000_000)

        var found: [String: Int] = [:]
        var generator = SystemRandomNumberGenerator()
        // Up to 1.3 times the uninterrupted run, which the child also spends starting up. The
        // reference run may have been slowed by suites running beside this one: a kill that
        // finds the migration finished narrows the window to just past its instant, so the
        // kills keep landing inside the migration however long the reference took.
        var window = micros * 13 / 10
        let last = "V\(versions.count)"
        let job = Self.jobFile(parent: getpid(), "kill")
        defer { try? FileManager.default.removeItem(at: job) }
        for round in 0..<rounds {
            let store = folder.appending(path: "store-\(round).loom")
            try Self.copy(template, to: store)
            let delay = Int.random(in: 0...window, using: &generator)
            try "\(store.path)\n\(delay)\n\(plan)".write(to: job, atomically: true, encoding: .utf8)
            await #expect(processExitsWith: .signal(SIGKILL)) {
                let lines = try String(contentsOf: MigrationCrashTests.jobFile(parent: getppid(), "kill"), encoding: .utf8).split(separator: "\n")
                let url = URL(filePath: String(lines[0])), delay = UInt32(lines[1])!
                let killer = Thread {
                    usleep(delay)
                    Foundation.kill(getpid(), SIGKILL)
                }
                killer.start()
                try await MigrationCrashTests.open(url, plan: String(lines[2])).close()
                while true { sleep(10) }   // finished first: wait for the kill
            }
            // What the kill left: one of the versions, never something between.
            let state = try SQLiteStore.savedState(at: store)
            let version = try #require(hashes.firstIndex(of: state.record.versionHash), "round \(round): the store has an unknown schema")
            let step = state.metadata[MigrationPlanRunner.stepKey]
            let label = step.map { step in
                let kind = ["willMigrateDone": "willMigrate done", "didMigratePending": "didMigrate pending", "transforming": "transforming"].first { step.contains($0.key) }?.value
                return "V\(version + 1) + \(kind ?? step)"
            } ?? "V\(version + 1)"
            found[label, default: 0] += 1
            if label == last { window = max(1_000, min(window, delay * 11 / 10)) }
            if version == 0 { #expect(try SQLiteStore.contentDump(at: store) == templateRows, "round \(round): V1 store changed") }
            // Reopened: resumes, and ends as the uninterrupted run did.
            try await Self.open(store, plan: plan).close()
            #expect(try SQLiteStore.contentDump(at: store) == expected, "round \(round) (killed at \(delay) µs, found \(label)) differs from the uninterrupted run")
            #expect(!FileManager.default.fileExists(atPath: store.path + "-migration-source"))
            for suffix in ["", "-wal", "-journal", "-shm", "-migration-lock", "-migration-source"] { try? FileManager.default.removeItem(atPath: store.path + suffix) }
        }
        // The kills landed inside the migration, not only before or after it.
        let inside = found.filter { $0.key != "V1" && $0.key != last }.values.reduce(0, +)
        #expect(inside >= rounds / 20, "kills that landed mid-migration: \(found) (uninterrupted: \(duration), final window \(window) µs)")
        print("kill -9 during the \(plan) migration: uninterrupted run \(duration); states found \(found.sorted { $0.key < $1.key })")
    }

    @Test("Eight processes opening a V1 store with the plan at once: one migrates, each step runs once, the others open the migrated store")
    func concurrentStartUpWithAPlan() async throws {
        let job = Self.jobFile(parent: getpid(), "startup")
        let url = TemporaryDirectory.make().appending(path: "shared.loom")
        try "\(url.path)".write(to: job, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: job) }
        try await VersionedMigrationTests.makeV1Store(at: url, count: 2_000)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    await #expect(processExitsWith: .success) {
                        let path = try String(contentsOf: MigrationCrashTests.jobFile(parent: getppid(), "startup"), encoding: .utf8)
                        let container = try await MigrationCrashTests.open(URL(filePath: path))
                        let counts = try await container.performBackgroundTask { context in
                            (try context.count(for: FetchRequest<ShelfV3.Book>()), try context.count(for: FetchRequest<ShelfV3.Shelf>()))
                        }
                        try await container.close()
                        if counts != (1_800, 1) { exit(3) }
                    }
                }
            }
        }
        let state = try SQLiteStore.savedState(at: url)
        #expect(state.metadata["versionIdentifier"] == "3.0.0")
        #expect(state.metadata[MigrationPlanRunner.stepKey] == nil)
    }
}
