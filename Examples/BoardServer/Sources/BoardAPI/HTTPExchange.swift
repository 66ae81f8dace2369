import Foundation
import Hummingbird
import NIOCore

/// Reading request bodies and writing JSON responses, with the API's error shape
/// (`{"error":{"message":"…"}}`, Hummingbird's own).
enum HTTPExchange {
    /// The largest request body read; a larger one is refused before it is read whole.
    static let maximumBodySize = 1 << 20

    /// Decodes the request's JSON body, or throws 400 saying what is wrong and where.
    static func decode<Body: Decodable>(_ type: Body.Type, from request: Request) async throws -> Body {
        var request = request
        let buffer = try await request.collectBody(upTo: maximumBodySize)
        do {
            return try JSONDecoder().decode(Body.self, from: Data(buffer.readableBytesView))
        } catch let error as DecodingError {
            throw HTTPError(.badRequest, message: describe(error))
        }
    }

    /// A sentence for a body that is not the JSON expected: which field, what was wrong.
    static func describe(_ error: DecodingError) -> String {
        func path(_ context: DecodingError.Context) -> String {
            let keys = context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
            return keys.isEmpty ? "the body" : "the field \(keys.hasPrefix(".") ? String(keys.dropFirst()) : keys)"
        }
        switch error {
        case .typeMismatch(let type, let context):
            return "The request body is not valid: \(path(context)) must be \(typeName(type))."
        case .valueNotFound(let type, let context):
            return "The request body is not valid: \(path(context)) must be \(typeName(type)), not null."
        case .keyNotFound(let key, let context):
            return "The request body is not valid: \(path(context)) lacks the field \(key.stringValue)."
        case .dataCorrupted(let context) where context.codingPath.isEmpty:
            return "The request body is not JSON: send a JSON object (Content-Type: application/json)."
        case .dataCorrupted(let context):
            return "The request body is not valid: \(path(context)) holds a value of the wrong form."
        @unknown default:
            return "The request body is not valid JSON for this request."
        }
    }

    private static func typeName(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Int.Type, is Int64.Type: "an integer"
        case is [Int64].Type: "an array of IDs"
        default: "an object of the expected shape"
        }
    }

    /// A JSON response; `revision` becomes the `ETag`, `location` the `Location` header.
    static func json(
        _ value: some Encodable, status: HTTPResponse.Status = .ok, revision: Int? = nil, location: String? = nil
    ) throws -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        encoder.dateEncodingStrategy = .iso8601
        var headers: HTTPFields = [.contentType: "application/json; charset=utf-8"]
        if let revision { headers[.eTag] = ETag.header(for: revision) }
        if let location { headers[.location] = location }
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: try encoder.encode(value))))
    }
}
