import Foundation
import Loom
import LoomTools

extension DemoCommand {
    /// SQL logging, as `LOOM_SQL_DEBUG=3` turns it on without code: a container opened with level
    /// 3 and a logger of the demo's, one query across a relationship, and what was logged for it
    /// (the statement, its parameters' types, time, rows and query plan).
    @MainActor
    static func showSQLLogging(at location: Location) async throws {
        let log = LogCollector()
        let saved = (LoomLogging.logger, LoomLogging.sqlDebugLevel, LoomLogging.slowStatementThreshold)
        LoomLogging.logger = log.logger(label: "loom-demo")
        LoomLogging.sqlDebugLevel = 3
        LoomLogging.slowStatementThreshold = .zero   // every statement is "slow": its plan shows
        let container: PersistentContainer
        do {
            container = try await Self.open(location)
        } catch {
            (LoomLogging.logger, LoomLogging.sqlDebugLevel, LoomLogging.slowStatementThreshold) = saved
            throw error
        }
        // A store reads the settings when it opens: the rest of the demo logs nothing.
        (LoomLogging.logger, LoomLogging.sqlDebugLevel, LoomLogging.slowStatementThreshold) = saved
        let before = log.all.count
        let target = "libc6"
        let count = try container.viewContext.count(for: FetchRequest<InstalledPackage>(
            predicate: #Predicate { $0.dependencies.contains { $0.targetName == target } }))
        try await container.close()
        let logged = log.all[before...].map(\.message).filter { $0.hasPrefix("SELECT") }
        print("\nSQL logging (LOOM_SQL_DEBUG=3; here every statement counts as slow, so its plan shows): counting the \(count) packages that depend on libc6 logged")
        for message in logged {
            print(message.split(separator: "\n").map { "  " + $0 }.joined(separator: "\n"))
        }
    }
}
