import Foundation
import Testing
@testable import BoardAPI

/// Reads the next event of `stream`, which must be a `changes` event, applies it to `list`, and
/// checks that the list is then the board's cards as `client` serves them.
private func nextChange(
    _ stream: EventStream, applyingTo list: inout LiveCardList, board: Int64, servedBy client: HTTPClient,
    sourceLocation: SourceLocation = #_sourceLocation
) async throws -> (id: String?, change: CardChangesJSON) {
    let event = try await stream.next()
    #expect(event.name == "changes", sourceLocation: sourceLocation)
    let change = try event.decode(CardChangesJSON.self)
    try list.apply(change)
    #expect(list.cards == (try await client.get("boards/\(board)/cards").decode([CardJSON].self)), sourceLocation: sourceLocation)
    return (event.id, change)
}

/// Opens the board's stream and reads its first event, the whole list.
private func openStream(_ server: ServerProcess, board: Int64) async throws -> (EventStream, LiveCardList) {
    let stream = EventStream(port: server.port, path: "boards/\(board)/cards/events")
    let first = try await stream.next()
    #expect(first.name == "results" && first.id == "1")
    return (stream, LiveCardList(try first.decode(CardResultsJSON.self)))
}

/// Waits until the server's `GET /health/streams` answers `counts`.
private func waitForStreams(_ counts: LiveStreams.Counts, on client: HTTPClient, within timeout: Duration = .seconds(10)) async throws {
    let deadline = ContinuousClock.now + timeout
    var last = try await client.get("health/streams").decode(LiveStreams.Counts.self)
    while last != counts, ContinuousClock.now < deadline {
        try await Task.sleep(for: .milliseconds(50))
        last = try await client.get("health/streams").decode(LiveStreams.Counts.self)
    }
    #expect(last == counts)
}

/// Opens board `board`'s live page of `page` in headless Chromium, waits until the page's stream
/// is open, makes `changes`, and returns what the page shows once its text contains `expected`
/// (or a minute passed). The screenshot is kept in `.build/test-output/<name>.png`.
private func showLivePage(
    of page: ServerProcess, board: Int64, expecting expected: String, screenshot name: String,
    after changes: () async throws -> Void
) async throws -> Browser.Reading {
    try FileManager.default.createDirectory(at: Browser.outputFolder, withIntermediateDirectories: true)
    let screenshot = Browser.outputFolder.appending(path: "\(name).png")
    try? FileManager.default.removeItem(at: screenshot)
    let browser = try Browser.Page(url: "http://127.0.0.1:\(page.port)/boards/\(board)/live", expecting: expected, screenshot: screenshot)
    // The page is loaded and its EventSource connected: the changes come while it watches.
    try await waitForStreams(LiveStreams.Counts(open: 1, contexts: 1), on: page.client, within: .seconds(60))
    try await changes()
    let reading = try await browser.reading()
    #expect(FileManager.default.fileExists(atPath: screenshot.path), "no screenshot at \(screenshot.path)")
    return reading
}

/// One `board-server` on SQLite, its live streams read by a Server-Sent Events client.
@Suite("Live card streams on SQLite", .timeLimit(.minutes(5)))
struct SQLiteLiveStreamTests {
    /// Runs `body` against a new server on a new SQLite file.
    private func withServer(_ arguments: [String] = [], _ body: (ServerProcess) async throws -> Void) async throws {
        let folder = FileManager.default.temporaryDirectory.appending(path: "live-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        try await ServerProcess.with([(["--store", folder.appending(path: "boards.loom").path] + arguments, [:])]) { servers in
            try await body(servers[0])
        }
    }

    @Test("The first event is the whole list; each change after it is a diff that gives the next list")
    func diffsFollowTheChanges() async throws {
        try await withServer { server in
            let client = server.client
            let board = try await client.post("boards", #"{"name": "Launch"}"#).decode(BoardJSON.self)
            let other = try await client.post("boards", #"{"name": "Other"}"#).decode(BoardJSON.self)
            let one = try await client.post("boards/\(board.id)/cards", #"{"title": "One", "position": 1}"#).decode(CardJSON.self)
            let two = try await client.post("boards/\(board.id)/cards", #"{"title": "Two", "position": 2}"#).decode(CardJSON.self)

            let (stream, first) = try await openStream(server, board: board.id)
            defer { stream.close() }
            var list = first
            #expect(list.sections.count == 1)
            #expect(list.cards == [one, two])
            #expect(stream.response?.status == 200)
            #expect(stream.response?.contentType?.hasPrefix("text/event-stream") == true)
            #expect(stream.retry == BoardAPI.retryMilliseconds)

            // Inserted, at its new position, with the card.
            let zero = try await client.post("boards/\(board.id)/cards", #"{"title": "Zero", "position": 0}"#).decode(CardJSON.self)
            var (id, change) = try await nextChange(stream, applyingTo: &list, board: board.id, servedBy: client)
            #expect(id == "2")
            #expect(change.inserted == [.init(at: PositionJSON(section: 0, item: 0), card: zero)])
            #expect(change.deleted.isEmpty && change.moved.isEmpty && change.updated.isEmpty)

            // Updated in place, with the properties that changed.
            _ = try await client.patch("cards/\(one.id)", #"{"title": "One, renamed"}"#)
            (id, change) = try await nextChange(stream, applyingTo: &list, board: board.id, servedBy: client)
            #expect(id == "3")
            #expect(change.updated.map(\.at) == [PositionJSON(section: 0, item: 1)])
            #expect(change.updated.first?.properties.contains("title") == true)
            #expect(change.updated.first?.card.title == "One, renamed")

            // Moved: position 0 → last.
            _ = try await client.patch("cards/\(zero.id)", #"{"position": 7}"#)
            (_, change) = try await nextChange(stream, applyingTo: &list, board: board.id, servedBy: client)
            #expect(!change.moved.isEmpty)
            #expect(list.cards.map(\.title) == ["One, renamed", "Two", "Zero"])

            // Another board's card makes no event: the next one is this deletion, numbered next.
            _ = try await client.post("boards/\(other.id)/cards", #"{"title": "Elsewhere"}"#)
            #expect(try await client.delete("cards/\(two.id)").status == 204)
            (id, change) = try await nextChange(stream, applyingTo: &list, board: board.id, servedBy: client)
            #expect(id == "5")
            #expect(change.deleted == [PositionJSON(section: 0, item: 1)] && change.inserted.isEmpty)

            // The board deleted: its cards leave the list, the stream stays open.
            #expect(try await client.delete("boards/\(board.id)").status == 204)
            let last = try await stream.next()
            #expect(last.name == "changes")
            try list.apply(try last.decode(CardChangesJSON.self))
            #expect(list.cards.isEmpty && list.sections.count == 1)
            #expect(try await client.get("health/streams").decode(LiveStreams.Counts.self).open == 1)
        }
    }

    @Test("A burst of concurrent changes: every event fits the list, which ends as GET serves it")
    func burstOfChanges() async throws {
        try await withServer { server in
            let client = server.client
            let board = try await client.post("boards", #"{"name": "Busy"}"#).decode(BoardJSON.self)
            var cards: [CardJSON] = []
            for i in 0..<6 {
                cards.append(try await client.post("boards/\(board.id)/cards", #"{"title": "Card \#(i)", "position": \#(i * 10)}"#).decode(CardJSON.self))
            }
            let (stream, first) = try await openStream(server, board: board.id)
            defer { stream.close() }
            var list = first
            // Inserts, moves (distinct positions: ties would order as the store likes), updates
            // and deletes, from many requests at once; the live query may coalesce them.
            try await withThrowingTaskGroup(of: Int.self) { group in
                for i in 0..<8 {
                    group.addTask { try await client.post("boards/\(board.id)/cards", #"{"title": "New \#(i)", "position": \#(5 + i * 10)}"#).status }
                }
                for (i, card) in cards.prefix(4).enumerated() {
                    group.addTask { try await client.patch("cards/\(card.id)", #"{"position": \#(1000 - i), "details": "moved"}"#).status }
                }
                for card in cards.suffix(2) {
                    group.addTask { try await client.delete("cards/\(card.id)").status }
                }
                for try await status in group { #expect([200, 201, 204].contains(status)) }
            }
            let served = try await client.get("boards/\(board.id)/cards").decode([CardJSON].self)
            #expect(served.count == 12)
            var events = 0
            while list.cards != served {
                let event = try await stream.next(within: .seconds(30))
                #expect(event.name == "changes")
                try list.apply(try event.decode(CardChangesJSON.self))   // throws if it does not fit
                events += 1
            }
            #expect(events >= 1 && events <= 14)
        }
    }

    @Test("Cards at the same position stream in GET's order (by ID), and keep it as they change")
    func tiesOrderedByID() async throws {
        try await withServer { server in
            let client = server.client
            let board = try await client.post("boards", #"{"name": "Ties"}"#).decode(BoardJSON.self)
            var cards: [CardJSON] = []
            for title in ["A", "B", "C"] {
                cards.append(try await client.post("boards/\(board.id)/cards", #"{"title": "\#(title)"}"#).decode(CardJSON.self))
            }
            let (stream, first) = try await openStream(server, board: board.id)
            defer { stream.close() }
            var list = first
            #expect(list.cards == cards)
            _ = try await client.patch("cards/\(cards[1].id)", #"{"title": "B, renamed"}"#)
            _ = try await nextChange(stream, applyingTo: &list, board: board.id, servedBy: client)
            _ = try await client.post("boards/\(board.id)/cards", #"{"title": "D"}"#)
            let (_, change) = try await nextChange(stream, applyingTo: &list, board: board.id, servedBy: client)
            #expect(change.inserted.map(\.at) == [PositionJSON(section: 0, item: 3)])
            _ = try await client.patch("cards/\(cards[0].id)", #"{"position": 0}"#)   // the same: no event
            _ = try await client.patch("cards/\(cards[2].id)", #"{"position": -1}"#)
            let (_, moved) = try await nextChange(stream, applyingTo: &list, board: board.id, servedBy: client)
            #expect(!moved.moved.isEmpty)
            #expect(list.cards.map(\.title) == ["C", "A", "B, renamed", "D"])
        }
    }

    @Test("A heartbeat that is not a positive number of seconds up to an hour stops the server at its start")
    func badHeartbeat() async throws {
        for value in ["0", "-1", "7200", "soon"] {
            let folder = FileManager.default.temporaryDirectory.appending(path: "live-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: folder) }
            do {
                let server = try await ServerProcess(["--store", folder.appending(path: "boards.loom").path, "--heartbeat", value])
                try? await server.stop()
                Issue.record("board-server started with --heartbeat \(value)")
            } catch let failure as ServerFailure {
                #expect(failure.description.contains("heartbeat"), "\(value): \(failure.description)")
            }
        }
    }

    @Test("A silent stream sends heartbeats; a client that goes away releases the stream and its live query")
    func heartbeatsAndRelease() async throws {
        try await withServer(["--heartbeat", "0.2"]) { server in
            let board = try await server.client.post("boards", #"{"name": "Quiet"}"#).decode(BoardJSON.self)
            let (stream, list) = try await openStream(server, board: board.id)
            #expect(list.cards.isEmpty && list.sections.count == 1)
            try await stream.wait { $0.comments >= 3 }
            #expect(stream.pending == 0)   // heartbeats are comments, not events
            try await waitForStreams(LiveStreams.Counts(open: 1, contexts: 1), on: server.client)
            stream.close()
            try await waitForStreams(LiveStreams.Counts(open: 0, contexts: 0), on: server.client)

            // Many clients coming and going leave nothing behind either.
            var streams: [EventStream] = []
            for _ in 0..<5 { streams.append(try await openStream(server, board: board.id).0) }
            try await waitForStreams(LiveStreams.Counts(open: 5, contexts: 5), on: server.client)
            for stream in streams { stream.close() }
            try await waitForStreams(LiveStreams.Counts(open: 0, contexts: 0), on: server.client)
        }
    }

    @Test("Without heartbeats due, a client's going away is noticed at once")
    func closeNoticedBetweenHeartbeats() async throws {
        try await withServer { server in   // the default heartbeat: 15 seconds
            let board = try await server.client.post("boards", #"{"name": "Gone"}"#).decode(BoardJSON.self)
            let (stream, _) = try await openStream(server, board: board.id)
            try await waitForStreams(LiveStreams.Counts(open: 1, contexts: 1), on: server.client)
            stream.close()
            try await waitForStreams(LiveStreams.Counts(open: 0, contexts: 0), on: server.client, within: .seconds(5))
        }
    }

    @Test("An unknown board, an ID that is not a number: 404 and 400 with a message, no stream")
    func badRequests() async throws {
        try await withServer { server in
            let unknown = try await server.client.get("boards/999/cards/events")
            #expect(unknown.status == 404)
            #expect(unknown.message.contains("Board"))
            let notANumber = try await server.client.get("boards/first/cards/events")
            #expect(notANumber.status == 400)
            #expect(notANumber.message.contains("'first'"))
            #expect(try await server.client.get("boards/999/live").status == 404)
            #expect(try await server.client.get("boards/0/cards/events").status == 404)
            try await waitForStreams(LiveStreams.Counts(open: 0, contexts: 0), on: server.client)
        }
    }

    @Test("A server stopped with streams open ends them and exits cleanly, at once")
    func shutdownEndsStreams() async throws {
        let folder = FileManager.default.temporaryDirectory.appending(path: "live-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let server = try await ServerProcess(["--store", folder.appending(path: "boards.loom").path])
        let first: EventStream, second: EventStream
        do {
            let board = try await server.client.post("boards", #"{"name": "Closing"}"#).decode(BoardJSON.self)
            (first, _) = try await openStream(server, board: board.id)
            (second, _) = try await openStream(server, board: board.id)
        } catch {
            try? await server.stop()
            throw error
        }
        let start = ContinuousClock.now
        try await server.stop()   // SIGTERM; throws unless the exit is clean
        // Well within a heartbeat (15 seconds): the streams did not wait for one to notice.
        #expect(ContinuousClock.now - start < .seconds(10))
        // Both responses ended (not merely silent), with no event after the first.
        try await first.wait(within: .seconds(10)) { $0.hasEnded }
        try await second.wait(within: .seconds(10)) { $0.hasEnded }
        #expect(first.pending == 0 && second.pending == 0)
    }

    @Test(
        "The live page in headless Chromium follows an insertion, a move, a deletion and an update",
        .enabled(if: Browser.executable != nil, "chromium is not installed (scripts/install-dependencies installs it)"))
    func livePageInChromium() async throws {
        try await withServer { server in
            let client = server.client
            let board = try await client.post("boards", #"{"name": "Launch <plan>"}"#).decode(BoardJSON.self)
            var cards: [CardJSON] = []
            for (i, title) in ["Book the room", "Order food", "Print badges"].enumerated() {
                cards.append(try await client.post("boards/\(board.id)/cards", #"{"title": "\#(title)", "position": \#(i + 1)}"#).decode(CardJSON.self))
            }
            let page = try await client.get("boards/\(board.id)/live")
            #expect(page.status == 200 && page.header("Content-Type")?.hasPrefix("text/html") == true)
            #expect(String(decoding: page.body, as: UTF8.self).contains("Launch &lt;plan&gt;"))

            // An insertion, a move, a deletion, then an update: the page applies each diff, and
            // shows the update only after the others (events come in order).
            let reading = try await showLivePage(of: server, board: board.id, expecting: "Book the big room", screenshot: "live-page-sqlite") {
                let statuses = [
                    try await client.post("boards/\(board.id)/cards", #"{"title": "Write the <b>post</b>", "position": 9}"#).status,
                    try await client.patch("cards/\(cards[1].id)", #"{"position": 0}"#).status,
                    try await client.delete("cards/\(cards[2].id)").status,
                    try await client.patch("cards/\(cards[0].id)", #"{"title": "Book the big room"}"#).status,
                ]
                #expect(statuses == [201, 200, 204, 200])
            }
            #expect(reading.found)
            #expect(reading.cards == ["Order food", "Book the big room", "Write the <b>post</b>"])   // text, not HTML
            #expect(reading.status == "live")
            #expect(reading.changes >= 1)
        }
    }
}

/// Two `board-server` processes on one PostgreSQL database: what a client of one streams
/// follows what is saved through the other (the remote-change listener merges it into the
/// stream's context, and the live query sees it).
@Suite(
    "Live card streams across servers on PostgreSQL", .timeLimit(.minutes(5)),
    .enabled(if: databaseURL != nil, "LOOM_TEST_POSTGRES_URL is not set"))
struct PostgreSQLLiveStreamTests {
    @Test("A change saved through server A reaches a client of server B's stream")
    func changeThroughAReachesB() async throws {
        let url = PostgreSQLServerTests.freshSchema(of: try #require(databaseURL))
        try await ServerProcess.with([(["--postgres", url], [:]), (["--postgres", url], [:])]) { servers in
            let (a, b) = (servers[0].client, servers[1].client)
            let board = try await a.post("boards", #"{"name": "Shared"}"#).decode(BoardJSON.self)
            let one = try await a.post("boards/\(board.id)/cards", #"{"title": "One", "position": 1}"#).decode(CardJSON.self)

            let (stream, first) = try await openStream(servers[1], board: board.id)
            defer { stream.close() }
            var list = first
            #expect(list.cards == [one])

            let two = try await a.post("boards/\(board.id)/cards", #"{"title": "Two", "position": 2}"#).decode(CardJSON.self)
            var (_, change) = try await nextChange(stream, applyingTo: &list, board: board.id, servedBy: a)
            #expect(change.inserted == [.init(at: PositionJSON(section: 0, item: 1), card: two)])

            _ = try await a.patch("cards/\(one.id)", #"{"title": "One, from A", "position": 3}"#)
            (_, change) = try await nextChange(stream, applyingTo: &list, board: board.id, servedBy: a)
            #expect(!change.moved.isEmpty)
            #expect(list.cards.map(\.title) == ["Two", "One, from A"])

            // B's own writes and A's, interleaved, all reach the stream.
            _ = try await b.post("boards/\(board.id)/cards", #"{"title": "Three, from B", "position": 0}"#)
            _ = try await nextChange(stream, applyingTo: &list, board: board.id, servedBy: b)
            #expect(try await a.delete("cards/\(two.id)").status == 204)
            (_, change) = try await nextChange(stream, applyingTo: &list, board: board.id, servedBy: b)
            #expect(change.deleted.count == 1)
            #expect(list.cards.map(\.title) == ["Three, from B", "One, from A"])
        }
    }

    @Test("While the database is down a new stream is refused with 503; an open one stays open and follows again")
    func databaseDown() async throws {
        // A PostgreSQL server of this test's own, stopped and started again under the server.
        let cluster = try PostgreSQLCluster()
        defer { cluster.remove() }
        let url = PostgreSQLServerTests.freshSchema(of: cluster.url)
        try await ServerProcess.with([(["--postgres", url, "--heartbeat", "0.2"], [:])]) { servers in
            let client = servers[0].client
            let board = try await client.post("boards", #"{"name": "Outage"}"#).decode(BoardJSON.self)
            let (stream, first) = try await openStream(servers[0], board: board.id)
            defer { stream.close() }
            var list = first
            try cluster.run("halt")
            let refused = try await client.get("boards/\(board.id)/cards/events")
            #expect(refused.status == 503)
            #expect(!refused.message.isEmpty)
            let comments = stream.comments
            try await stream.wait { $0.comments >= comments + 2 }
            #expect(!stream.hasEnded)
            try cluster.run("resume")
            var status = 0
            let deadline = ContinuousClock.now + .seconds(30)
            while status != 201, ContinuousClock.now < deadline {
                status = try await client.post("boards/\(board.id)/cards", #"{"title": "After the outage"}"#).status
                if status != 201 { try await Task.sleep(for: .milliseconds(200)) }
            }
            #expect(status == 201)
            let (_, change) = try await nextChange(stream, applyingTo: &list, board: board.id, servedBy: client)
            #expect(change.inserted.map(\.card.title) == ["After the outage"])
        }
    }

    @Test(
        "Server B's live page in headless Chromium shows a card added through server A",
        .enabled(if: Browser.executable != nil, "chromium is not installed (scripts/install-dependencies installs it)"))
    func livePageAcrossServers() async throws {
        let url = PostgreSQLServerTests.freshSchema(of: try #require(databaseURL))
        try await ServerProcess.with([(["--postgres", url], [:]), (["--postgres", url], [:])]) { servers in
            let a = servers[0].client
            let board = try await a.post("boards", #"{"name": "Shared"}"#).decode(BoardJSON.self)
            _ = try await a.post("boards/\(board.id)/cards", #"{"title": "Book the room", "position": 1}"#)
            let reading = try await showLivePage(of: servers[1], board: board.id, expecting: "Added through A", screenshot: "live-page-postgresql") {
                let status = try await a.post("boards/\(board.id)/cards", #"{"title": "Added through A", "position": 9}"#).status
                #expect(status == 201)
            }
            #expect(reading.found)
            #expect(reading.cards == ["Book the room", "Added through A"])
            #expect(reading.status == "live")
            #expect(reading.changes >= 1)
        }
    }
}
