import Foundation
import Logging
import Loom
@_spi(LoomStore) import LoomCore
import LoomPostgreSQL
import LoomTools
import NIOPosix
import PostgresNIO
import Testing

/// `loom verify` on a PostgreSQL store's history, damaged with raw SQL on the server.
@MainActor
@Suite(.enabled(if: PostgresServer.isEnabled && LoomExecutable.opensPostgreSQL), .ownThreads)
struct PostgreSQLVerifyTests {
    @Test func historyTheStoreCannotReadIsAFinding() async throws {
        let location = try DumpLoadTests.newLocation(.postgres)
        let configuration = try PostgreSQLStore.Configuration(url: location)
        try PostgreSQLStore(configuration: configuration, schema: try Schema(DumpLoadTests.types)).close()
        let logger = Logger(label: "test")
        let connection = try await PostgresConnection.connect(
            on: MultiThreadedEventLoopGroup.singleton.next(), configuration: try configuration.connectionConfiguration, id: 1, logger: logger)
        _ = try await connection.query("""
            INSERT INTO \(unescaped: configuration.schemaName).loom_history (number, timestamp, process, processname, entities, changes) \
            VALUES (1, 0, 1, 'test', ',Tag,', '\\xff0013'::bytea)
            """, logger: logger)
        try await connection.close()
        let output = try await LoomExecutable.run(["verify", "--json", location])
        #expect(output.status == 1, "\(output.standardOutput)\(output.standardError)")
        let report = try JSONDecoder().decode(VerificationReport.self, from: Data(output.standardOutput.utf8))
        #expect(report.findings.map(\.kind) == [.malformedHistory], "\(report.findings)")
        #expect(report.findings.first?.message.contains("History transaction #1 ") == true, "\(report.findings)")
    }
}
