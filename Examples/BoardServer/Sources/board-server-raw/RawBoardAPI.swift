import Foundation
import Hummingbird
import Logging
import NIOCore
import PostgresNIO

/// The load generator's endpoints written by hand: one SQL statement for each (two when a write
/// must tell 404 from 412), the JSON and ETags of board-server, and optimistic locking by a
/// `revision` column that the `UPDATE` checks and counts up.
///
/// Sendable: `PostgresClient` is, and the rest is constant.
struct RawBoardAPI: Sendable {
    let client: PostgresClient
    let schema: String
    let logger: Logger

    /// Makes the schema and its tables when they are missing, under an advisory lock, so that
    /// servers started together do not race.
    func createTables() async throws {
        try await client.withTransaction(logger: logger) { connection in
            try await connection.query("SELECT pg_advisory_xact_lock(4242042)", logger: logger)
            for statement in [
                "CREATE SCHEMA IF NOT EXISTS \"\(schema)\"",
                """
                CREATE TABLE IF NOT EXISTS boards (
                    id bigserial PRIMARY KEY, name text NOT NULL UNIQUE, revision bigint NOT NULL DEFAULT 1)
                """,
                """
                CREATE TABLE IF NOT EXISTS cards (
                    id bigserial PRIMARY KEY, board_id bigint NOT NULL REFERENCES boards ON DELETE CASCADE,
                    title text NOT NULL, details text NOT NULL DEFAULT '', position bigint NOT NULL DEFAULT 0,
                    revision bigint NOT NULL DEFAULT 1)
                """,
                "CREATE INDEX IF NOT EXISTS cards_by_board ON cards (board_id, position, id)",
                // Labels exist so that a card's JSON lists them as board-server's does (none are made here).
                """
                CREATE TABLE IF NOT EXISTS card_labels (
                    card_id bigint NOT NULL REFERENCES cards ON DELETE CASCADE, label_id bigint NOT NULL,
                    PRIMARY KEY (card_id, label_id))
                """,
            ] {
                try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
            }
        }
    }

    func router() -> Router<BasicRequestContext> {
        let router = Router()
        router.add(middleware: RawErrorMiddleware())
        router.get("health") { _, _ in "ok" }
        router.post("boards") { request, _ in
            let input = try await RawExchange.decode(BoardInput.self, from: request)
            let name = try RawExchange.text(input.name, field: "name", of: "Board")
            let rows = try await client.query(
                "INSERT INTO boards (name) VALUES (\(name)) RETURNING id, name, revision", logger: logger)
            let board = try await boardRow(in: rows)!
            return try RawExchange.json(board, status: .created, revision: board.revision, location: "/boards/\(board.id)")
        }
        router.get("boards/:id") { _, context in
            let id = try RawExchange.id(context, of: "Board")
            let rows = try await client.query("SELECT id, name, revision FROM boards WHERE id = \(id)", logger: logger)
            guard let board = try await boardRow(in: rows) else { throw RawExchange.notFound("Board", id) }
            return try RawExchange.json(board, revision: board.revision)
        }
        router.get("boards/:id/cards") { _, context in
            let id = try RawExchange.id(context, of: "Board")
            // The board's existence and its cards in one statement: a board without cards is one
            // row of NULLs, no board no row.
            let rows = try await client.query("""
                SELECT c.id, c.board_id, c.title, c.details, c.position, c.revision, \(unescaped: Self.labels)
                FROM boards b LEFT JOIN cards c ON c.board_id = b.id
                WHERE b.id = \(id) ORDER BY c.position, c.id
                """, logger: logger)
            var cards: [CardJSON] = []
            var found = false
            for try await row in rows.decode((Int64?, Int64?, String?, String?, Int?, Int?, [Int64]?).self) {
                found = true
                guard let cardID = row.0, let board = row.1, let title = row.2, let details = row.3, let position = row.4, let revision = row.5 else { continue }
                cards.append(CardJSON(id: cardID, board: board, title: title, details: details, position: position, labels: row.6 ?? [], revision: revision))
            }
            guard found else { throw RawExchange.notFound("Board", id) }
            return try RawExchange.json(cards)
        }
        router.post("boards/:id/cards") { request, context in
            let id = try RawExchange.id(context, of: "Board")
            let input = try await RawExchange.decode(CardInput.self, from: request)
            let title = try RawExchange.text(input.title, field: "title", of: "Card")
            guard (input.labels ?? []).isEmpty else {
                throw HTTPError(.unprocessableContent, message: "Card.labels: this server does not make labels.")
            }
            let rows = try await client.query("""
                INSERT INTO cards (board_id, title, details, position)
                SELECT id, \(title), \(input.details ?? ""), \(input.position ?? 0) FROM boards WHERE id = \(id)
                RETURNING id, board_id, title, details, position, revision, '{}'::bigint[]
                """, logger: logger)
            guard let card = try await cardRow(in: rows) else { throw RawExchange.notFound("Board", id) }
            return try RawExchange.json(card, status: .created, revision: card.revision, location: "/cards/\(card.id)")
        }
        router.get("cards/:id") { _, context in
            let id = try RawExchange.id(context, of: "Card")
            let rows = try await client.query("""
                SELECT c.id, c.board_id, c.title, c.details, c.position, c.revision, \(unescaped: Self.labels)
                FROM cards c WHERE c.id = \(id)
                """, logger: logger)
            guard let card = try await cardRow(in: rows) else { throw RawExchange.notFound("Card", id) }
            return try RawExchange.json(card, revision: card.revision)
        }
        router.patch("cards/:id") { request, context in
            let id = try RawExchange.id(context, of: "Card")
            let accepted = RawExchange.ifMatch(request)
            let input = try await RawExchange.decode(CardInput.self, from: request)
            let title = try input.title.map { try RawExchange.text($0, field: "title", of: "Card") }
            guard input.labels == nil else {
                throw HTTPError(.unprocessableContent, message: "Card.labels: this server does not change labels.")
            }
            // The version check and the write in one statement: under READ COMMITTED a concurrent
            // update makes this one wait, then re-check the WHERE against the row it committed.
            // The revision counts only a change of the representation, as board-server's.
            let anyRevision = accepted == nil
            let revisions = accepted ?? []
            let rows = try await client.query("""
                UPDATE cards c SET title = COALESCE(\(title), c.title), details = COALESCE(\(input.details), c.details),
                    position = COALESCE(\(input.position), c.position),
                    revision = c.revision + CASE WHEN (COALESCE(\(title), c.title), COALESCE(\(input.details), c.details),
                        COALESCE(\(input.position), c.position)) IS DISTINCT FROM (c.title, c.details, c.position) THEN 1 ELSE 0 END
                WHERE c.id = \(id) AND (\(anyRevision) OR c.revision = ANY(\(revisions)))
                RETURNING c.id, c.board_id, c.title, c.details, c.position, c.revision, \(unescaped: Self.labels)
                """, logger: logger)
            if let card = try await cardRow(in: rows) { return try RawExchange.json(card, revision: card.revision) }
            let current = try await client.query("SELECT revision FROM cards WHERE id = \(id)", logger: logger)
            guard let revision = try await current.decode(Int.self).first(where: { _ in true }) else { throw RawExchange.notFound("Card", id) }
            throw HTTPError(
                .preconditionFailed,
                message: "Card \(id) has changed: its current ETag is \"\(revision)\", not the one in If-Match. Read it again and retry with the new ETag.")
        }
        return router
    }

    /// A card's labels, as a sorted array (empty without labels).
    private static let labels = "COALESCE((SELECT array_agg(l.label_id ORDER BY l.label_id) FROM card_labels l WHERE l.card_id = c.id), '{}'::bigint[])"

    /// The board in the first row of `rows`, or `nil` without rows.
    private func boardRow(in rows: PostgresRowSequence) async throws -> BoardJSON? {
        for try await (id, name, revision) in rows.decode((Int64, String, Int).self) {
            return BoardJSON(id: id, name: name, revision: revision)
        }
        return nil
    }

    /// The card in the first row of `rows`, or `nil` without rows.
    private func cardRow(in rows: PostgresRowSequence) async throws -> CardJSON? {
        for try await (id, board, title, details, position, revision, labels) in rows.decode((Int64, Int64, String, String, Int, Int, [Int64]).self) {
            return CardJSON(id: id, board: board, title: title, details: details, position: position, labels: labels, revision: revision)
        }
        return nil
    }
}
