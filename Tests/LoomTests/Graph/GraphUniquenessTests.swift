import Foundation
import Loom
import Testing

/// Uniqueness constraints that include a to-one relationship (`#Unique<Novel>([\.title, \.author])`).
@MainActor
@Suite("Uniqueness with relationships")
struct GraphUniquenessTests {
    @Test("Duplicates among pending inserts are refused before any SQL, naming both objects", arguments: StoreKind.allCases)
    func pendingDuplicates(kind: StoreKind) throws {
        let log = StatementLog()
        let container = try kind.makeGraphContainer(trace: log.hook)
        let context = container.viewContext
        let ann = Author(name: "Ann"), bob = Author(name: "Bob")
        context.insert(ann); context.insert(bob)
        try context.save()
        log.reset()

        let first = Novel(title: "Same", author: ann), second = Novel(title: "Same", author: ann)
        log.reset()                                          // inserting reserved keys; now the save
        let error = try #require(throws: LoomError.self) { try context.save() }
        #expect(error.code == .uniquenessViolation)
        #expect(error.entityName == "Novel")
        #expect(error.attributeNames == ["title", "author"])
        #expect(error.message.contains(first.anyObjectID.description) || error.message.contains(second.anyObjectID.description))
        #expect(log.all.isEmpty)                             // no SQL at all
        #expect(ann.novels.count == 2)                       // the context is as it was

        second.author = bob                                  // same title, another author: fine
        let orphanA = Novel(title: "Orphan"), orphanB = Novel(title: "Orphan")
        context.insert(orphanA); context.insert(orphanB)     // no author: NULLs never conflict
        try context.save()
        #expect(try context.count(for: FetchRequest<Novel>()) == 4)
    }

    @Test("A duplicate of a saved row is refused by the store, naming properties, not columns", arguments: StoreKind.allCases)
    func savedDuplicate(kind: StoreKind) throws {
        let container = try kind.makeGraphContainer()
        let context = container.viewContext
        let ann = Author(name: "Ann")
        context.insert(Novel(title: "Same", pages: 1, author: ann))
        try context.save()
        let again = Novel(title: "Same", pages: 2, author: ann)
        let error = try #require(throws: LoomError.self) { try context.save() }
        #expect(error.code == .uniquenessViolation)
        #expect(Set(error.attributeNames) == ["title", "author"])
        #expect(error.conflicts.count == 1)
        context.delete(again)
        try context.save()
    }

    @Test("Merge policies resolve a conflict on a constraint with a relationship", arguments: StoreKind.allCases)
    func mergePolicies(kind: StoreKind) throws {
        let container = try kind.makeGraphContainer()
        let context = container.viewContext
        let ann = Author(name: "Ann")
        let saved = Novel(title: "Same", pages: 1, author: ann)
        context.insert(saved)
        try context.save()
        let savedID = saved.objectID

        context.mergePolicy = .mergeByPropertyObjectTrump
        let duplicate = Novel(title: "Same", pages: 999, author: ann)
        #expect(ann.novels.count == 2)
        try context.save()
        #expect(saved.pages == 999)                          // the saved row took the new values
        #expect(duplicate.managedObjectContext == nil)       // the duplicate was dropped
        #expect(ann.novels.map(\.objectID) == [savedID])

        context.mergePolicy = .mergeByPropertyStoreTrump
        _ = Novel(title: "Same", pages: 5, author: ann)
        try context.save()
        let pages = try container.newBackgroundContext().performAndWait { context in
            try context.fetch(FetchRequest<Novel>()).map(\.pages)
        }
        #expect(pages == [999])
    }
}

@MainActor
@Suite("Uniqueness conflicts keep relationships")
struct UniquenessRelationshipMergeTests {
    /// Two contexts each create "Ann" with novels; the second save meets the first's Ann.
    func conflict(_ kind: StoreKind, _ policy: MergePolicy) async throws -> (PersistentContainer, [String: [String]]) {
        let container = try kind.makeGraphContainer()
        let first = container.newBackgroundContext(), second = container.newBackgroundContext()
        await second.perform { context in
            let ann = Author(name: "Ann", rating: 1)
            context.insert(Novel(title: "From the second", author: ann))
            ann.mentor = ann
        }
        try await first.perform { context in
            let ann = Author(name: "Ann", rating: 5)
            context.insert(Novel(title: "From the first", author: ann))
            ann.students = [Author(name: "Bob")]
            try context.save()
        }
        try await second.perform { context in
            context.mergePolicy = policy
            try context.save()
        }
        let view = try await container.performBackgroundTask { context in
            var out: [String: [String]] = [:]
            for author in try context.fetch(FetchRequest<Author>(sortBy: [SortDescriptor(\.name)])) {
                out[author.name] = author.novels.map(\.title).sorted() + ["rating \(author.rating)", "students \(author.students.map(\.name).sorted())"]
            }
            return out
        }
        return (container, view)
    }

    @Test("Store trump keeps the saved object and merges the duplicate's to-many relationships into it", arguments: StoreKind.allCases)
    func storeTrump(kind: StoreKind) async throws {
        let (_, view) = try await conflict(kind, .mergeByPropertyStoreTrump)
        #expect(view["Ann"] == ["From the first", "From the second", "rating 5", "students [\"Ann\", \"Bob\"]"])
    }

    @Test("Object trump moves the new values onto the saved object and merges to-many relationships", arguments: StoreKind.allCases)
    func objectTrump(kind: StoreKind) async throws {
        let (_, view) = try await conflict(kind, .mergeByPropertyObjectTrump)
        #expect(view["Ann"] == ["From the first", "From the second", "rating 1", "students [\"Ann\", \"Bob\"]"])
    }

    @Test("Overwrite keeps the new object, deletes the saved one, and takes over its to-many relationships", arguments: StoreKind.allCases)
    func overwrite(kind: StoreKind) async throws {
        let (_, view) = try await conflict(kind, .overwrite)
        #expect(view["Ann"] == ["From the first", "From the second", "rating 1", "students [\"Ann\", \"Bob\"]"])
        #expect(view.count == 2)
    }
}
