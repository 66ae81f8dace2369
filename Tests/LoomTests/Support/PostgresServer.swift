import Testing
import Foundation
import Loom
import LoomPostgreSQL

/// The PostgreSQL server the tests use: the one `./scripts/test` starts (a throwaway cluster,
/// `scripts/postgres-cluster`) and names in `LOOM_TEST_POSTGRES_URL`. Each store gets a schema
/// of its own, so tests share the server without seeing each other's tables.
enum PostgresServer {
    static let url: String? = ProcessInfo.processInfo.environment["LOOM_TEST_POSTGRES_URL"].flatMap { $0.isEmpty ? nil : $0 }

    /// Whether the PostgreSQL cases run: a server is named, or this is CI (where a missing
    /// server must fail the PostgreSQL cases, not skip them); `LOOM_TEST_POSTGRES=off` turns
    /// them off on purpose (a run that covers them in another invocation).
    static let isEnabled: Bool = {
        if ProcessInfo.processInfo.environment["LOOM_TEST_POSTGRES"] == "off" { return false }
        if url != nil { return true }
        if ProcessInfo.processInfo.environment["CI"] == "true" { return true }
        FileHandle.standardError.write(Data("""

            ************************************************************************************
            * PostgreSQL tests SKIPPED: LOOM_TEST_POSTGRES_URL is not set. ./scripts/test starts *
            * a throwaway server and sets it; or point it at a server you own.                  *
            ************************************************************************************

            """.utf8))
        return false
    }()

    /// Why the PostgreSQL cases are skipped, when they are. Reads the environment only, so that
    /// listing the tests does not decide ``isEnabled`` (and print its banner).
    static var skipReason: Comment {
        if ProcessInfo.processInfo.environment["LOOM_TEST_POSTGRES"] == "off" {
            return "PostgreSQL skipped: LOOM_TEST_POSTGRES=off (another run covers it)"
        }
        return "PostgreSQL skipped: LOOM_TEST_POSTGRES_URL is not set (./scripts/test starts a server)"
    }

    /// Runs a PostgreSQL-only suite or test only when the PostgreSQL cases run, saying why not.
    static var required: ConditionTrait { .enabled(if: isEnabled, skipReason) }

    /// Returns when the PostgreSQL cases run; otherwise records a warning that says why and
    /// cancels the current test case, so that a run without a server says so in its summary
    /// ("passed … with N warnings") instead of passing on the other stores alone.
    static func requireServer() throws {
        guard !isEnabled else { return }
        guard Test.current != nil else { throw LoomError(.storeFailure, skipReason.rawValue) }
        Issue.record(skipReason, severity: .warning)
        try Test.cancel(skipReason)
    }

    /// A configuration for a new, empty store: a schema of its own on the test server. Outside a
    /// PostgreSQL run it skips the current test case (``requireServer()``).
    static func configuration(trace: (@Sendable (String) -> Void)? = nil, recordsHistory: Bool = true) throws -> PostgreSQLStore.Configuration {
        try requireServer()
        guard let url else {
            throw LoomError(.storeFailure, "No PostgreSQL server for the tests: LOOM_TEST_POSTGRES_URL is not set (./scripts/test starts one).")
        }
        var configuration = try PostgreSQLStore.Configuration(url: url)
        configuration.schemaName = "test_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(20)
        configuration.trace = trace
        configuration.recordsHistory = recordsHistory
        return configuration
    }

    /// A new, empty store of `schema`.
    static func makeStore(_ schema: Schema, trace: (@Sendable (String) -> Void)? = nil) throws -> PostgreSQLStore {
        try PostgreSQLStore(configuration: configuration(trace: trace), schema: schema)
    }
}
