import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What a server answered.
struct HTTPReply: Sendable {
    var status: Int
    var headers: [String: String]
    var body: Data

    /// The header `name`, whatever its case.
    func header(_ name: String) -> String? {
        headers.first { $0.key.lowercased() == name.lowercased() }?.value
    }

    /// The body decoded as `type`.
    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return try decoder.decode(T.self, from: body)
    }

    /// The message of an error answer (`{"error":{"message":"…"}}`), or the body as text.
    var message: String {
        struct Failure: Decodable { struct Detail: Decodable { var message: String }; var error: Detail }
        return (try? JSONDecoder().decode(Failure.self, from: body).error.message) ?? String(decoding: body, as: UTF8.self)
    }
}

/// A real HTTP client (Foundation's URLSession, libcurl underneath on Linux) for one server,
/// with no cache: every request reaches the server.
struct HTTPClient: Sendable {
    let base: URL
    private let session: URLSession

    init(port: Int) {
        base = URL(string: "http://127.0.0.1:\(port)")!
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.timeoutIntervalForRequest = 60
        session = URLSession(configuration: configuration)
    }

    /// Sends `method path` with `body` (JSON text) and `headers`.
    func send(_ method: String, _ path: String, body: String? = nil, headers: [String: String] = [:]) async throws -> HTTPReply {
        var request = URLRequest(url: base.appending(path: path))
        request.httpMethod = method
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        if let body {
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = Data(body.utf8)
        }
        let (data, response) = try await session.data(for: request)
        let http = response as! HTTPURLResponse
        var headers: [String: String] = [:]
        for (name, value) in http.allHeaderFields {
            if let name = name as? String, let value = value as? String { headers[name] = value }
        }
        return HTTPReply(status: http.statusCode, headers: headers, body: data)
    }

    func get(_ path: String, headers: [String: String] = [:]) async throws -> HTTPReply {
        try await send("GET", path, headers: headers)
    }

    func post(_ path: String, _ body: String) async throws -> HTTPReply {
        try await send("POST", path, body: body)
    }

    func patch(_ path: String, _ body: String, ifMatch: String? = nil) async throws -> HTTPReply {
        try await send("PATCH", path, body: body, headers: ifMatch.map { ["If-Match": $0] } ?? [:])
    }

    func delete(_ path: String, ifMatch: String? = nil) async throws -> HTTPReply {
        try await send("DELETE", path, headers: ifMatch.map { ["If-Match": $0] } ?? [:])
    }
}
