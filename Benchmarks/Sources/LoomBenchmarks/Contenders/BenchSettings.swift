import GRDB

/// The SQLite settings every contender runs with. Loom's store sets WAL and
/// `synchronous` itself and leaves page and cache size at SQLite's defaults; the raw and GRDB
/// contenders set all four explicitly to those same values, and the report reads them back
/// from every contender's connection (``SettingsCheck``).
enum BenchSettings {
    static let pageSize = 4096
    /// Negative: KiB. -2000 is SQLite's default (about 2 MB of page cache per connection).
    static let cacheSize = -2000
    /// Readers per pool; Loom's default `maximumReaderCount`.
    static let maximumReaderCount = 4

    static func pragmas(synchronous: String) -> [String] {
        [
            "PRAGMA page_size = \(pageSize)",
            "PRAGMA journal_mode = WAL",
            "PRAGMA synchronous = \(synchronous)",
            "PRAGMA cache_size = \(cacheSize)",
        ]
    }

    /// Opens a GRDB `DatabasePool` with the benchmark's settings.
    ///
    /// `synchronous` is set again on the writer after opening: `DatabasePool` runs
    /// `prepareDatabase` first and then, switching the writer to WAL, sets `synchronous = NORMAL`
    /// on it, so a `FULL` set in `prepareDatabase` alone never reaches the connection that
    /// commits (readers keep it, which hides the problem from a pragma read on a reader).
    static func openPool(_ path: String, synchronous: String = "NORMAL") throws -> DatabasePool {
        let pool = try DatabasePool(path: path, configuration: grdbConfiguration(synchronous: synchronous))
        if synchronous != "NORMAL" {
            try pool.writeWithoutTransaction { try $0.execute(sql: "PRAGMA synchronous = \(synchronous)") }
        }
        return pool
    }

    /// A GRDB configuration with the same settings (`DatabasePool` turns WAL on itself).
    static func grdbConfiguration(synchronous: String = "NORMAL") -> Configuration {
        var configuration = Configuration()
        configuration.maximumReaderCount = maximumReaderCount
        configuration.journalMode = .wal
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA page_size = \(pageSize)")
            try db.execute(sql: "PRAGMA synchronous = \(synchronous)")
            try db.execute(sql: "PRAGMA cache_size = \(cacheSize)")
        }
        return configuration
    }
}
