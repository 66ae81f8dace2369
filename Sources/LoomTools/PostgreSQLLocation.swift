@_spi(LoomStore) package import LoomCore

/// The tool's PostgreSQL support, the one place it depends on `LoomPostgreSQL`: stores given as
/// `postgres://` URLs. Compiled only with the package's `PostgreSQL` trait (`swift run --traits
/// PostgreSQL loom …`), so that the tool's default build links no postgres-nio and no TLS stack;
/// without it, opening a PostgreSQL URL throws ``unavailable(_:)``. Everything the tool does only
/// on PostgreSQL goes here, behind `#if PostgreSQL`: a store given as a URL is opened here, and
/// only here; every verb then reaches it through the store SPI (``StoreMaintenance``).
package enum PostgreSQLLocation {
    /// Whether the tool was built with the `PostgreSQL` trait.
    #if PostgreSQL
    package static let isAvailable = true
    #else
    package static let isAvailable = false
    #endif

    /// Whether `location` is a PostgreSQL URL rather than a file path.
    package static func isURL(_ location: String) -> Bool {
        location.hasPrefix("postgres://") || location.hasPrefix("postgresql://")
    }

    /// The refusal of a PostgreSQL URL by a tool built without the `PostgreSQL` trait.
    package static func unavailable(_ location: String) -> LoomError {
        LoomError(.storeFailure, "\(CredentialRedaction.redacting(location)) is a PostgreSQL URL, and this loom was built without PostgreSQL support: build or run it with the PostgreSQL trait (swift run --traits PostgreSQL loom …).")
    }
}

#if PostgreSQL
@_spi(LoomStore) import LoomPostgreSQL
#endif

extension PostgreSQLLocation {
    /// The schema record and metadata the store at `url` saved, read without opening it.
    ///
    /// - Throws: `LoomError` when the URL is malformed, the store cannot be read, or the tool was
    ///   built without the `PostgreSQL` trait (``unavailable(_:)``).
    package static func savedState(_ url: String) throws(LoomError) -> (record: SchemaRecord, metadata: [String: String]) {
        #if PostgreSQL
        try PostgreSQLStore.savedState(configuration: try PostgreSQLStore.Configuration(url: url))
        #else
        throw unavailable(url)
        #endif
    }

    /// The store at `url`, opened with the schema it saved, to read.
    ///
    /// - Throws: `LoomError` when the URL is malformed, the store cannot be opened, or the tool
    ///   was built without the `PostgreSQL` trait (``unavailable(_:)``).
    package static func open(_ url: String, schema: Schema) throws(LoomError) -> any PersistentStore {
        #if PostgreSQL
        try PostgreSQLStore(configuration: try PostgreSQLStore.Configuration(url: url), schema: schema)
        #else
        throw unavailable(url)
        #endif
    }

    /// Opens the existing store at `url` with the schema saved in it, without migrating or
    /// creating anything.
    ///
    /// - Throws: `LoomError` when the URL is malformed, the server cannot be reached
    ///   (``LoomError/Code/storeFailure``), its schema holds no Loom store
    ///   (``LoomError/Code/notALoomStore``), or the tool was built without the `PostgreSQL`
    ///   trait (``unavailable(_:)``).
    package static func openExisting(_ url: String) throws(LoomError) -> any StoreMaintenance {
        #if PostgreSQL
        let configuration = try PostgreSQLStore.Configuration(url: url)
        let state = try PostgreSQLStore.savedState(configuration: configuration)
        return try PostgreSQLStore(configuration: configuration, schema: try Schema(record: state.record))
        #else
        throw unavailable(url)
        #endif
    }

    /// Opens the store at `url` to load a dump of `schema` into: a new one when its PostgreSQL
    /// schema holds none; an existing one only when it was made with the same schema (a bulk load
    /// then refuses it unless it is empty).
    ///
    /// - Throws: ``LoomToolError/Code/destinationExists`` when a store of another schema is
    ///   there; `LoomError` when the URL is malformed, the server cannot be reached, or the tool
    ///   was built without the `PostgreSQL` trait (``unavailable(_:)``).
    package static func openForLoading(_ url: String, schema: Schema) throws -> any StoreMaintenance {
        #if PostgreSQL
        let configuration = try PostgreSQLStore.Configuration(url: url)
        if let saved = try? PostgreSQLStore.savedState(configuration: configuration), saved.record.versionHash != schema.versionHash {
            throw LoomToolError(.destinationExists, "\(CredentialRedaction.redacting(url)) holds a Loom store of another schema; load makes a new store: choose another schema (?schema=name).")
        }
        return try PostgreSQLStore(configuration: configuration, schema: schema)
        #else
        throw unavailable(url)
        #endif
    }
}
