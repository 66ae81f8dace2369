import Foundation
import GRDB
import Testing

/// `loom demo`, run as the built executable: a second run on the same store updates it in place.
@Suite(.ownThreads) struct DemoCommandTests {
    @Test func aSecondRunUpdatesTheStoreInsteadOfReplacingIt() async throws {
        let store = TemporaryDirectory.make().appending(path: "demo.loom").path
        let first = try await LoomExecutable.run(["demo", "--store", store])
        try #require(first.status == 0, "\(first.standardError)")

        // Between the runs: one package changed, one gone, one that is not installed added.
        let queue = try DatabaseQueue(path: store)
        let (total, changed) = try await queue.write { db -> (Int, String) in
            let total = try Int.fetchOne(db, sql: #"SELECT COUNT(*) FROM "InstalledPackage""#) ?? 0
            let names = try String.fetchAll(db, sql: #"SELECT "name" FROM "InstalledPackage" ORDER BY "Z_PK" LIMIT 2"#)
            try db.execute(sql: #"UPDATE "InstalledPackage" SET "version" = '0-old', "Z_OPT" = "Z_OPT" + 1 WHERE "name" = ?"#, arguments: [names[0]])
            let gone = try Int64.fetchOne(db, sql: #"SELECT "Z_PK" FROM "InstalledPackage" WHERE "name" = ?"#, arguments: [names[1]]) ?? 0
            try db.execute(sql: #"DELETE FROM "PackageDependency" WHERE "Z_package" = ?"#, arguments: [gone])
            try db.execute(sql: #"UPDATE "PackageDependency" SET "Z_target" = NULL WHERE "Z_target" = ?"#, arguments: [gone])
            try db.execute(sql: #"DELETE FROM "InstalledPackage" WHERE "Z_PK" = ?"#, arguments: [gone])
            try db.execute(sql: #"INSERT INTO "InstalledPackage" ("Z_PK", "Z_OPT", "name", "architecture", "version", "dependencyCount") VALUES (999999, 1, 'no-longer-installed', 'amd64', '1', 0)"#)
            return (total, names[0])
        }
        try queue.close()

        let second = try await LoomExecutable.run(["demo", "--store", store])
        #expect(second.status == 0, "\(second.standardError)")
        #expect(second.standardOutput.contains("updating it"))
        #expect(!second.standardOutput.contains("replacing"))
        // The first run's batch delete removed a section's packages: they come back too.
        let line = try #require(second.standardOutput.split(separator: "\n").first { $0.hasPrefix("Updated in place") })
        let figures = line.split(separator: ":")[1]
        #expect(figures.contains(" 1 updated"), "\(line)")
        #expect(figures.contains("1 no longer installed deleted"), "\(line)")
        #expect(!figures.contains(" 0 packages inserted"), "\(line)")

        let after = try DatabaseQueue(path: store)
        try await after.read { db in
            #expect(try String.fetchOne(db, sql: #"SELECT "version" FROM "InstalledPackage" WHERE "name" = ?"#, arguments: [changed]) != "0-old")
            #expect(try Int.fetchOne(db, sql: #"SELECT COUNT(*) FROM "InstalledPackage" WHERE "name" = 'no-longer-installed'"#) == 0)
            // The second run's own batch delete removes a section again; the rest is all there.
            let count = try Int.fetchOne(db, sql: #"SELECT COUNT(*) FROM "InstalledPackage""#) ?? 0
            #expect(count >= total - 5 && count <= total + 5)
        }
        try after.close()
    }
}
