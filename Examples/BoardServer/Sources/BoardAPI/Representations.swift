import Foundation

// What the API sends and receives. Responses are built inside a request's context from its
// objects and leave it as these `Sendable` values; bodies arrive as these and are applied there.
// Every field of a request body is optional: a field left out of a PATCH keeps its value, and
// one left out of a POST is left unset, so that Loom's save says which required value is missing.

struct BoardJSON: Codable, Equatable, Sendable {
    var id: Int64
    var name: String
    var revision: Int
}

struct CardJSON: Codable, Equatable, Sendable {
    var id: Int64
    var board: Int64
    var title: String
    var details: String
    var position: Int
    var labels: [Int64]
    var revision: Int
}

struct CommentJSON: Codable, Equatable, Sendable {
    var id: Int64
    var card: Int64
    var author: String
    var text: String
    var created: Date
}

struct LabelJSON: Codable, Equatable, Sendable {
    var id: Int64
    var board: Int64
    var name: String
    var color: String
    var revision: Int
}

struct BoardInput: Decodable, Sendable {
    var name: String?
}

struct CardInput: Decodable, Sendable {
    var title: String?
    var details: String?
    var position: Int?
    /// The IDs of the labels the card carries, replacing those it had.
    var labels: [Int64]?
}

struct CommentInput: Decodable, Sendable {
    var text: String?
    var author: String?
}

struct LabelInput: Decodable, Sendable {
    var name: String?
    var color: String?
}

extension Board {
    var json: BoardJSON { BoardJSON(id: objectID.primaryKey, name: name, revision: revision) }
}

extension Card {
    var json: CardJSON {
        CardJSON(
            id: objectID.primaryKey, board: board.objectID.primaryKey, title: title, details: details,
            position: position, labels: labels.map(\.objectID.primaryKey).sorted(), revision: revision)
    }
}

extension Comment {
    var json: CommentJSON {
        CommentJSON(id: objectID.primaryKey, card: card.objectID.primaryKey, author: author, text: text, created: created)
    }
}

extension Label {
    var json: LabelJSON {
        LabelJSON(id: objectID.primaryKey, board: board.objectID.primaryKey, name: name, color: color, revision: revision)
    }
}
