import Foundation
import Loom

// What the live stream of a board's cards sends (`GET /boards/:id/cards/events`): Loom's live
// query results, with the cards the client needs to show them. Items are positions in sections,
// as Loom's `ResultChanges` gives them; the board's cards form one section (without a `key`), but the
// form is the sectioned one, so that a client applies any live query's changes the same way:
//
//   1. remove `deleted` and the `from` of `moved` (old positions), last first;
//   2. remove `deletedSections` (old indexes), last first; insert `insertedSections` (new
//      indexes), first first, empty;
//   3. insert `inserted` and the `to` of `moved` (new positions), first first;
//   4. replace the cards of `updated` (new positions).

/// A position in a sectioned result: the section's index and the item's index in it.
struct PositionJSON: Codable, Hashable, Sendable {
    var section: Int
    var item: Int

    init(_ position: ResultPosition) {
        section = position.section
        item = position.item
    }

    init(section: Int, item: Int) {
        self.section = section
        self.item = item
    }
}

/// A section of a result: its key (left out for a query without sections) and its cards.
struct CardSectionJSON: Codable, Equatable, Sendable {
    var key: String?
    var cards: [CardJSON]
}

/// The first event of a stream (`event: results`): the whole result.
struct CardResultsJSON: Codable, Equatable, Sendable {
    var sections: [CardSectionJSON]
}

/// A later event (`event: changes`): what turns the result before into the new one, with the
/// cards that came, moved or changed, as they are now.
struct CardChangesJSON: Codable, Equatable, Sendable {
    struct Insertion: Codable, Equatable, Sendable {
        var at: PositionJSON
        var card: CardJSON
    }

    struct Move: Codable, Equatable, Sendable {
        var from: PositionJSON
        var to: PositionJSON
        var card: CardJSON
    }

    struct Update: Codable, Equatable, Sendable {
        var at: PositionJSON
        /// The names of the properties that changed, sorted.
        var properties: [String]
        var card: CardJSON
    }

    struct InsertedSection: Codable, Equatable, Sendable {
        var index: Int
        var key: String?
    }

    var deletedSections: [Int]
    var insertedSections: [InsertedSection]
    var deleted: [PositionJSON]
    var inserted: [Insertion]
    var moved: [Move]
    var updated: [Update]
}

/// One event of the stream, made on the live query's context from one of its results.
enum CardStreamEvent: Sendable, Equatable {
    case results(CardResultsJSON)
    case changes(CardChangesJSON)

    /// The event for `results`: the whole result for the first one, else its changes, with the
    /// cards read in `context` (the live query's, on its isolation, so that they are the state
    /// the result was made from).
    init(_ results: LiveResults<Card, NoSection>, in context: ManagedObjectContext) throws(LoomError) {
        func card(at position: ResultPosition) throws(LoomError) -> CardJSON {
            try context.existingObject(with: results[position]).json
        }
        guard let changes = results.changes else {
            var sections: [CardSectionJSON] = []
            for section in results.sections {
                var cards: [CardJSON] = []
                for id in section.items { cards.append(try context.existingObject(with: id).json) }
                sections.append(CardSectionJSON(key: nil, cards: cards))
            }
            self = .results(CardResultsJSON(sections: sections))
            return
        }
        var json = CardChangesJSON(
            deletedSections: changes.deletedSections,
            insertedSections: changes.insertedSections.map { CardChangesJSON.InsertedSection(index: $0, key: nil) },
            deleted: changes.deletedItems.map(PositionJSON.init), inserted: [], moved: [], updated: [])
        for position in changes.insertedItems {
            json.inserted.append(.init(at: PositionJSON(position), card: try card(at: position)))
        }
        for move in changes.movedItems {
            json.moved.append(.init(from: PositionJSON(move.from), to: PositionJSON(move.to), card: try card(at: move.to)))
        }
        for update in changes.updatedItems {
            json.updated.append(.init(at: PositionJSON(update.at), properties: update.properties.sorted(), card: try card(at: update.at)))
        }
        self = .changes(json)
    }

    /// The event's name in the stream.
    var name: String {
        switch self {
        case .results: "results"
        case .changes: "changes"
        }
    }

    /// The event as Server-Sent Events text: its ID, its name, its JSON on one `data:` line.
    func text(id: Int) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let data: Data
        switch self {
        case .results(let results): data = try encoder.encode(results)
        case .changes(let changes): data = try encoder.encode(changes)
        }
        // JSONEncoder escapes line breaks inside strings, so the JSON is one line.
        return "id: \(id)\nevent: \(name)\ndata: \(String(decoding: data, as: UTF8.self))\n\n"
    }
}
