import Foundation
import Testing
@testable import BoardAPI

/// One `board-server` process on a SQLite file, driven over HTTP on loopback.
@Suite("The board server on SQLite", .timeLimit(.minutes(5)))
struct SQLiteServerTests {
    /// Runs `body` against a new server on a new SQLite file; stops the server after.
    private func withServer(_ body: (HTTPClient, URL) async throws -> Void) async throws {
        let folder = FileManager.default.temporaryDirectory.appending(path: "boards-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = folder.appending(path: "boards.loom")
        try await ServerProcess.with([(["--store", store.path], [:])]) { servers in try await body(servers[0].client, store) }
    }

    @Test("Boards, cards, labels and comments are created, read, changed and deleted")
    func crudOverTheGraph() async throws {
        try await withServer { client, _ in
            let created = try await client.post("boards", #"{"name": "Launch"}"#)
            #expect(created.status == 201)
            let board = try created.decode(BoardJSON.self)
            #expect(board.name == "Launch" && board.revision == 1)
            #expect(created.header("Location") == "/boards/\(board.id)")
            #expect(created.header("ETag") == #""1""#)

            let urgent = try await client.post("boards/\(board.id)/labels", #"{"name": "urgent", "color": "red"}"#).decode(LabelJSON.self)
            let later = try await client.post("boards/\(board.id)/labels", #"{"name": "later"}"#).decode(LabelJSON.self)
            #expect(later.color == "gray")

            let cardReply = try await client.post("boards/\(board.id)/cards", #"{"title": "Write the post", "position": 2, "labels": [\#(urgent.id)]}"#)
            #expect(cardReply.status == 201)
            let card = try cardReply.decode(CardJSON.self)
            #expect(card.board == board.id && card.labels == [urgent.id] && card.details == "")
            let first = try await client.post("boards/\(board.id)/cards", #"{"title": "Book the room", "position": 1}"#).decode(CardJSON.self)

            // To-many, in order; the many-to-many from both sides.
            #expect(try await client.get("boards/\(board.id)/cards").decode([CardJSON].self).map(\.id) == [first.id, card.id])
            #expect(try await client.get("boards/\(board.id)/labels").decode([LabelJSON].self).map(\.name) == ["later", "urgent"])
            #expect(try await client.get("labels/\(urgent.id)/cards").decode([CardJSON].self).map(\.id) == [card.id])

            let comment = try await client.post("cards/\(card.id)/comments", #"{"text": "Draft is ready", "author": "ana"}"#)
            #expect(comment.status == 201)
            #expect(try await client.get("cards/\(card.id)/comments").decode([CommentJSON].self).map(\.text) == ["Draft is ready"])

            // Relabel: the label's side follows.
            let relabeled = try await client.patch("cards/\(card.id)", #"{"labels": [\#(later.id)], "title": "Publish the post"}"#)
            #expect(relabeled.status == 200)
            #expect(try relabeled.decode(CardJSON.self) == CardJSON(
                id: card.id, board: board.id, title: "Publish the post", details: "", position: 2, labels: [later.id], revision: 2))
            #expect(try await client.get("labels/\(urgent.id)/cards").decode([CardJSON].self).isEmpty)
            #expect(try await client.get("labels/\(later.id)/cards").decode([CardJSON].self).map(\.id) == [card.id])

            // A label deleted leaves its cards, without it.
            #expect(try await client.delete("labels/\(later.id)").status == 204)
            #expect(try await client.get("cards/\(card.id)").decode(CardJSON.self).labels.isEmpty)

            // A board deleted takes its cards, their comments and its labels with it.
            #expect(try await client.delete("boards/\(board.id)").status == 204)
            #expect(try await client.get("boards/\(board.id)").status == 404)
            #expect(try await client.get("cards/\(card.id)").status == 404)
            #expect(try await client.get("cards/\(first.id)/comments").status == 404)
            #expect(try await client.get("labels/\(urgent.id)").status == 404)
            #expect(try await client.get("boards").decode([BoardJSON].self).isEmpty)
        }
    }

    @Test("A write with a stale If-Match fails with 412 and changes nothing")
    func staleETagIsRefused() async throws {
        try await withServer { client, _ in
            let board = try await client.post("boards", #"{"name": "Ops"}"#).decode(BoardJSON.self)
            let card = try await client.post("boards/\(board.id)/cards", #"{"title": "Rotate keys"}"#).decode(CardJSON.self)
            let read = try await client.get("cards/\(card.id)")
            let etag = try #require(read.header("ETag"))
            #expect(etag == #""1""#)

            let first = try await client.patch("cards/\(card.id)", #"{"details": "every 90 days"}"#, ifMatch: etag)
            #expect(first.status == 200)
            #expect(first.header("ETag") == #""2""#)

            let stale = try await client.patch("cards/\(card.id)", #"{"details": "never"}"#, ifMatch: etag)
            #expect(stale.status == 412)
            #expect(stale.message.contains(#"current ETag is "2""#))
            #expect(try await client.delete("cards/\(card.id)", ifMatch: etag).status == 412)
            #expect(try await client.get("cards/\(card.id)").decode(CardJSON.self).details == "every 90 days")

            // A weak form and a list of tags match as RFC 9110 says; `*` matches any.
            #expect(try await client.patch("cards/\(card.id)", #"{"position": 3}"#, ifMatch: #"W/"2", "7""#).status == 200)
            #expect(try await client.patch("cards/\(card.id)", #"{"position": 4}"#, ifMatch: "*").status == 200)
            // A PATCH that changes nothing keeps the revision.
            #expect(try await client.patch("cards/\(card.id)", #"{"position": 4}"#).header("ETag") == #""4""#)
            #expect(try await client.delete("cards/\(card.id)", ifMatch: #""4""#).status == 204)
        }
    }

    @Test("Unknown IDs are 404, bad JSON 400, a taken name 409, a refused value 422, each with a message")
    func errorsSayWhatAndWhere() async throws {
        try await withServer { client, _ in
            let board = try await client.post("boards", #"{"name": "Home"}"#).decode(BoardJSON.self)
            let other = try await client.post("boards", #"{"name": "Work"}"#).decode(BoardJSON.self)
            let foreign = try await client.post("boards/\(other.id)/labels", #"{"name": "desk"}"#).decode(LabelJSON.self)

            let missing = try await client.get("cards/999999")
            #expect(missing.status == 404)
            #expect(missing.message.contains("No Card with key 999999 exists"))
            #expect(try await client.get("boards/0").status == 404)
            #expect(try await client.patch("labels/424242", "{}").status == 404)
            #expect(try await client.post("boards/\(board.id + 1_000)/cards", #"{"title": "x"}"#).status == 404)

            let notANumber = try await client.get("cards/first")
            #expect(notANumber.status == 400)
            #expect(notANumber.message.contains("'first' is not Card ID"))
            let notJSON = try await client.post("boards", "name=Garden")
            #expect(notJSON.status == 400)
            #expect(notJSON.message.contains("not JSON"))
            let wrongType = try await client.post("boards/\(board.id)/cards", #"{"title": "Paint", "labels": ["blue"]}"#)
            #expect(wrongType.status == 400)
            #expect(wrongType.message.contains("labels[0]"))

            // Loom's own messages: a uniqueness constraint, a required value left out.
            let taken = try await client.post("boards", #"{"name": "Work"}"#)
            #expect(taken.status == 409)
            #expect(taken.message.contains("Board") && taken.message.contains("name"))
            let takenLabel = try await client.post("boards/\(other.id)/labels", #"{"name": "desk"}"#)
            #expect(takenLabel.status == 409)
            // The same label name on another board is another label.
            #expect(try await client.post("boards/\(board.id)/labels", #"{"name": "desk"}"#).status == 201)
            let untitled = try await client.post("boards/\(board.id)/cards", #"{"details": "no title"}"#)
            #expect(untitled.status == 422)
            #expect(untitled.message.contains("Card.title is required"))

            // The API's own rules, in the same shape.
            let blank = try await client.post("boards/\(board.id)/cards", #"{"title": "  "}"#)
            #expect(blank.status == 422)
            #expect(blank.message == "Card.title must not be empty.")
            let otherBoards = try await client.post("boards/\(board.id)/cards", #"{"title": "Desk", "labels": [\#(foreign.id)]}"#)
            #expect(otherBoards.status == 422)
            #expect(otherBoards.message.contains("belongs to another board"))

            // Nothing of the refused requests was kept.
            #expect(try await client.get("boards/\(board.id)/cards").decode([CardJSON].self).isEmpty)
            #expect(try await client.get("boards").decode([BoardJSON].self).map(\.name) == ["Home", "Work"])
        }
    }

    @Test("What one server process saved, the next one on the same file serves")
    func restartKeepsTheBoards() async throws {
        let folder = FileManager.default.temporaryDirectory.appending(path: "boards-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = folder.appending(path: "boards.loom").path
        let first = try await ServerProcess(["--store", store])
        let board = try await first.client.post("boards", #"{"name": "Kept"}"#).decode(BoardJSON.self)
        let card = try await first.client.post("boards/\(board.id)/cards", #"{"title": "Still here"}"#).decode(CardJSON.self)
        try await first.stop()

        let second = try await ServerProcess(["--store", store])
        #expect(try await second.client.get("cards/\(card.id)").decode(CardJSON.self) == card)
        #expect(try await second.client.get("boards").decode([BoardJSON].self) == [board])
        try await second.stop()
    }
}
