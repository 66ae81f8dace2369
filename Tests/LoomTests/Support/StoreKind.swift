import Foundation
import Loom

/// The stores every store-independent test runs on.
enum StoreKind: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case inMemory
    case sqlite
    case postgres

    /// Every store, PostgreSQL included whether or not a test server is there: without one, each
    /// PostgreSQL case stops at its first store with a warning that says why
    /// (``PostgresServer/requireServer()``), so that the run's summary counts what it skipped.
    static var allCases: [StoreKind] { [.inMemory, .sqlite, .postgres] }

    /// The stores that outlive their instance (several instances on one storage).
    static var persistentCases: [StoreKind] { allCases.filter { $0 != .inMemory } }

    /// The stores a test can open now, for a test that goes through several stores in one case
    /// (a case cannot be skipped for one store only).
    static var availableCases: [StoreKind] { PostgresServer.isEnabled ? allCases : [.inMemory, .sqlite] }

    var testDescription: String { rawValue }

    /// A fresh, empty container of this kind for the test models.
    func makeContainer(_ types: any PersistentModel.Type... ) throws -> PersistentContainer {
        try makeContainer(models: types)
    }

    /// A fresh, empty container of this kind for `models` (the test models when empty).
    func makeContainer(models types: [any PersistentModel.Type]) throws -> PersistentContainer {
        let schema = try Schema(types.isEmpty ? [Book.self, Shelf.self, Sample.self, Tally.self] : types)
        switch self {
        case .inMemory:
            return PersistentContainer(store: InMemoryStore(schema: schema))
        case .sqlite:
            return PersistentContainer(store: try SQLiteStore(url: TemporaryDirectory.make().appending(path: "test.loom"), schema: schema))
        case .postgres:
            return PersistentContainer(store: try PostgresServer.makeStore(schema))
        }
    }
}

enum TemporaryDirectory {
    /// A new empty folder under the system's temporary directory.
    static func make() -> URL {
        let url = FileManager.default.temporaryDirectory.appending(path: "loom-tests-\(UUID().uuidString)")
        try! FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }
}

import Testing
