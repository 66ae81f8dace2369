@_spi(LoomStore) import LoomCore
@_spi(LoomStore) import LoomPostgreSQL

/// Where the `loom` verbs meet PostgreSQL: a store given as a `postgres://` URL is opened here,
/// and only here; every verb then reaches it through the store SPI (``StoreMaintenance``).
enum PostgreSQLStores {
    /// Whether `location` names a PostgreSQL store (`postgres://…` or `postgresql://…`).
    static func isURL(_ location: String) -> Bool {
        location.hasPrefix("postgres://") || location.hasPrefix("postgresql://")
    }

    /// Opens the existing store at `url` with the schema saved in it, without migrating or
    /// creating anything.
    ///
    /// - Throws: `LoomError` when the URL is malformed, the server cannot be reached
    ///   (``LoomError/Code/storeFailure``) or its schema holds no Loom store
    ///   (``LoomError/Code/notALoomStore``).
    static func openExisting(_ url: String) throws(LoomError) -> any StoreMaintenance {
        let configuration = try PostgreSQLStore.Configuration(url: url)
        let state = try PostgreSQLStore.savedState(configuration: configuration)
        return try PostgreSQLStore(configuration: configuration, schema: try Schema(record: state.record))
    }

    /// Opens the store at `url` to load a dump of `schema` into: a new one when its PostgreSQL
    /// schema holds none; an existing one only when it was made with the same schema (a bulk load
    /// then refuses it unless it is empty).
    ///
    /// - Throws: ``LoomToolError/Code/destinationExists`` when a store of another schema is
    ///   there; `LoomError` when the URL is malformed or the server cannot be reached.
    static func openForLoading(_ url: String, schema: Schema) throws -> any StoreMaintenance {
        let configuration = try PostgreSQLStore.Configuration(url: url)
        if let saved = try? PostgreSQLStore.savedState(configuration: configuration), saved.record.versionHash != schema.versionHash {
            throw LoomToolError(.destinationExists, "\(url) holds a Loom store of another schema; load makes a new store: choose another schema (?schema=name).")
        }
        return try PostgreSQLStore(configuration: configuration, schema: schema)
    }
}
