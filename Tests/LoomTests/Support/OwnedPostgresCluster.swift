import Foundation
import LoomPostgreSQL

/// A PostgreSQL cluster of one test's own (`scripts/postgres-cluster`), for tests that stop the
/// server, start it again, or end its sessions: the shared test server is never touched.
/// Stopped and deleted with the value.
///
/// `@unchecked Sendable`: its state (a folder and a URL) is fixed at init.
final class OwnedPostgresCluster: @unchecked Sendable {
    let folder: String
    let url: String
    private static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../../scripts/postgres-cluster").standardized.path

    /// Starts a cluster; `options` are the script's environment options (`LOOM_POSTGRES_TLS`,
    /// `LOOM_POSTGRES_PASSWORD`: see `scripts/postgres-cluster`).
    init(options: [String: String] = [:]) throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("loom-owned-\(UUID().uuidString.prefix(8))").path
        url = try Self.run("start", folder, options: options).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    deinit { _ = try? Self.run("stop", folder) }

    /// A configuration for a new store on this cluster, with `timeout` as its
    /// ``PostgreSQLStore/Configuration/responseTimeout`` and
    /// ``PostgreSQLStore/Configuration/connectTimeout``.
    func configuration(timeout: Duration) throws -> PostgreSQLStore.Configuration {
        var configuration = try PostgreSQLStore.Configuration(url: url)
        configuration.responseTimeout = timeout
        configuration.connectTimeout = timeout
        return configuration
    }

    /// Stops the server as an administrator would (`pg_ctl stop -m fast`): every session ends.
    func halt() throws { _ = try Self.run("halt", folder) }

    /// Starts the stopped server again, on the same socket.
    func resume() throws { _ = try Self.run("resume", folder) }

    /// Runs `text` with `psql` on a connection of its own and returns its rows, one line each.
    @discardableResult
    func sql(_ text: String) throws -> [String] {
        // Over the socket, as the trusted `postgres`: the cluster's URL may ask for TLS the
        // server has turned off, or for a role that needs a password.
        let port = URLComponents(string: url)?.port ?? 5432
        let socket = "postgres://postgres@localhost:\(port)/postgres?host=\(folder)"
        return try Self.sql(text, at: socket)
    }

    /// Runs `text` with `psql` on a connection of its own to `url` (the shared test server's,
    /// say) and returns its rows, one line each.
    @discardableResult
    static func sql(_ text: String, at url: String) throws -> [String] {
        let psql = try execute(bin + "/psql", ["-X", "-A", "-t", "-q", "-c", text, url], what: "psql")
        return psql.split(separator: "\n").map(String.init)
    }

    /// The server process of every session the stores opened (`application_name` loom).
    func storeSessions() throws -> [Int32] {
        try sql("SELECT pid FROM pg_stat_activity WHERE application_name = 'loom'").compactMap { Int32($0) }
    }

    /// Ends every session the stores opened, from another connection (`pg_terminate_backend`);
    /// returns how many it ended.
    @discardableResult
    func terminateStoreSessions() throws -> Int {
        try sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'loom'").filter { $0 == "t" }.count
    }

    private static let bin = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql"))
        .flatMap { $0.sorted { $0.compare($1, options: .numeric) == .orderedAscending }.last }.map { "/usr/lib/postgresql/\($0)/bin" } ?? "/usr/bin"

    private static func run(_ command: String, _ folder: String, options: [String: String] = [:]) throws -> String {
        try execute("/bin/bash", [script, command, folder], what: "postgres-cluster \(command)", options: options)
    }

    /// Runs a program with ``ChildProcess`` (not Foundation's `Process`, whose waits can hang
    /// when tests start processes in parallel) and returns its standard output.
    private static func execute(_ path: String, _ arguments: [String], what: String, options: [String: String] = [:]) throws -> String {
        let output = try ChildProcess.run(path, arguments, environment: ProcessInfo.processInfo.environment.merging(options) { $1 })
        guard output.status == 0 else {
            throw CocoaError(.executableLoad, userInfo: [
                NSLocalizedDescriptionKey: "\(what) failed (\(output.status)): \(String(decoding: output.standardError, as: UTF8.self))",
            ])
        }
        return String(decoding: output.standardOutput, as: UTF8.self)
    }
}
