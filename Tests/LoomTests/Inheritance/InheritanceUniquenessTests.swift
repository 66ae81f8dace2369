import Foundation
import Loom
@_spi(LoomStore) import LoomCore
import LoomPostgreSQL
import LoomTools
import Testing

/// Uniqueness constraints declared on an entity with sub-entities, on every store: they hold
/// across the sub-entities' tables, for objects being saved together and against saved rows,
/// through updates, deletes, batch requests and merge policies, as Core Data's do across a
/// hierarchy.
@Suite("Inheritance: uniqueness across a hierarchy", .timeLimit(.minutes(5)))
struct InheritanceUniquenessTests {
    /// Every account as "Class email", by email.
    static func accounts(_ container: PersistentContainer) throws -> [String] {
        try container.newBackgroundContext().performAndWait { context in
            try context.fetch(FetchRequest<Account>(sortBy: [SortDescriptor(\.email)])).map { "\(type(of: $0)) \($0.email)" }
        }
    }

    /// Saves an account "a@x", an admin "b@x" and a guest "c@x".
    static func seed(_ context: ManagedObjectContext) throws {
        let account = Account(context: context)
        account.email = "a@x"
        let admin = Admin(context: context)
        admin.email = "b@x"
        let guest = Guest(context: context)
        guest.email = "c@x"
        try context.save()
    }

    @Test("A saved object's value is refused to an object of another entity of the hierarchy, and the store is unchanged", arguments: StoreKind.allCases)
    func savedDuplicateAcrossTables(kind: StoreKind) throws {
        let container = try kind.makeContainer(models: accountModels)
        try container.newBackgroundContext().performAndWait { try Self.seed($0) }
        let before = try Self.accounts(container)
        #expect(before == ["Account a@x", "Admin b@x", "Guest c@x"])
        try container.newBackgroundContext().performAndWait { context in
            // An admin with the plain account's value, a guest with the admin's, an account with the guest's.
            for (make, email, owner) in [({ Admin(context: context) as Account }, "a@x", "Account"), ({ Guest(context: context) }, "b@x", "Admin"), ({ Account(context: context) }, "c@x", "Guest")] {
                let duplicate = make()
                duplicate.email = email
                let error = #expect(throws: LoomError.self) { try context.save() }
                #expect(error?.code == .uniquenessViolation)
                #expect(error?.attributeNames == ["email"])
                // The conflict names the saved object, of its own entity.
                let conflict = try #require(error?.conflicts.first)
                guard case .uniqueness(let constraint, let existing) = conflict.kind else {
                    Issue.record("expected a uniqueness conflict, got \(conflict.kind)")
                    continue
                }
                #expect(constraint == ["email"])
                #expect(existing.entityName == owner)
                #expect(conflict.persistedSnapshot?["email"] == .text(email))
                context.delete(duplicate)
                try context.save()
            }
            // An update to another entity's value is refused too.
            let guest = try #require(try context.fetch(FetchRequest<Guest>()).first)
            guest.email = "b@x"
            let error = #expect(throws: LoomError.self) { try context.save() }
            #expect(error?.code == .uniquenessViolation)
            context.rollback()
        }
        #expect(try Self.accounts(container) == before)
    }

    @Test("Objects of two sub-entities saved together with one value are refused before any SQL", arguments: StoreKind.allCases)
    func pendingDuplicatesAcrossEntities(kind: StoreKind) throws {
        let container = try kind.makeContainer(models: accountModels)
        try container.newBackgroundContext().performAndWait { context in
            let admin = Admin(context: context)
            admin.email = "same@x"
            let guest = Guest(context: context)
            guest.email = "same@x"
            let error = #expect(throws: LoomError.self) { try context.save() }
            #expect(error?.code == .uniquenessViolation)
            #expect(error?.message.contains("holds across its sub-entities") == true, "\(error?.message ?? "")")
            #expect(error?.conflicts.isEmpty == true)   // found among the objects, not in the store
            guest.email = "other@x"
            try context.save()
        }
        #expect(try Self.accounts(container) == ["Guest other@x", "Admin same@x"])
    }

    @Test("A value freed by a delete or an update in one table can be taken in another in the same save", arguments: StoreKind.allCases)
    func freedValueTakenElsewhere(kind: StoreKind) throws {
        let container = try kind.makeContainer(models: accountModels)
        try container.newBackgroundContext().performAndWait { try Self.seed($0) }
        try container.newBackgroundContext().performAndWait { context in
            let accounts = try context.fetch(FetchRequest<Account>(sortBy: [SortDescriptor(\.email)]))
            context.delete(accounts[0])                 // the account a@x goes ...
            let admin = Admin(context: context)         // ... and an admin takes its value
            admin.email = "a@x"
            accounts[2].email = "d@x"                   // the guest moves to d@x ...
            let account = Account(context: context)     // ... and an account takes c@x
            account.email = "c@x"
            try context.save()
        }
        #expect(try Self.accounts(container) == ["Admin a@x", "Admin b@x", "Account c@x", "Guest d@x"])
        // And the value is held again afterwards.
        container.newBackgroundContext().performAndWait { context in
            Guest(context: context).email = "a@x"
            #expect(throws: LoomError.self) { try context.save() }
        }
    }

    @Test("A compound constraint on a middle entity covers its sub-entities, not its parent; NULLs never conflict", arguments: StoreKind.allCases)
    func compoundConstraintOnAMiddleEntity(kind: StoreKind) throws {
        let container = try kind.makeContainer(models: seatModels)
        try container.newBackgroundContext().performAndWait { context in
            for (make, row, number) in [({ BoxSeat(context: context) as Seat }, "A", 1), ({ RoyalBoxSeat(context: context) }, "A", 2), ({ Seat(context: context) }, "A", 1), ({ RoyalBoxSeat(context: context) }, nil, 1), ({ BoxSeat(context: context) }, nil, 1)] as [(() -> Seat, String?, Int)] {
                let seat = make()
                seat.row = row
                seat.number = number
            }
            try context.save()
            // A royal box seat A1 meets the box seat A1.
            let royal = RoyalBoxSeat(context: context)
            royal.row = "A"
            royal.number = 1
            let error = #expect(throws: LoomError.self) { try context.save() }
            #expect(error?.code == .uniquenessViolation)
            #expect(Set(error?.attributeNames ?? []) == ["row", "number"])
            royal.number = 3
            try context.save()
            #expect(try context.count(for: FetchRequest<Seat>()) == 6)
        }
    }

    @Test("Batch updates and inserts meet the constraint across the hierarchy; the store is unchanged", arguments: StoreKind.allCases)
    func batchRequestsAcrossTables(kind: StoreKind) throws {
        let container = try kind.makeContainer(models: accountModels)
        try container.newBackgroundContext().performAndWait { try Self.seed($0) }
        let before = try Self.accounts(container)
        try container.newBackgroundContext().performAndWait { context in
            // Every guest to the admin's value.
            let update = #expect(throws: LoomError.self) {
                try context.execute(BatchUpdateRequest<Guest>(set: [.set(\.email, to: "b@x")]))
            }
            #expect(update?.code == .uniquenessViolation)
            // An admin inserted with the guest's value.
            let insert = #expect(throws: LoomError.self) {
                try context.execute(BatchInsertRequest<Admin>(rows: [[.set(\.email, to: "c@x"), .set(\.nickname, to: "n"), .set(\.level, to: 1)]]))
            }
            #expect(insert?.code == .uniquenessViolation)
            #expect(insert?.message.contains("Guest/") == true, "\(insert?.message ?? "")")
            // Uniquing: a row matching a guest is ignored (and its ID is the guest's) ...
            let ignored = try context.execute(BatchInsertRequest<Admin>(rows: [[.set(\.email, to: "c@x")], [.set(\.email, to: "new@x")]], uniquing: .ignore))
            #expect(ignored.objectIDs.map(\.entityName) == ["Guest", "Admin"])
            #expect(ignored.insertedCount == 1)
            // ... and one that would update it is refused: an admin's row cannot become a guest.
            let updated = #expect(throws: LoomError.self) {
                try context.execute(BatchInsertRequest<Admin>(rows: [[.set(\.email, to: "c@x"), .set(\.level, to: 2)]], uniquing: .update))
            }
            #expect(updated?.code == .uniquenessViolation)
            #expect(updated?.message.contains("cannot update an object of another entity") == true, "\(updated?.message ?? "")")
        }
        #expect(try Self.accounts(container) == before + ["Admin new@x"])
    }

    @Test("Merge policies resolve a conflict with a saved object of another entity where they can keep everything", arguments: StoreKind.allCases)
    func mergePoliciesAcrossEntities(kind: StoreKind) throws {
        let container = try kind.makeContainer(models: accountModels)
        try container.newBackgroundContext().performAndWait { try Self.seed($0) }
        try container.newBackgroundContext().performAndWait { context in
            // Object trump onto an object of a sub-entity: it has every attribute of an account.
            context.mergePolicy = .mergeByPropertyObjectTrump
            let account = Account(context: context)
            account.email = "b@x"
            account.nickname = "boss"
            try context.save()
            #expect(account.managedObjectContext == nil)   // the duplicate was dropped
            let admin = try #require(try context.fetch(FetchRequest<Admin>()).first)
            #expect(admin.nickname == "boss")
            #expect(admin.email == "b@x")

            // Object trump onto an object of another sub-entity would lose the admin's level: refused.
            let other = Admin(context: context)
            other.email = "c@x"
            other.level = 7
            let refused = #expect(throws: LoomError.self) { try context.save() }
            #expect(refused?.code == .uniquenessViolation)
            #expect(refused?.message.contains("an object cannot change its entity") == true, "\(refused?.message ?? "")")

            // An updated object's changes move onto a saved object of another entity when it has
            // them all (here the plain account, which has an email and a nickname).
            context.rollback()
            let boss = try #require(try context.fetch(FetchRequest<Admin>()).first)
            let plain = try #require(try context.fetch(FetchRequest<Account>(predicate: #Predicate { $0.email == "a@x" })).first)
            boss.email = "a@x"
            boss.nickname = "chief"
            try context.save()
            #expect(boss.email == "b@x")                    // the admin keeps its saved values
            #expect(plain.nickname == "chief")              // the account took the change
            let again = Admin(context: context)
            again.email = "c@x"
            again.level = 7

            // Overwrite: this object wins, the saved guest (another entity) is deleted.
            context.mergePolicy = .overwrite
            try context.save()
            #expect(try context.fetch(FetchRequest<Account>(predicate: #Predicate { $0.email == "c@x" })).map { "\(type(of: $0)) \($0.email)" } == ["Admin c@x"])
            #expect(try context.count(for: FetchRequest<Guest>()) == 0)

            // Store trump: the saved account wins; a duplicate guest with no badges is dropped ...
            context.mergePolicy = .mergeByPropertyStoreTrump
            let guest = Guest(context: context)
            guest.email = "a@x"
            try context.save()
            #expect(guest.managedObjectContext == nil)
            // ... one with badges cannot hand them to an account: refused, nothing lost.
            let holder = Guest(context: context)
            holder.email = "a@x"
            let badge = Badge(context: context)
            badge.code = "B1"
            badge.guest = holder
            let kept = #expect(throws: LoomError.self) { try context.save() }
            #expect(kept?.message.contains("badges") == true, "\(kept?.message ?? "")")
            #expect(holder.badges.map(\.code) == ["B1"])
            context.rollback()
        }
        #expect(try Self.accounts(container) == ["Account a@x", "Admin b@x", "Admin c@x"])
    }

    @Test("Long entity names give each member's triggers a name of its own, within PostgreSQL's 63 bytes", arguments: StoreKind.allCases)
    func longNamesStayApart(kind: StoreKind) throws {
        let schema = try Schema(registrationModels)
        let constraint = try #require(schema.hierarchyConstraints.first)
        let names = constraint.members.map(constraint.triggerName(for:)) + [constraint.name, constraint.uniqueIndexName, constraint.keyIndexName]
        #expect(Set(names).count == names.count, "\(names)")
        #expect(names.allSatisfy { $0.utf8.count <= 63 }, "\(names)")
        let container = try kind.makeContainer(models: registrationModels)
        try container.newBackgroundContext().performAndWait { context in
            let one = RegistrationOfAKindThatHasAVeryLongNameNumberOne(context: context)
            one.code = "x"
            try context.save()
            RegistrationOfAKindThatHasAVeryLongNameNumberTwo(context: context).code = "x"
            #expect(throws: LoomError.self) { try context.save() }
            context.rollback()
            // Each member's triggers keep its own entries: deleting the first frees its value.
            context.delete(one)
            try context.save()
            RegistrationOfAKindThatHasAVeryLongNameNumberTwo(context: context).code = "x"
            try context.save()
            RegistrationOfAKindThatHasAVeryLongNameNumberOne(context: context).code = "x"
            #expect(throws: LoomError.self) { try context.save() }
        }
    }

    @Test("Two containers on one store save one value as objects of two sub-entities at once: exactly one wins each time", arguments: StoreKind.persistentCases)
    func concurrentWritersAcrossTables(kind: StoreKind) async throws {
        let schema = try Schema(accountModels)
        let (first, second): (PersistentContainer, PersistentContainer)
        switch kind {
        case .postgres:
            let configuration = try PostgresServer.configuration()
            first = PersistentContainer(store: try PostgreSQLStore(configuration: configuration, schema: schema))
            second = PersistentContainer(store: try PostgreSQLStore(configuration: configuration, schema: schema))
        default:
            let url = TemporaryDirectory.make().appending(path: "accounts.loom")
            first = PersistentContainer(store: try SQLiteStore(url: url, schema: schema))
            second = PersistentContainer(store: try SQLiteStore(url: url, schema: schema))
        }
        let rounds = 12
        for round in 0..<rounds {
            let email = "r\(round)@x"
            async let admin: LoomError? = first.performBackgroundTask { context in
                Admin(context: context).email = email
                do { try context.save() } catch { return error as? LoomError ?? LoomError(.storeFailure, "\(error)") }
                return nil
            }
            async let guest: LoomError? = second.performBackgroundTask { context in
                Guest(context: context).email = email
                do { try context.save() } catch { return error as? LoomError ?? LoomError(.storeFailure, "\(error)") }
                return nil
            }
            let outcomes = try await [admin, guest]
            let refused = outcomes.compactMap { $0 }
            #expect(refused.count == 1, "round \(round): \(refused.map(\.message))")
            #expect(refused.allSatisfy { $0.code == .uniquenessViolation }, "round \(round): \(refused.map(\.message))")
        }
        let saved = try await first.performBackgroundTask { context in
            try context.fetch(FetchRequest<Account>()).map(\.email)
        }
        #expect(saved.count == rounds)
        #expect(Set(saved).count == rounds)
        try await first.close()
        try await second.close()
    }

    @Test("On PostgreSQL, the server refuses a duplicate written outside Loom; loom verify finds one let in", .enabled(if: PostgresServer.isEnabled, PostgresServer.skipReason))
    func postgresEnforcesAndVerifies() async throws {
        let configuration = try PostgresServer.configuration()
        let container = PersistentContainer(store: try PostgreSQLStore(configuration: configuration, schema: try Schema(accountModels)))
        try await container.performBackgroundTask { try Self.seed($0) }
        try await container.close()
        let url = try #require(PostgresServer.url)
        let table = "\"\(configuration.schemaName)\".\"Admin\""
        // The triggers hold for SQL written outside Loom too.
        #expect(throws: (any Error).self) {
            try OwnedPostgresCluster.sql("INSERT INTO \(table) (\"Z_PK\", \"Z_OPT\", email, nickname, level) VALUES (99, 1, 'c@x', '', 0)", at: url)
        }
        let sound = try StoreVerifier(location: url + "&schema=" + configuration.schemaName).verify()
        #expect(sound.findings.isEmpty, "\(sound.findings)")
        // With the admins' trigger dropped, the duplicate goes in, and verify names it.
        try OwnedPostgresCluster.sql("DROP FUNCTION \"\(configuration.schemaName)\".\"loom_hierarchy_Account_email_Admin\"() CASCADE; INSERT INTO \(table) (\"Z_PK\", \"Z_OPT\", email, nickname, level) VALUES (99, 1, 'c@x', '', 0)", at: url)
        let report = try StoreVerifier(location: url + "&schema=" + configuration.schemaName).verify()
        #expect(report.findings.contains { $0.message.contains("Admin 99 and Guest 3 have the same email, which must be unique across Account's sub-entities") }, "\(report.findings)")
    }
}
