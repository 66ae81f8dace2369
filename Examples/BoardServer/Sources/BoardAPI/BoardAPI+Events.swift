import Foundation
import Hummingbird
import Loom
import ServiceLifecycle

extension BoardAPI {
    /// `GET /boards/:id/cards/events`: the board's cards as Server-Sent Events, from a Loom live
    /// query; `GET /health/streams`: how many such streams are open.
    func addEventRoutes(to router: Router<BasicRequestContext>) {
        router.get("boards/:id/cards/events") { request, context in
            try await cardEvents(of: try id(of: Board.self, context), request)
        }
        router.get("health/streams") { _, _ in
            try HTTPExchange.json(streams.counts)
        }
    }

    /// The stream of a board's cards: a live query in a background context of the stream's own
    /// that merges every save (this server's requests', and other servers' commits on
    /// PostgreSQL), whose first result is sent whole and every later one as its changes.
    ///
    /// The board is looked up and the first result read before the answer starts, so that an
    /// unknown board is a 404 and a store that cannot answer a 503, not a stream that fails.
    /// The stream ends when the client goes away (the request's inbound side closes, or a write
    /// fails), when the server shuts down, or with an `error` event when the store fails; the
    /// context and its live query are then released.
    func cardEvents(of boardID: ObjectID<Board>, _ request: Request) async throws -> Response {
        let background = container.newBackgroundContext(name: "live cards of \(Board.named(boardID.primaryKey))")
        let query = try await background.perform { context in
            context.automaticallyMergesChanges = true
            _ = try context.existingObject(with: boardID)
            return try context.liveQuery(FetchRequest<Card>(
                predicate: #Predicate { $0.board.objectID == boardID }, sortBy: [SortDescriptor(\.position)]))
        }
        guard let first = try await Self.nextEvent(of: query, on: background) else {
            throw LoomError(.closed, "The store closed before the live query's first result.")
        }
        let stream = streams.open(background)
        let heartbeat = heartbeat
        let headers: HTTPFields = [.contentType: "text/event-stream; charset=utf-8", .cacheControl: "no-cache"]
        return Response(status: .ok, headers: headers, body: ResponseBody { writer in
            defer { stream.close() }
            // Cancelled as soon as the client closes its side, even while no event is due.
            _ = try? await request.body.consumeWithCancellationOnInboundClose { _ in
                // How long EventSource waits before it reconnects; a reconnection gets the
                // whole result again (the first event of a new stream).
                try await writer.write(ByteBuffer(string: "retry: \(Self.retryMilliseconds)\n\n" + first.text(id: 1)))
                let mailbox = StreamMailbox()
                await withTaskGroup(of: Void.self) { group in
                    // The live query's reader: never cancelled while the stream runs (a live
                    // query whose reader is cancelled ends), and one event ahead at most.
                    group.addTask { await Self.readEvents(of: query, on: background, into: mailbox) }
                    group.addTask {
                        while (try? await Task.sleep(for: heartbeat)) != nil { mailbox.signal(.heartbeat) }
                    }
                    group.addTask {
                        if (try? await gracefulShutdown()) != nil { mailbox.signal(.shutdown) }
                    }
                    var id = 1
                    var failed = false
                    loop: while true {
                        let text: String
                        switch await mailbox.take() {
                        case .event(let event):
                            id += 1
                            guard let eventText = try? event.text(id: id) else { break loop }
                            text = eventText
                        case .heartbeat:
                            // A comment line: proxies see traffic, EventSource ignores it.
                            text = ": heartbeat\n\n"
                        case .failed(let message):
                            id += 1
                            text = Self.errorEvent(message, id: id)
                            failed = true   // the last event
                        case .ended, .shutdown, .cancelled:
                            break loop
                        }
                        // A client that went away fails the write (if its closing was not seen).
                        guard (try? await writer.write(ByteBuffer(string: text))) != nil, !failed else { break loop }
                    }
                    group.cancelAll()
                }
                return true
            }
            try? await writer.finish(nil)
        })
    }

    /// The reconnection delay the stream asks EventSource for (its `retry:` field).
    static let retryMilliseconds = 2000

    /// Reads `query`'s results on its context's isolation and posts each as an event, waiting
    /// until the stream took it before reading the next (so a slow client gets the live query's
    /// coalesced results, not a queue of them); then `.ended`, or `.failed` when the store
    /// failed. Returns when cancelled.
    static func readEvents(of query: LiveQuery<Card, NoSection>, on background: isolated BackgroundContext, into mailbox: StreamMailbox) async {
        var iterator = query.makeAsyncIterator()
        do {
            while let results = try await iterator.next(isolation: background) {
                await mailbox.post(.event(try CardStreamEvent(results, in: background.context)))
            }
            await mailbox.post(Task.isCancelled ? .cancelled : .ended)
        } catch {
            await mailbox.post(.failed(message(of: error)))
        }
    }

    /// What a failure says to a client: Loom's message (which never holds attribute values).
    static func message(of error: any Error) -> String {
        (error as? LoomError)?.message ?? "The live query failed."
    }

    /// The next result of `query`, as an event made on its context's isolation (where the cards
    /// are as the result saw them); nil when the query ended.
    static func nextEvent(of query: LiveQuery<Card, NoSection>, on background: isolated BackgroundContext) async throws(LoomError) -> CardStreamEvent? {
        var iterator = query.makeAsyncIterator()
        guard let results = try await iterator.next(isolation: background) else { return nil }
        return try CardStreamEvent(results, in: background.context)
    }

    /// An `error` event: the store failed while the result was read again. The stream ends; the
    /// client's EventSource reconnects after the retry delay and starts again from a whole result.
    static func errorEvent(_ message: String, id: Int) -> String {
        struct Failure: Encodable { struct Detail: Encodable { var message: String }; var error: Detail }
        let data = (try? JSONEncoder().encode(Failure(error: .init(message: message)))) ?? Data(#"{"error":{}}"#.utf8)
        return "id: \(id)\nevent: error\ndata: \(String(decoding: data, as: UTF8.self))\n\n"
    }
}
