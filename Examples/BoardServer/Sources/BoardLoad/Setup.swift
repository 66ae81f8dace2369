import NIOCore
import NIOHTTP1

/// The boards and cards a run makes before its workers start, and the counter card.
struct Setup: Sendable {
    /// A board made by the setup with its cards, or why not.
    typealias Made = Result<(board: Int64, cards: [CardReply]), LoadError>

    /// The boards, the seeded cards and the counter, as acknowledged.
    var ledger = LoadLedger()
    /// The seeded cards' revisions, by ID.
    var revisions: [Int64: Int] = [:]

    /// Makes the boards (`load-<plan name>-<n>`), their cards, and the counter card on the first
    /// board, through the servers in turn, several at once.
    static func make(_ plan: LoadPlan, client: BoardClient) async throws(LoadError) -> Setup {
        var setup = Setup()
        let first = try await board(0, of: plan, client: client)
        setup.ledger.boards.append(first)
        let counter = try await card(CardBody(title: "counter", details: "", position: 0), on: first, client: client, server: 0)
        setup.ledger.counter = counter.id
        let boards = await withTaskGroup(of: [Made].self) { group in
            // As many boards at once as the run has workers, at most 16.
            let lanes = min(16, max(1, plan.concurrency))
            for lane in 0..<lanes {
                group.addTask {
                    var made: [Made] = []
                    do throws(LoadError) {
                        for index in stride(from: lane, to: plan.boards, by: lanes) {
                            let board = index == 0 ? first : try await board(index, of: plan, client: client)
                            var cards: [CardReply] = []
                            for position in 0..<plan.cardsPerBoard {
                                let body = CardBody(title: "b\(index)-c\(position)", details: "seeded", position: position + 1)
                                cards.append(try await card(body, on: board, client: client, server: index + position))
                            }
                            made.append(.success((board, cards)))
                        }
                    } catch {
                        return [.failure(error)]
                    }
                    return made
                }
            }
            var all: [Made] = []
            for await results in group { all += results }
            return all
        }
        for made in boards {
            let (board, cards) = try made.get()
            if board != first { setup.ledger.boards.append(board) }
            for card in cards {
                setup.ledger.cards[card.id] = LoadLedger.Card(id: card.id, board: card.board, title: card.title, details: card.details)
                setup.revisions[card.id] = card.revision
            }
        }
        return setup
    }

    /// The seeded cards worker `index` of `count` changes: every `count`-th, so that no two
    /// workers change one card (each knows its cards' ETags without reading them).
    func owned(by index: Int, of count: Int) -> [(card: LoadLedger.Card, revision: Int)] {
        revisions.keys.sorted().enumerated().compactMap { offset, id in
            guard offset % count == index, let card = ledger.cards[id], let revision = revisions[id] else { return nil }
            return (card, revision)
        }
    }

    private static func board(_ index: Int, of plan: LoadPlan, client: BoardClient) async throws(LoadError) -> Int64 {
        let reply = try await answer(.POST, "/boards", BoardBody(name: "load-\(plan.name)-\(index)"), client: client, server: index)
        guard let board = reply.decode(BoardReply.self) else { throw LoadError("Setting up: POST /boards answered what is not a board.") }
        return board.id
    }

    private static func card(_ body: CardBody, on board: Int64, client: BoardClient, server: Int) async throws(LoadError) -> CardReply {
        let reply = try await answer(.POST, "/boards/\(board)/cards", body, client: client, server: server)
        guard let card = reply.decode(CardReply.self) else { throw LoadError("Setting up: POST /boards/\(board)/cards answered what is not a card.") }
        return card
    }

    /// The reply to a setup request, which must be 201.
    private static func answer(_ method: HTTPMethod, _ path: String, _ body: some Encodable & Sendable, client: BoardClient, server: Int) async throws(LoadError) -> BoardClient.Reply {
        let reply: BoardClient.Reply
        do {
            reply = try await client.send(method, path, to: server, body: body)
        } catch {
            throw LoadError("Setting up: \(method.rawValue) \(path) to \(client.servers[server % client.servers.count]) got no answer (\(error.summary)).")
        }
        guard reply.status == 201 else {
            throw LoadError("Setting up: \(method.rawValue) \(path) answered \(reply.status): \(String(buffer: reply.body).prefix(300))")
        }
        return reply
    }
}
