import Foundation
public import Loom
import LoomPostgreSQL

/// Where the server keeps its boards.
public enum BoardDatabase: Sendable {
    /// A SQLite file (created if missing): one server process.
    case sqlite(path: String)
    /// A PostgreSQL database, as `postgres://user@host:port/database?schema=name`: several server
    /// processes on one database.
    case postgreSQL(url: String)

    /// Opens the store, migrating it to this server's model if it was made by an older one.
    ///
    /// Callable from any isolation; it blocks the caller while the store opens (and, on
    /// PostgreSQL, while the server answers).
    ///
    /// - Throws: `LoomError` when the store cannot be opened: the file is not a Loom store, the
    ///   server cannot be reached, the URL is malformed.
    public func openContainer() throws(LoomError) -> PersistentContainer {
        let schema = try Schema(boardModels)
        switch self {
        case .sqlite(let path):
            return PersistentContainer(store: try SQLiteStore(url: URL(filePath: path), schema: schema))
        case .postgreSQL(let url):
            let configuration = try PostgreSQLStore.Configuration(url: url)
            return PersistentContainer(store: try PostgreSQLStore(configuration: configuration, schema: schema))
        }
    }
}
