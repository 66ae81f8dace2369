import ArgumentParser
import Foundation
import Hummingbird
import Logging
import PostgresNIO

/// `board-server-raw`: the board API's endpoints that the load generator uses, written by hand on
/// postgres-nio, as the baseline that Loom's server is measured against. Serves until SIGINT or
/// SIGTERM.
@main
struct RawServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "board-server-raw",
        abstract: "The board API's load endpoints by hand on postgres-nio: the baseline of board-load.",
        discussion: """
            Serves POST /boards, GET /boards/:id, GET and POST /boards/:id/cards, GET and PATCH \
            /cards/:id and GET /health with the JSON, ETags and errors of board-server, on \
            PostgreSQL only. Optimistic locking is a version column checked in the UPDATE's WHERE.
            """)

    @Option(help: "The address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "The port to listen on; 0 for any free port.")
    var port = 8080

    @Option(help: ArgumentHelp(
        "The PostgreSQL URL: postgres://user@host:5432/database?schema=boards (host=/folder for a Unix socket).",
        discussion: "BOARD_SERVER_POSTGRES_URL is read when this is not given."))
    var postgres: String?

    @Option(help: "How many connections the pool may open (5: as many as Loom's store uses, 4 readers and 1 writer).")
    var connections = 5

    @Option(help: "A file to write the port to once the server accepts connections (for scripts and tests).")
    var portFile: String?

    func validate() throws {
        guard (1...200).contains(connections) else { throw ValidationError("--connections must be from 1 to 200, not \(connections).") }
    }

    func run() async throws {
        guard let url = postgres ?? ProcessInfo.processInfo.environment["BOARD_SERVER_POSTGRES_URL"] else {
            throw ValidationError("Give --postgres URL (or BOARD_SERVER_POSTGRES_URL): this server runs on PostgreSQL only.")
        }
        let database = try RawDatabaseURL(url)
        var configuration = database.clientConfiguration
        configuration.options.maximumConnections = connections
        let logger = Logger(label: "board-server-raw")
        let client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        let api = RawBoardAPI(client: client, schema: database.schema, logger: logger)
        let portFile = portFile
        let host = host
        var app = Application(
            router: api.router(),
            configuration: ApplicationConfiguration(address: .hostname(host, port: port), serverName: "BoardServerRaw"),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? 0
                print("board-server-raw: listening on http://\(host):\(port)")
                if let portFile { try? "\(port)\n".write(toFile: portFile, atomically: true, encoding: .utf8) }
            },
            logger: logger)
        app.addServices(client)
        app.beforeServerStarts { try await api.createTables() }
        try await app.runService()
    }
}

/// A PostgreSQL URL as board-server reads it (`postgres://user:password@host:port/database?schema=name`,
/// `host=/folder` for a Unix socket there), for postgres-nio.
struct RawDatabaseURL {
    var clientConfiguration: PostgresClient.Configuration
    var schema: String

    init(_ text: String) throws {
        guard let components = URLComponents(string: text), ["postgres", "postgresql"].contains(components.scheme ?? "") else {
            throw ValidationError("That is not a PostgreSQL URL: write postgres://user@host:port/database.")
        }
        func item(_ name: String) -> String? { components.queryItems?.first { $0.name == name }?.value }
        let port = components.port ?? 5432
        let user = components.user ?? "postgres"
        let password = components.password ?? ProcessInfo.processInfo.environment["PGPASSWORD"]
        let database = components.path.split(separator: "/").first.map(String.init)
        if let folder = item("host"), folder.hasPrefix("/") {
            clientConfiguration = .init(unixSocketPath: folder + "/.s.PGSQL.\(port)", username: user, password: password, database: database)
        } else {
            clientConfiguration = .init(host: components.host ?? "localhost", port: port, username: user, password: password, database: database, tls: .disable)
        }
        schema = item("schema") ?? "public"
        guard !schema.isEmpty, schema.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }) else {
            throw ValidationError("The schema must be ASCII letters, digits and '_', not '\(schema)'.")
        }
        // Every session starts with the schema first on its search path: the queries name tables alone.
        clientConfiguration.options.additionalStartupParameters = [("search_path", "\"\(schema)\"")]
    }
}
