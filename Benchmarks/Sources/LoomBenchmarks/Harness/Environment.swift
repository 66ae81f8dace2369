#if canImport(CBenchSupport)
import CBenchSupport  // built by Loom's own package
#else
import CBenchSupportStandalone  // built by Benchmarks/Package.swift
#endif
import Foundation
import GRDB
import Loom

/// The settings read back from one contender's connection.
struct ConnectionSettings: Codable, Sendable {
    var pageSize: String
    var cacheSize: String
    var journalMode: String
    var synchronous: String
}

/// The machine and SQLite the run happened on.
struct EnvironmentInfo: Codable, Sendable {
    var date: String
    var cores: Int
    var memoryGiB: Double
    var kernel: String
    var loadAverageAtStart: String
    var loadAverageAtEnd: String?
    var sqliteVersion: String
    /// Every SQLite library mapped into the process: one means every contender uses the same.
    var sqliteLibraries: [String]
    var settings: [String: ConnectionSettings]
    /// The SQLite Fluent's SQLite driver links, when this build has Fluent: sqlite-nio's own
    /// amalgamation, compiled into the binary (so not among `sqliteLibraries`).
    var fluentSQLiteVersion: String?
    var loomPath: String
    var loomRevision: String

    @MainActor
    static func collect(bench: Bench) throws -> EnvironmentInfo {
        let info = ProcessInfo.processInfo
        return EnvironmentInfo(
            date: ISO8601DateFormatter().string(from: Date()),
            cores: info.activeProcessorCount,
            memoryGiB: (Double(info.physicalMemory) / 1_073_741_824 * 10).rounded() / 10,
            kernel: info.operatingSystemVersionString,
            loadAverageAtStart: loadAverage(),
            sqliteVersion: RawDatabase.libraryVersion,
            sqliteLibraries: sqliteLibraries(),
            settings: try settings(bench: bench),
            fluentSQLiteVersion: fluentSQLiteVersion,
            loomPath: loomPath,
            loomRevision: revision(of: loomPath))
    }

    static func loadAverage() -> String {
        (procFile("/proc/loadavg") ?? "?").split(separator: " ").prefix(3).joined(separator: " ")
    }

    /// A /proc file read to its end (their reported size is 0, so read until EOF).
    static func procFile(_ path: String) -> String? {
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        return String(decoding: handle.readDataToEndOfFile(), as: UTF8.self)
    }

    /// The distinct files in /proc/self/maps whose name contains "sqlite".
    static func sqliteLibraries() -> [String] {
        guard let maps = procFile("/proc/self/maps") else { return [] }
        var paths = Set<String>()
        for line in maps.split(separator: "\n") {
            guard let slash = line.firstIndex(of: "/") else { continue }
            let path = String(line[slash...])
            if path.lowercased().contains("sqlite") { paths.insert(path) }
        }
        return paths.sorted()
    }

    /// The Loom checkout this binary was built against (`LOOM_PATH` when building, else this
    /// repository), as Package.swift recorded it.
    static var loomPath: String { String(cString: loom_bench_loom_path()) }

    static func revision(of path: String) -> String {
        let process = Process()
        process.executableURL = URL(filePath: "/usr/bin/env")
        process.arguments = ["git", "-C", path, "describe", "--always", "--dirty", "--abbrev=12"]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        do { try process.run() } catch { return "unknown" }
        process.waitUntilExit()
        let text = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        return process.terminationStatus == 0 && !text.isEmpty ? text : "unknown (not a git checkout)"
    }

    /// Opens a new store per contender and reads the four settings back.
    @MainActor
    static func settings(bench: Bench) throws -> [String: ConnectionSettings] {
        var result: [String: ConnectionSettings] = [:]

        let rawPath = bench.newDatabasePath("settings-raw")
        do {
            let db = try RawDatabase(path: rawPath)
            try db.createSchema()
            result[Contender.raw.rawValue] = ConnectionSettings(
                pageSize: try db.scalar("PRAGMA page_size") ?? "?", cacheSize: try db.scalar("PRAGMA cache_size") ?? "?",
                journalMode: try db.scalar("PRAGMA journal_mode") ?? "?", synchronous: try db.scalar("PRAGMA synchronous") ?? "?")
        }
        bench.remove(rawPath)

        let grdbPath = bench.newDatabasePath("settings-grdb")
        do {
            let pool = try BenchSettings.openPool(grdbPath)
            try pool.write { try $0.createItemSchema() }
            // On the writer: the connection that commits (readers may differ, see openPool).
            result[Contender.grdb.rawValue] = try pool.writeWithoutTransaction { db in
                ConnectionSettings(
                    pageSize: try String.fetchOne(db, sql: "PRAGMA page_size") ?? "?",
                    cacheSize: try String.fetchOne(db, sql: "PRAGMA cache_size") ?? "?",
                    journalMode: try String.fetchOne(db, sql: "PRAGMA journal_mode") ?? "?",
                    synchronous: try String.fetchOne(db, sql: "PRAGMA synchronous") ?? "?")
            }
            try pool.close()
        }
        bench.remove(grdbPath)

        let loomPath = bench.newDatabasePath("settings-loom")
        do {
            let container = try PersistentContainer.bench(at: loomPath)
            guard let store = container.coordinator.store as? SQLiteStore else { throw BenchError("Loom's store is not a SQLiteStore") }
            func pragma(_ name: String) throws -> String { try store.unsafePragma(name).map { "\($0)" } ?? "?" }
            result[Contender.loom.rawValue] = ConnectionSettings(
                pageSize: try pragma("page_size"), cacheSize: try pragma("cache_size"),
                journalMode: try pragma("journal_mode"), synchronous: try pragma("synchronous"))
            try container.closeAndWait()
        }
        bench.remove(loomPath)
        if let fluent = try fluentSettings(bench: bench) { result[Contender.fluent.rawValue] = fluent }
        return result
    }
}

/// A benchmark set-up failure.
struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
