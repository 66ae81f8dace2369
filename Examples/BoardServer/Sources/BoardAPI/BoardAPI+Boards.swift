import Foundation
import Hummingbird
import Loom

extension BoardAPI {
    /// `/boards`, a board, and the cards and labels made on it.
    func addBoardRoutes(to router: Router<BasicRequestContext>) {
        router.get("boards") { _, _ in
            let boards = try await container.performBackgroundTask { context in
                try context.fetch(FetchRequest<Board>(sortBy: [SortDescriptor(\.name)])).map(\.json)
            }
            return try HTTPExchange.json(boards)
        }
        router.post("boards") { request, _ in
            let input = try await HTTPExchange.decode(BoardInput.self, from: request)
            let board = try await container.performBackgroundTask { context in
                let board = Board(context: context)
                try board.apply(input)
                try context.save()
                return board.json
            }
            return try HTTPExchange.json(board, status: .created, revision: board.revision, location: "/boards/\(board.id)")
        }
        router.get("boards/:id") { _, context in try await get(Board.self, context) }
        router.patch("boards/:id") { request, context in
            try await patch(Board.self, with: BoardInput.self, request, context) { input, board, _ in try board.apply(input) }
        }
        router.delete("boards/:id") { request, context in try await delete(Board.self, request, context) }

        router.get("boards/:id/cards") { _, context in
            let id = try id(of: Board.self, context)
            let cards = try await container.performBackgroundTask { context in
                _ = try context.existingObject(with: id)          // 404 for a board that is not there
                // The cards and their labels in two queries: each card's labels faulted one by
                // one would be a query per card, a round trip each on PostgreSQL.
                var request = FetchRequest<Card>(predicate: #Predicate { $0.board.objectID == id })
                request.relationshipKeyPathsForPrefetching = [\.labels]
                return try context.fetch(request).map(\.json).sorted { ($0.position, $0.id) < ($1.position, $1.id) }
            }
            return try HTTPExchange.json(cards)
        }
        router.post("boards/:id/cards") { request, context in
            let id = try id(of: Board.self, context)
            let input = try await HTTPExchange.decode(CardInput.self, from: request)
            let card = try await container.performBackgroundTask { context in
                let board = try context.existingObject(with: id)
                let card = Card(context: context)
                card.board = board
                try card.apply(input, in: context)
                try context.save()
                return card.json
            }
            return try HTTPExchange.json(card, status: .created, revision: card.revision, location: "/cards/\(card.id)")
        }

        router.get("boards/:id/labels") { _, context in
            let id = try id(of: Board.self, context)
            let labels = try await container.performBackgroundTask { context in
                try context.existingObject(with: id).labels.map(\.json).sorted { ($0.name, $0.id) < ($1.name, $1.id) }
            }
            return try HTTPExchange.json(labels)
        }
        router.post("boards/:id/labels") { request, context in
            let id = try id(of: Board.self, context)
            let input = try await HTTPExchange.decode(LabelInput.self, from: request)
            let label = try await container.performBackgroundTask { context in
                let board = try context.existingObject(with: id)
                let label = Label(context: context)
                label.board = board
                try label.apply(input)
                try context.save()
                return label.json
            }
            return try HTTPExchange.json(label, status: .created, revision: label.revision, location: "/labels/\(label.id)")
        }
    }
}

extension Board {
    /// Sets what `input` holds; a field it lacks keeps its value (a new board's stays unset, and
    /// Loom's save says it is required).
    func apply(_ input: BoardInput) throws {
        if let name = input.name { self.name = try Validation.text(name, field: "name", of: "Board") }
    }
}
