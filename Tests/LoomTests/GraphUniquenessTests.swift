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
