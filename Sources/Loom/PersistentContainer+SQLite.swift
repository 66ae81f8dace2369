public import Foundation

/// Where a container keeps its store.
public enum StoreLocation: Sendable {
    /// A SQLite file at this URL (created if missing).
    case file(URL)
    /// The default file for the container's name: `$XDG_DATA_HOME/Loom/<name>.loom`
    /// (`~/.local/share/Loom/<name>.loom` when `XDG_DATA_HOME` is not set).
    case defaultFile
    /// An `InMemoryStore`: nothing is written to disk. For tests and previews.
    case inMemory
}

extension PersistentContainer {
    /// Creates a container for these model types, with a SQLite store by default.
    ///
    /// ```swift
    /// let container = try PersistentContainer(name: "Library", for: Author.self, Book.self)
    /// let tests = try PersistentContainer(name: "Library", for: Book.self, location: .inMemory)
    /// ```
    ///
    /// - Throws: `LoomError` when the model is invalid or the store cannot be opened (see
    ///   `SQLiteStore/init(url:schema:options:)` for the cases).
    public convenience init(
        name: String, for types: any PersistentModel.Type..., location: StoreLocation = .defaultFile,
        options: SQLiteStore.Options = SQLiteStore.Options()
    ) throws(LoomError) {
        let schema = try Schema(types)
        switch location {
        case .inMemory:
            self.init(store: InMemoryStore(schema: schema))
        case .file(let url):
            self.init(store: try SQLiteStore(url: url, schema: schema, options: options))
        case .defaultFile:
            let url = try Self.defaultStoreURL(name: name)
            self.init(store: try SQLiteStore(url: url, schema: schema, options: options))
        }
    }

    /// The file a container named `name` uses by default, creating its folder.
    public static func defaultStoreURL(name: String) throws(LoomError) -> URL {
        let environment = ProcessInfo.processInfo.environment
        let base = environment["XDG_DATA_HOME"].map { URL(filePath: $0) }
            ?? FileManager.default.homeDirectoryForCurrentUser.appending(path: ".local/share")
        let folder = base.appending(path: "Loom")
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        } catch {
            throw LoomError(.storeFailure, "The folder \(folder.path) for the store could not be created.", path: folder.path, underlying: error)
        }
        return folder.appending(path: "\(name).loom")
    }
}
