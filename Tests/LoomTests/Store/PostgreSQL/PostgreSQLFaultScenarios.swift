import Foundation
import Loom
@_spi(LoomStore) import LoomCore
import LoomPostgreSQL
import Testing

/// An operation whose sessions ``PostgreSQLConnectionFaultTests`` ends at a random moment: how
/// its store is seeded, how a run begins (on the container under test, before any fault), and
/// how the store's content is compared.
struct PGFaultScenario: Sendable, CustomTestStringConvertible, CustomStringConvertible {
    let name: String
    /// A short name for the run's schema.
    let tag: String
    /// Fills the new store in the configuration's schema (on sessions of its own name).
    let seed: @Sendable (PostgreSQLStore.Configuration) async throws -> Void
    /// Opens what the operation needs with the configuration of the container under test.
    let begin: @MainActor @Sendable (PostgreSQLStore.Configuration) async throws -> FaultAttempt
    /// What the store holds, as the runs compare it.
    let contents: @MainActor @Sendable (PostgreSQLStore.Configuration, BackendTerminator) async throws -> [String]
    var afterFailure = FaultScenario.AfterFailure.unchanged
    var tellsOtherContexts = true

    var description: String { name }
    var testDescription: String { name }

    /// Every scenario, or those `LOOM_PG_FAULT_SCENARIOS` names (comma-separated).
    static var all: [PGFaultScenario] {
        let every = [save, batchInsert, batchUpdate, batchDelete, fetch, faulting, lightweightMigration, transformStage]
        guard let names = ProcessInfo.processInfo.environment["LOOM_PG_FAULT_SCENARIOS"]?.split(separator: ",").map(String.init) else { return every }
        return every.filter { names.contains($0.name) }
    }

    /// The SQLite fault loops' save (``FaultScenario/changeLibrary(_:)``) on the view context.
    static let save = library("save", tag: "save") { context in
        try FaultScenario.changeLibrary(context)
        return { try context.save() }
    } discard: { $0.rollback() }

    /// The SQLite fault loops' uniqued batch insert.
    static let batchInsert = library("batch insert", tag: "binsert") { context in
        let request = FaultScenario.bulkAuthors
        return { _ = try context.execute(request) }
    }

    static let batchUpdate = library("batch update", tag: "bupdate") { context in
        let request = BatchUpdateRequest<Novel>(predicate: #Predicate { $0.pages < 300 }, set: [.set(\.pages, to: 300), .set(\.year, to: 2026)])
        return { _ = try context.execute(request) }
    }

    /// A batch delete whose delete rules cascade and nullify.
    static let batchDelete = library("batch delete with cascade", tag: "bdelete") { context in
        let request = BatchDeleteRequest<Author>(predicate: #Predicate<Author> { $0.name == "Ann" })
        return { _ = try context.execute(request) }
    }

    /// A fetch with a predicate and a sort whose results' authors fault in; it must answer as
    /// before the fault or throw.
    static let fetch = library("fetch", tag: "fetch", tellsOtherContexts: false) { context in
        let request = FetchRequest<Novel>(predicate: #Predicate { $0.pages > 150 }, sortBy: [SortDescriptor(\.title)])
        let read = { () throws -> [String] in
            context.reset()
            let lines = try context.fetch(request).map { "\($0.title) \($0.pages) \($0.author?.name ?? "-") \($0.chapters.map(\.title))" }
            if let error = context.pendingStoreError { throw error }
            return lines
        }
        let expected = try read()
        return { if try read() != expected { throw WrongAnswer() } }
    }

    /// Faults of every novel fulfilled, with their to-one and to-many relationships.
    static let faulting = library("faulting", tag: "fault", tellsOtherContexts: false) { context in
        let ids = try context.fetch(FetchRequest<Novel>(sortBy: [SortDescriptor(\.title)])).map(\.objectID)
        let read = { () throws -> [String] in
            context.reset()
            var lines: [String] = []
            for id in ids {
                let novel = try context.object(with: id)
                try context.fulfillFault(of: novel)
                lines.append("\(novel.title) \(novel.author?.name ?? "-") \(novel.chapters.map(\.title)) \(novel.tags.map(\.name).sorted()) \(novel.reviews.map(\.text).sorted())")
            }
            if let error = context.pendingStoreError { throw error }
            return lines
        }
        let expected = try read()
        return { if try read() != expected { throw WrongAnswer() } }
    }

    /// An inferred migration that rebuilds a table, made by the open of the store.
    static let lightweightMigration = PGFaultScenario(
        name: "lightweight migration", tag: "light", seed: seedPeople,
        begin: { configuration in
            let opened = OpenedContainers()
            let open: @MainActor @Sendable () async throws -> Void = {
                opened.list.append(PersistentContainer(store: try PostgreSQLStore(configuration: configuration, schema: try Schema(versionedSchema: WiderPeople.self))))
            }
            return FaultAttempt(operation: open, retry: open, end: { for container in opened.list { try await container.close() } })
        },
        contents: tables, afterFailure: .unchangedOrWhole, tellsOtherContexts: false)

    /// A transform stage of three chunks, each committed: a fault may leave whole steps done,
    /// which the next open resumes from.
    static let transformStage = PGFaultScenario(
        name: "transform stage in chunks", tag: "transform", seed: seedPeople,
        begin: { configuration in
            let opened = OpenedContainers()
            let open: @MainActor @Sendable () async throws -> Void = {
                opened.list.append(try await PersistentContainer(for: PeopleV2.self, migrationPlan: ChunkedPeoplePlan.self, postgres: configuration))
            }
            return FaultAttempt(operation: open, retry: open, end: { for container in opened.list { try await container.close() } })
        },
        contents: tables, afterFailure: .committedSteps, tellsOtherContexts: false)

    // MARK: Seeds and contents

    /// A scenario on the SQLite fault loops' library: `prepare` makes the changes on the view
    /// context and returns the operation, run again as the retry.
    static func library(
        _ name: String, tag: String, tellsOtherContexts: Bool = true,
        prepare: @escaping @MainActor @Sendable (ManagedObjectContext) throws -> @MainActor () throws -> Void,
        discard: @escaping @MainActor @Sendable (ManagedObjectContext) -> Void = { _ in }
    ) -> PGFaultScenario {
        PGFaultScenario(
            name: name, tag: tag,
            seed: { configuration in
                try await FaultScenario.seedLibrary(in: PersistentContainer(store: try PostgreSQLStore(configuration: configuration, schema: try Schema(StoreKind.graphTypes))))
            },
            begin: { configuration in
                let container = PersistentContainer(store: try PostgreSQLStore(configuration: configuration, schema: try Schema(StoreKind.graphTypes)))
                let told = try await FaultScenario.observer(of: container)
                let context = container.viewContext
                let operation = try prepare(context)
                return FaultAttempt(operation: operation, retry: operation, end: { try await container.close() }, told: told, discard: { discard(context) })
            },
            contents: libraryContents, tellsOtherContexts: tellsOtherContexts)
    }

    /// The library's objects by name (read by a container of its own), and the history's rows.
    @MainActor static func libraryContents(_ configuration: PostgreSQLStore.Configuration, _ admin: BackendTerminator) async throws -> [String] {
        var reading = configuration
        reading.applicationName = "loom-check"
        let container = PersistentContainer(store: try PostgreSQLStore(configuration: reading, schema: try Schema(StoreKind.graphTypes)))
        let lines = try await container.performBackgroundTask { try FaultScenario.libraryLines($0) }
        try await container.close()
        return lines + (try admin.contents(ofSchema: configuration.schemaName).filter { $0.hasPrefix("history ") })
    }

    /// Thirty people and three notes in a version 1.0.0 store.
    @Sendable static func seedPeople(_ configuration: PostgreSQLStore.Configuration) async throws {
        try await TransformMigrationTests.fillV1(try await PersistentContainer(for: PeopleV1.self, postgres: configuration), people: 30)
    }

    /// Every table's rows without keys, the metadata and the history, read without a model.
    @MainActor static func tables(_ configuration: PostgreSQLStore.Configuration, _ admin: BackendTerminator) async throws -> [String] {
        try admin.contents(ofSchema: configuration.schemaName)
    }
}

/// A read that answered differently from the clean run.
struct WrongAnswer: Error, CustomStringConvertible {
    var description: String { "the read answered differently from before the fault" }
}
