import ArgumentParser
import BoardAPI
import Foundation
import Hummingbird

/// `board-server`: serves the board API until SIGINT or SIGTERM, then closes its store.
@main
struct BoardServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "board-server",
        abstract: "A JSON API over boards, cards, comments and labels, kept by Loom.",
        discussion: """
            SQLite by default (one server process on a file); with --postgres or \
            BOARD_SERVER_POSTGRES_URL, PostgreSQL (several server processes on one database).
            """)

    @Option(help: "The address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "The port to listen on; 0 for any free port.")
    var port = 8080

    @Option(help: "The SQLite file that keeps the boards (created if missing).")
    var store = "boards.loom"

    @Option(help: ArgumentHelp(
        "A PostgreSQL URL instead of a SQLite file: postgres://user@host:5432/database?schema=boards.",
        discussion: "BOARD_SERVER_POSTGRES_URL is read when this is not given, so that a password need not be on the command line."))
    var postgres: String?

    @Option(help: "How often, in seconds, a live stream sends a heartbeat (a comment line).")
    var heartbeat = 15.0

    @Option(help: "A file to write the port to once the server accepts connections (for scripts and tests).")
    var portFile: String?

    func validate() throws {
        guard heartbeat > 0, heartbeat <= 3600 else {
            throw ValidationError("--heartbeat must be more than 0 and at most 3600 seconds, not \(heartbeat).")
        }
    }

    func run() async throws {
        let postgresURL = postgres ?? ProcessInfo.processInfo.environment["BOARD_SERVER_POSTGRES_URL"]
        let database: BoardDatabase = postgresURL.map { .postgreSQL(url: $0) } ?? .sqlite(path: store)
        let container = try database.openContainer()
        let portFile = portFile
        let host = host
        let app = BoardAPI(container: container, heartbeat: .milliseconds(Int(heartbeat * 1000))).application(host: host, port: port) { port in
            print("board-server: listening on http://\(host):\(port)")
            if let portFile {
                try? "\(port)\n".write(toFile: portFile, atomically: true, encoding: .utf8)
            }
        }
        do {
            try await app.runService()
        } catch {
            try? await container.close()
            throw error
        }
        try await container.close()
    }
}
