import Foundation
import Hummingbird
import NIOCore
import PostgresNIO

// board-server's representations and rules, written again without Loom: the baseline shares no
// code with the server it is measured against, so that nothing of Loom's runs in it.

struct BoardJSON: Codable, Sendable {
    var id: Int64
    var name: String
    var revision: Int
}

struct CardJSON: Codable, Sendable {
    var id: Int64
    var board: Int64
    var title: String
    var details: String
    var position: Int
    var labels: [Int64]
    var revision: Int
}

struct BoardInput: Decodable, Sendable {
    var name: String?
}

struct CardInput: Decodable, Sendable {
    var title: String?
    var details: String?
    var position: Int?
    var labels: [Int64]?
}

/// Bodies, IDs, ETags and JSON answers, as board-server reads and writes them.
enum RawExchange {
    /// The request's JSON body as `type`; 400 when it is not.
    static func decode<Body: Decodable>(_ type: Body.Type, from request: Request) async throws -> Body {
        var request = request
        let buffer = try await request.collectBody(upTo: 1 << 20)
        do {
            return try JSONDecoder().decode(Body.self, from: Data(buffer.readableBytesView))
        } catch {
            throw HTTPError(.badRequest, message: "The request body is not valid JSON for this request.")
        }
    }

    /// A required name or title: present (422), not empty, at most 200 characters.
    static func text(_ value: String?, field: String, of entity: String) throws -> String {
        guard let value else {
            throw HTTPError(.unprocessableContent, message: "\(entity).\(field) is required.")
        }
        let trimmed = value.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty else { throw HTTPError(.unprocessableContent, message: "\(entity).\(field) must not be empty.") }
        guard trimmed.count <= 200 else {
            throw HTTPError(.unprocessableContent, message: "\(entity).\(field) must be at most 200 characters, not \(trimmed.count).")
        }
        return trimmed
    }

    /// The path's `:id`: 400 when it is not a number.
    static func id(_ context: BasicRequestContext, of entity: String) throws -> Int64 {
        let text = context.parameters.get("id") ?? ""
        guard let id = Int64(text) else { throw HTTPError(.badRequest, message: "'\(text)' is not \(entity) ID: IDs are integers.") }
        return id
    }

    static func notFound(_ entity: String, _ id: Int64) -> HTTPError {
        HTTPError(.notFound, message: "No \(entity) \(id) exists.")
    }

    /// The revisions `If-Match` accepts; `nil` without the header or with `*` (any revision).
    /// A tag that is not a revision matches nothing.
    static func ifMatch(_ request: Request) -> [Int]? {
        guard let header = request.headers[.ifMatch] else { return nil }
        var revisions: [Int] = []
        for tag in header.split(separator: ",") {
            let tag = tag.trimmingCharacters(in: .whitespaces)
            if tag == "*" { return nil }
            if let revision = Int(tag.trimmingPrefix("W/").trimmingCharacters(in: CharacterSet(charactersIn: "\""))) {
                revisions.append(revision)
            }
        }
        return revisions
    }

    /// A JSON answer, with `revision` as its ETag and `location` as its Location.
    static func json(_ value: some Encodable, status: HTTPResponse.Status = .ok, revision: Int? = nil, location: String? = nil) throws -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        var headers: HTTPFields = [.contentType: "application/json; charset=utf-8"]
        if let revision { headers[.eTag] = "\"\(revision)\"" }
        if let location { headers[.location] = location }
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: try encoder.encode(value))))
    }
}

/// The database's errors as board-server answers them: a name taken is 409, a database that
/// cannot answer is 503.
struct RawErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as PSQLError {
            if error.serverInfo?[.sqlState] == "23505" {
                throw HTTPError(.conflict, message: "That name is taken: \(error.serverInfo?[.message] ?? "a unique constraint").")
            }
            context.logger.error("\(request.method) \(request.uri.path): \(String(reflecting: error))")
            throw HTTPError(.serviceUnavailable, message: "The database cannot answer: \(error.serverInfo?[.message] ?? error.code.description).")
        } catch let error as HTTPError {
            throw error
        } catch {
            // The pool's own failures (no connection could be opened in time) are the database's too.
            context.logger.error("\(request.method) \(request.uri.path): \(error)")
            throw HTTPError(.serviceUnavailable, message: "The database cannot answer.")
        }
    }
}
