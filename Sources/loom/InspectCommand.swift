import ArgumentParser
import Foundation
import Loom
@_spi(LoomStore) import LoomCore   // counts rows through the store, without a model
@_spi(LoomStore) import LoomSQLite   // the saved version and migration step
@_spi(LoomStore) import LoomPostgreSQL

/// `loom inspect PATH`: prints the schema saved in a store and how many objects each entity has,
/// without the model it was made with.
struct InspectCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "inspect",
        abstract: "Show the schema and object counts of a Loom store.")

    @Argument(help: "The store file, or a PostgreSQL URL (postgres://user@host:port/db?schema=name).")
    var path: String

    func run() throws {
        let state: (record: SchemaRecord, metadata: [String: String])
        let open: (Schema) throws -> any PersistentStore
        if path.hasPrefix("postgres://") || path.hasPrefix("postgresql://") {
            let configuration = try PostgreSQLStore.Configuration(url: path)
            state = try PostgreSQLStore.savedState(configuration: configuration)
            open = { try PostgreSQLStore(configuration: configuration, schema: $0) }
        } else {
            let url = URL(filePath: path)
            let saved = try SQLiteStore.savedState(at: url)
            state = (saved.record, saved.metadata)
            open = { try SQLiteStore(url: url, schema: $0) }
        }
        let schema = try Schema(record: state.record)
        print("Store \(path)\nSchema version hash \(schema.versionHash)")
        // Saved when the store was opened with a versioned schema.
        print("Model version \(state.metadata[MigrationPlanRunner.versionKey] ?? "(not versioned)")")
        if let step = state.metadata[MigrationPlanRunner.stepKey] {
            print("Migration in progress, resumed at the next open: \(step)")
        }
        let store = try open(schema)
        defer { try? store.close() }
        for entity in schema.entities {
            let count = try store.count(StoreQuery(entity: entity))
            print("\n\(entity.name): \(count) objects")
            for attribute in entity.attributes {
                print("  \(attribute.name): \(attribute.type.rawValue)\(attribute.isOptional ? "?" : "")\(attribute.isUnique ? " unique" : "")")
            }
            for relationship in schema.relationships(of: entity) {
                let d = relationship.description
                let kind = switch d.kind {
                case .toOne: d.isOptional ? "\(relationship.destination.name)?" : relationship.destination.name
                case .toMany: "Set<\(relationship.destination.name)>"
                case .orderedToMany: "[\(relationship.destination.name)]"
                }
                print("  \(d.name): \(kind), inverse \(relationship.destination.name).\(relationship.inverse.name), delete rule \(d.deleteRule.rawValue)")
            }
            for constraint in entity.uniquenessConstraints where constraint.count > 1 {
                print("  unique together: \(constraint.joined(separator: ", "))")
            }
        }
    }
}
