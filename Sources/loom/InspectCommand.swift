import ArgumentParser
import Foundation
import Loom
@_spi(LoomStore) import LoomCore   // the saved state, without a model
import LoomTools
@_spi(LoomStore) import LoomSQLite   // the saved version and migration step

/// `loom inspect PATH`: prints the schema saved in a store and how many objects each entity has,
/// without the model it was made with.
struct InspectCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "inspect",
        abstract: "Show the schema and object counts of a Loom store.",
        discussion: """
            Reads the schema the store saved, so it needs no model. Examples:

              loom inspect /tmp/demo.loom
              loom inspect --json /tmp/demo.loom | jq '.entities[] | {name, count}'
              loom inspect 'postgres://app@localhost:5432/db?schema=library'

            --json prints one object: {"store", "versionHash", "modelVersion" (absent when not \
            versioned), "migrationStep" (absent unless a migration is in progress), "entities": \
            [{"name", "count", "attributes": [{"name", "type", "optional", "unique"}], \
            "relationships": [{"name", "kind" (toOne, toMany or orderedToMany), "destination", \
            "inverse", "deleteRule", "optional"}], "uniqueTogether": [[attribute names]], and for \
            an entity in a hierarchy "superentity", "abstract", "subentities" and \
            "uniqueAcrossHierarchy": [{"declaredOn", "attributes"}]}]}.
            """)

    @Argument(help: "The store file, or a PostgreSQL URL (postgres://user@host:port/db?schema=name).")
    var path: String

    @Flag(help: "Print JSON (its shape is in the discussion above) instead of text.")
    var json = false

    /// What `--json` prints.
    struct Report: Encodable {
        struct Attribute: Encodable { var name: String, type: String, optional: Bool, unique: Bool }
        struct Relationship: Encodable { var name: String, kind: String, destination: String, inverse: String, deleteRule: String, optional: Bool }
        struct Entity: Encodable {
            var name: String
            var count: Int
            var attributes: [Attribute]
            var relationships: [Relationship]
            var uniqueTogether: [[String]]
            /// Only for an entity in a hierarchy, so that other reports read as before.
            var superentity: String?
            var abstract: Bool?
            var subentities: [String]?
            /// The uniqueness constraints declared on an entity with sub-entities that cover
            /// this one (they hold across all of them).
            var uniqueAcrossHierarchy: [Across]?
        }
        struct Across: Encodable { var declaredOn: String, attributes: [String] }
        var store: String
        var versionHash: String
        var modelVersion: String?
        var migrationStep: String?
        var entities: [Entity]
    }

    func run() throws {
        // Read-only: the saved schema and state, then counts through one read-only connection.
        let state: (record: SchemaRecord, metadata: [String: String])
        if PostgreSQLLocation.isURL(path) {
            state = try PostgreSQLLocation.savedState(path)
        } else {
            let saved = try SQLiteStore.savedState(at: URL(filePath: path))
            state = (saved.record, saved.metadata)
        }
        let store = try ReadOnlyStore(location: path)
        let schema = store.schema
        var report = Report(
            store: CredentialRedaction.redacting(path), versionHash: schema.versionHash,
            // Saved when the store was opened with a versioned schema.
            modelVersion: state.metadata[MigrationPlanRunner.versionKey],
            migrationStep: state.metadata[MigrationPlanRunner.stepKey], entities: [])
        for entity in schema.entities {
            report.entities.append(Report.Entity(
                name: entity.name, count: try store.count(of: entity),
                attributes: entity.attributes.map { Report.Attribute(name: $0.name, type: $0.type.rawValue, optional: $0.isOptional, unique: $0.isUnique) },
                relationships: schema.relationships(of: entity).map { relationship in
                    let d = relationship.description
                    return Report.Relationship(
                        name: d.name, kind: "\(d.kind)", destination: relationship.destination.name, inverse: relationship.inverse.name,
                        deleteRule: d.deleteRule.rawValue, optional: d.isOptional)
                },
                uniqueTogether: entity.uniquenessConstraints.filter { $0.count > 1 },
                superentity: entity.superentity?.name, abstract: entity.isAbstract ? true : nil,
                subentities: schema.subentities(of: entity).isEmpty ? nil : schema.subentities(of: entity).map(\.name),
                uniqueAcrossHierarchy: Self.across(entity, schema)))
        }
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            print(String(decoding: try encoder.encode(report), as: UTF8.self))
        } else {
            print(Self.text(report))
        }
    }

    /// The hierarchy constraints that cover `entity`; `nil` for none.
    private static func across(_ entity: EntityDescription, _ schema: Schema) -> [Report.Across]? {
        let covering = schema.hierarchyConstraints.filter { $0.owner === entity || $0.members.contains { $0 === entity } }
        return covering.isEmpty ? nil : covering.map { Report.Across(declaredOn: $0.owner.name, attributes: $0.attributes) }
    }

    /// The report as text.
    static func text(_ report: Report) -> String {
        var lines = ["Store \(report.store)", "Schema version hash \(report.versionHash)",
                     "Model version \(report.modelVersion ?? "(not versioned)")"]
        if let step = report.migrationStep { lines.append("Migration in progress, resumed at the next open: \(step)") }
        for entity in report.entities {
            lines.append("\n\(entity.name): \(entity.count) objects")
            var hierarchy: [String] = []
            if entity.abstract == true { hierarchy.append("abstract") }
            if let parent = entity.superentity { hierarchy.append("inherits from \(parent)") }
            if let children = entity.subentities { hierarchy.append("sub-entities \(children.joined(separator: ", "))") }
            if !hierarchy.isEmpty { lines.append("  (\(hierarchy.joined(separator: "; ")))") }
            for a in entity.attributes {
                lines.append("  \(a.name): \(a.type)\(a.optional ? "?" : "")\(a.unique ? " unique" : "")")
            }
            for r in entity.relationships {
                let type = switch r.kind {
                case "toOne": r.optional ? "\(r.destination)?" : r.destination
                case "toMany": "Set<\(r.destination)>"
                default: "[\(r.destination)]"
                }
                lines.append("  \(r.name): \(type), inverse \(r.destination).\(r.inverse), delete rule \(r.deleteRule)")
            }
            for constraint in entity.uniqueTogether { lines.append("  unique together: \(constraint.joined(separator: ", "))") }
            for across in entity.uniqueAcrossHierarchy ?? [] {
                lines.append("  unique across \(across.declaredOn) and its sub-entities: \(across.attributes.joined(separator: ", "))")
            }
        }
        return lines.joined(separator: "\n")
    }
}
