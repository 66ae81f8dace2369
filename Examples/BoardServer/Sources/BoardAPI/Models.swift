import Foundation
import Loom

// The board's object graph:
//
//   Board 1 ─cascade─▶ * Card      (to-many / required to-one)
//   Board 1 ─cascade─▶ * Label     (to-many / required to-one; a label's name is unique on its board)
//   Card  1 ─cascade─▶ * Comment   (to-many / required to-one)
//   Card  * ────────── * Label     (many-to-many)
//
// `revision` is the representation's version, sent as its ETag: Loom keeps a row version of its
// own for optimistic locking, but does not show it to applications, so the server counts its
// edits itself. A request that checked `If-Match` against a revision and lost the race to another
// writer still fails: its context read the row at the older row version, and the save meets
// Loom's version conflict.

/// A board: a named set of cards and of the labels its cards can carry.
@Model final class Board {
    @Attribute(.unique) var name: String
    var revision: Int = 1
    @Relationship(deleteRule: .cascade, inverse: \Card.board) var cards: Set<Card> = []
    @Relationship(deleteRule: .cascade, inverse: \Label.board) var labels: Set<Label> = []

    init(name: String) { self.name = name }
}

/// A card on one board, with its comments and labels.
@Model final class Card {
    var title: String
    var details: String = ""
    var position: Int = 0
    var revision: Int = 1
    var board: Board
    @Relationship(deleteRule: .cascade, inverse: \Comment.card) var comments: Set<Comment> = []
    @Relationship(inverse: \Label.cards) var labels: Set<Label> = []

    init(title: String, board: Board) {
        self.title = title
        self.board = board
    }
}

/// A comment on a card. Comments are written once and deleted with their card.
@Model final class Comment {
    var text: String
    var author: String = "anonymous"
    var created: Date = Date()
    var card: Card

    init(text: String, card: Card) {
        self.text = text
        self.card = card
    }
}

/// A label of a board, which any of the board's cards can carry.
@Model final class Label {
    var name: String
    var color: String = "gray"
    var revision: Int = 1
    var board: Board
    @Relationship(deleteRule: .nullify) var cards: Set<Card> = []
    #Unique<Label>([\.name, \.board])

    init(name: String, board: Board) {
        self.name = name
        self.board = board
    }
}

/// Every model type of the server, for its container.
var boardModels: [any PersistentModel.Type] { [Board.self, Card.self, Comment.self, Label.self] }
