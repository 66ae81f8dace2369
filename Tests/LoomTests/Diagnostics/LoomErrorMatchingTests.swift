import Foundation
import Loom
import Testing

/// `catch` clauses match a ``LoomError`` by its code and by its store's code, by name, as
/// Foundation's `CocoaError` codes match (`catch CocoaError.fileNoSuchFile`).
@Suite("LoomError matching")
struct LoomErrorMatchingTests {
    /// Saves a second book with a taken ISBN through another context, so that the duplicate
    /// reaches SQLite's unique index, and returns what the save threw.
    private func duplicateSave() async throws -> (container: PersistentContainer, error: any Error) {
        let container = try StoreKind.sqlite.makeContainer()
        try await container.save { context in context.insert(Book(isbn: "1", title: "First")) }
        let other = container.newBackgroundContext()
        let error = await other.perform { context -> (any Error)? in
            context.insert(Book(isbn: "1", title: "Twin"))
            do { try context.save(); return nil } catch { return error }
        }
        return (container, try #require(error))
    }

    @Test("A catch clause matches a LoomError by its code, its shorthand and its store code")
    func catchClausesMatchCodes() async throws {
        let (container, error) = try await duplicateSave()
        var matched: [String] = []
        do { throw error } catch LoomError.Code.versionConflict { matched.append("versionConflict") } catch LoomError.Code.uniquenessViolation { matched.append("code") } catch {}
        do { throw error } catch LoomError.uniquenessViolation { matched.append("shorthand") } catch {}
        do { throw error } catch StoreErrorCode.sqliteConstraintNotNull { matched.append("notNull") } catch StoreErrorCode.sqliteConstraint { matched.append("store primary") } catch {}
        do { throw error } catch StoreErrorCode.sqliteConstraintUnique { matched.append("store extended") } catch {}
        do { throw error } catch StoreErrorCode.postgresUniqueViolation { matched.append("postgres") } catch {}
        #expect(matched == ["code", "shorthand", "store primary", "store extended"])
        try await container.close()
    }

    @Test("Typed throws match the same way, and a where clause reads a store code by name")
    func typedThrowsAndWhereClauses() async throws {
        let (container, error) = try await duplicateSave()
        let failure = try #require(error as? LoomError)
        var matched: [String] = []
        do throws(LoomError) { throw failure } catch LoomError.Code.uniquenessViolation { matched.append("typed") } catch {}
        do { throw failure } catch let e as LoomError where StoreErrorCode.sqliteConstraint ~= e.storeCode { matched.append("where") } catch {}
        #expect(matched == ["typed", "where"])
        #expect(failure.storeCode == .sqliteConstraintUnique)
        try await container.close()
    }

    @Test("A primary SQLite code matches its extended codes; a SQLSTATE matches only itself")
    func storeCodeMatching() {
        #expect(StoreErrorCode.sqliteConstraint.matches(.sqliteConstraintUnique))
        #expect(StoreErrorCode.sqliteConstraint.matches(.sqliteConstraint))
        #expect(!StoreErrorCode.sqliteConstraintUnique.matches(.sqliteConstraintNotNull))
        #expect(!StoreErrorCode.sqliteConstraintUnique.matches(.sqliteConstraint))
        #expect(!StoreErrorCode.sqliteReadOnly.matches(.sqliteConstraint))
        #expect(StoreErrorCode.postgresUniqueViolation.matches(StoreErrorCode(sqlState: "23505")))
        #expect(!StoreErrorCode.postgresUniqueViolation.matches(.postgresNotNullViolation))
        #expect(!StoreErrorCode.sqliteConstraint.matches(.postgresUniqueViolation))
        #expect(!(StoreErrorCode.sqliteFull ~= Optional<StoreErrorCode>.none))
        let plain = LoomError(.storeFailure, "No store code.")
        #expect(!(StoreErrorCode.sqliteFull ~= plain))
        #expect(LoomError.Code.storeFailure ~= plain)
    }
}
