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
