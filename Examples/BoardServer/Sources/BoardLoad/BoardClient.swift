import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

/// The board API as the load generator speaks it: requests to one of the servers, answers as a
/// status, an ETag and a body.
///
/// Sendable: async-http-client's client is, and it pools connections to each server for every
/// worker at once.
struct BoardClient: Sendable {
    /// What a server answered.
    struct Reply: Sendable {
        var status: Int
        var etag: String?
        var body: ByteBuffer

        /// The body decoded as `type`, or `nil` when it is not that JSON.
        func decode<T: Decodable>(_ type: T.Type) -> T? {
            try? JSONDecoder().decode(T.self, from: Data(body.readableBytesView))
        }
    }

    /// A request that got no answer: the connection failed or closed, or the time ran out. A
    /// write's outcome is then unknown.
    struct TransportFailure: Error, Sendable {
        var summary: String
    }

    let http: HTTPClient
    let servers: [String]
    let timeout: TimeAmount

    init(servers: [String], connectionsPerServer: Int, timeout: Duration) {
        var configuration = HTTPClient.Configuration()
        // Every worker may have a request open to each server: no worker waits for a connection.
        configuration.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: connectionsPerServer)
        // A server that refuses connections (killed) fails its requests at once, as a load
        // balancer's health check would take it out, instead of holding them while the pool
        // retries to connect until their deadline.
        configuration.connectionPool.retryConnectionEstablishment = false
        configuration.httpVersion = .http1Only
        configuration.timeout = .init(connect: .seconds(10))
        http = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
        self.servers = servers
        let (seconds, attoseconds) = timeout.components
        self.timeout = .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }

    /// Sends `method path` to server number `server` (modulo their count), with `body` as JSON
    /// and `ifMatch` as the `If-Match` header.
    func send(
        _ method: HTTPMethod, _ path: String, to server: Int, body: (some Encodable)? = String?.none, ifMatch: String? = nil
    ) async throws(TransportFailure) -> Reply {
        var request = HTTPClientRequest(url: servers[server % servers.count] + path)
        request.method = method
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            let data: Data
            do { data = try JSONEncoder().encode(body) } catch { throw TransportFailure(summary: "the body could not be encoded") }
            request.body = .bytes(ByteBuffer(bytes: data))
        }
        if let ifMatch { request.headers.add(name: "If-Match", value: ifMatch) }
        do {
            let response = try await http.execute(request, timeout: timeout)
            let body = try await response.body.collect(upTo: 64 << 20)
            return Reply(status: Int(response.status.code), etag: response.headers.first(name: "ETag"), body: body)
        } catch {
            throw TransportFailure(summary: Self.summary(of: error))
        }
    }

    /// A short name for a transport failure, to count failures of one kind together.
    static func summary(of error: any Error) -> String {
        if let error = error as? HTTPClientError {
            switch error {
            case .deadlineExceeded, .readTimeout, .writeTimeout: return "timed out"
            case .connectTimeout: return "connect timed out"
            case .remoteConnectionClosed: return "connection closed"
            default: return "http client: \(error)"
            }
        }
        let text = String(describing: error)
        if text.contains("refused") { return "connection refused" }
        if text.contains("reset") || text.contains("Broken pipe") { return "connection reset" }
        if text.contains("losed") || text.contains("eof") || text.contains("EOF") { return "connection closed" }
        return String(text.prefix(80))
    }

    /// Closes the client's connections.
    func shutdown() async {
        try? await http.shutdown()
    }
}

/// A card as the API represents it (the fields the load generator reads).
struct CardReply: Decodable, Sendable {
    var id: Int64
    var board: Int64
    var title: String
    var details: String
    var position: Int
    var revision: Int
}

/// A board as the API represents it.
struct BoardReply: Decodable, Sendable {
    var id: Int64
    var name: String
}

/// The body of a new card or of a card's change: fields left `nil` are not sent.
struct CardBody: Encodable, Sendable {
    var title: String?
    var details: String?
    var position: Int?
}

/// The body of a new board.
struct BoardBody: Encodable, Sendable {
    var name: String
}
