import Foundation
import Hummingbird
import Loom

extension BoardAPI {
    /// A card, and the comments on it.
    func addCardRoutes(to router: Router<BasicRequestContext>) {
        router.get("cards/:id") { _, context in try await get(Card.self, context) }
        router.patch("cards/:id") { request, context in
            try await patch(Card.self, with: CardInput.self, request, context) { input, card, context in
                try card.apply(input, in: context)
            }
        }
        router.delete("cards/:id") { request, context in try await delete(Card.self, request, context) }

        router.get("cards/:id/comments") { _, context in
            let id = try id(of: Card.self, context)
            let comments = try await container.performBackgroundTask { context in
                try context.existingObject(with: id).comments.map(\.json).sorted { ($0.created, $0.id) < ($1.created, $1.id) }
            }
            return try HTTPExchange.json(comments)
        }
        router.post("cards/:id/comments") { request, context in
            let id = try id(of: Card.self, context)
            let input = try await HTTPExchange.decode(CommentInput.self, from: request)
            let comment = try await container.performBackgroundTask { context in
                let card = try context.existingObject(with: id)
                let comment = Comment(context: context)
                comment.card = card
                if let text = input.text { comment.text = try Validation.text(text, field: "text", of: "Comment") }
                if let author = input.author { comment.author = try Validation.text(author, field: "author", of: "Comment") }
                try context.save()
                return comment.json
            }
            return try HTTPExchange.json(comment, status: .created, location: "/cards/\(id.primaryKey)/comments")
        }
    }
}

extension Card {
    /// Sets what `input` holds; a field it lacks keeps its value. `labels` replaces the card's
    /// labels, each of which must be a label of the card's board.
    func apply(_ input: CardInput, in context: ManagedObjectContext) throws {
        if let title = input.title { self.title = try Validation.text(title, field: "title", of: "Card") }
        if let details = input.details { self.details = details }
        if let position = input.position { self.position = position }
        guard let keys = input.labels else { return }
        var labels = Set<Label>()
        for key in keys {
            let label = try Self.label(key, in: context)
            guard label.board == board else {
                throw HTTPError(.unprocessableContent, message: "Card.labels names \(Label.named(key)), which belongs to another board than the card's.")
            }
            labels.insert(label)
        }
        if labels != self.labels { self.labels = labels }
    }

    /// The label whose key is `key`; 422 when there is none (the body names it, not the URL).
    private static func label(_ key: Int64, in context: ManagedObjectContext) throws -> Label {
        // A `Result`, not `do`/`catch`: Swift 6.3.1's compiler crashes (MandatoryAllocBoxToStack)
        // on a `catch` of this typed-throws call that throws another error.
        switch Result(catching: { () throws(LoomError) in try context.existingObject(with: context.coordinator.objectID(of: Label.self, key: key)) }) {
        case .success(let label):
            return label
        case .failure(let error) where error.code == .objectNotFound:
            throw HTTPError(.unprocessableContent, message: "Card.labels names \(Label.named(key)), which does not exist.")
        case .failure(let error):
            throw error
        }
    }
}
