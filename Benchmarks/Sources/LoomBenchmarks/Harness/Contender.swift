/// Who runs a workload. GRDB takes part twice: its fastest idiomatic path and its record path.
/// Fluent takes part only in a build that links it (Benchmarks/Package.swift), see
/// ``fluentContenders``.
enum Contender: String, CaseIterable, Codable, Sendable, Comparable {
    /// The SQLite C API: prepared statements reused, rows decoded by hand into structs.
    case raw
    /// GRDB 7, fastest idiomatic path: cached `Statement`s, `Row` cursors read by column index.
    case grdb
    /// GRDB 7, record path: `Codable` `FetchableRecord & PersistableRecord` structs and the
    /// query interface.
    case grdbRecord = "grdb-record"
    /// Vapor's Fluent (fluent-kit 1.57): `Model` classes, its query builder, its SQLite driver
    /// (on sqlite-nio's own SQLite) or PostgreSQL driver, futures waited for on the calling thread.
    case fluent
    /// Loom: `@Model` classes, a `PersistentContainer` with a SQLite file store, contexts.
    case loom

    var label: String {
        switch self {
        case .raw: "raw SQLite"
        case .grdb: "GRDB"
        case .grdbRecord: "GRDB record"
        case .fluent: "Fluent"
        case .loom: "Loom"
        }
    }

    static func < (a: Contender, b: Contender) -> Bool {
        allCases.firstIndex(of: a)! < allCases.firstIndex(of: b)!
    }
}
