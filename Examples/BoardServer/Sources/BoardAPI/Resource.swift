import Foundation
import Hummingbird
import Loom

/// A model the API serves at `/<path>/:id`, with a representation and a revision sent as its ETag.
protocol Resource: PersistentModel, SendableMetatype {
    associatedtype JSON: Encodable & Equatable & Sendable
    /// The representation a GET answers with.
    var json: JSON { get }
    /// Counts the edits of the representation: its ETag.
    var revision: Int { get set }
}

extension Board: Resource {}
extension Card: Resource {}
extension Label: Resource {}

extension PersistentModel {
    /// "Card 12": how messages name an object to an API client, by the ID in its URLs.
    static func named(_ key: Int64) -> String { "\(entity.name) \(key)" }
}

/// Checks that the API's own rules hold, beyond what the model requires.
///
/// Loom checks what the model says (required values, uniqueness, delete rules) at save; rules of
/// the application's own are checked here, before the changes are made, and fail the same way:
/// 422 with a sentence that names the field.
enum Validation {
    /// A name or title: not empty, at most 200 characters.
    static func text(_ value: String, field: String, of entity: String) throws -> String {
        let trimmed = value.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty else {
            throw HTTPError(.unprocessableContent, message: "\(entity).\(field) must not be empty.")
        }
        guard trimmed.count <= 200 else {
            throw HTTPError(.unprocessableContent, message: "\(entity).\(field) must be at most 200 characters, not \(trimmed.count).")
        }
        return trimmed
    }
}

extension PersistentStoreCoordinator {
    /// The ID of this store's object of `type` whose key is `key`: the ID in the object's URLs.
    func objectID<Model: PersistentModel>(of type: Model.Type, key: Int64) -> ObjectID<Model> {
        // `ObjectID.init?` fails only for another entity's name, and this is the model's own.
        ObjectID<Model>(AnyObjectID(storeIdentifier: storeIdentifier, entityName: Model.entity.name, primaryKey: key))!
    }
}
