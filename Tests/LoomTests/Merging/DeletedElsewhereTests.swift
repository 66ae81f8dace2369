import Foundation
import Loom
import Testing

/// An object another context deleted, still held here: reading and changing it never traps
/// (a race the app cannot rule out); a change to it makes the next save refuse rather than save
/// the rest of the change without it.
@Suite("Objects deleted elsewhere", .timeLimit(.minutes(5)))
struct DeletedElsewhereTests {
    /// A context holding `Book` "1" loaded, and the ID; another context then deletes it.
    private static func deleteElsewhere(_ kind: StoreKind) throws -> (PersistentContainer, BackgroundContext, ObjectID<Book>) {
        let container = try kind.makeContainer(Book.self)
        let here = container.newBackgroundContext()
        let id = try here.performAndWait { context in
            let book = Book(isbn: "1", title: "Gone")
            context.insert(book)
            context.insert(Book(isbn: "2", title: "Kept"))
            try context.save()
            return book.objectID
        }
        return (container, here, id)
    }

    @Test("A merged deletion: the object keeps its last values and takes a change without a trap; the next save refuses, naming it, and saves nothing of the rest", arguments: StoreKind.allCases)
    func mergedDeletion(kind: StoreKind) throws {
        let (container, here, id) = try Self.deleteElsewhere(kind)
        try here.performAndWait { context in
            let book = try context.existingObject(with: id)
            try container.newBackgroundContext().performAndWait { other in
                other.delete(try other.existingObject(with: id))
                try other.save()
            }
            var deleted = ObjectChanges()   // the other context's didSave, as it reaches this one
            deleted.deleted = [id.erased]
            context.mergeChanges(fromContextDidSave: deleted)
            #expect(book.isDeleted)
            #expect(book.title == "Gone")
            book.pages = 12                      // trapped before: "was changed after it was deleted"
            #expect(book.pages == 12)
            let kept = try #require(try context.fetch(FetchRequest<Book>()).first)
            kept.title = "Kept, renamed"
            // One change of the two went nowhere: the save refuses the other rather than save
            // half of it, and names the object.
            let refused = #expect(throws: LoomError.self) { try context.save() }
            #expect(refused?.code == .objectNotFound)
            #expect(refused?.objectID == id.erased)
            #expect(refused?.message.contains("pages") == true)
            context.rollback()
            // Done again from what the store holds, it saves.
            try #require(try context.fetch(FetchRequest<Book>()).first).title = "Kept, renamed"
            try context.save()
        }
        try container.newBackgroundContext().performAndWait { (context) throws in
            #expect(try context.fetch(FetchRequest<Book>()).map(\.title) == ["Kept, renamed"])
        }
    }

    @Test("A fault whose row another context deleted: it fires without a trap and reads as deleted; a change to it makes the next save refuse, a rollback forgets it", arguments: StoreKind.allCases)
    func faultOfDeletedRow(kind: StoreKind) throws {
        let (container, here, id) = try Self.deleteElsewhere(kind)
        try here.performAndWait { context in
            let book = try context.existingObject(with: id)
            try context.refresh(book, mergeChanges: false)   // a fault again
            try container.newBackgroundContext().performAndWait { other in
                other.delete(try other.existingObject(with: id))
                try other.save()
            }
            _ = book.title                        // fires the fault: the row is gone
            #expect(book.isDeleted)
            #expect(!context.hasChanges)
            try context.save()                    // reading it is no error
            book.pages = 3
            let refused = #expect(throws: LoomError.self) { try context.save() }
            #expect(refused?.code == .objectNotFound)
            // The error is reported once; a rollback forgets it with the change.
            book.pages = 4
            context.rollback()
            try context.save()
        }
        try container.newBackgroundContext().performAndWait { (context) throws in
            #expect(try context.count(for: FetchRequest<Book>()) == 1)
        }
    }

    @Test("A save refused for a stale version, rolled back, then made again from a fetch: based on the saved value, never a lost update", arguments: StoreKind.allCases)
    func noLostUpdateAfterRollback(kind: StoreKind) throws {
        let container = try kind.makeContainer(Book.self)
        let a = container.newBackgroundContext(), b = container.newBackgroundContext()
        let id = try a.performAndWait { context in
            let book = Book(isbn: "1", title: "x", pages: 100)
            context.insert(book)
            try context.save()
            return book.objectID
        }
        try a.performAndWait { context in
            let book = try context.existingObject(with: id)
            _ = book.pages
            try b.performAndWait { other in
                try other.existingObject(with: id).pages = 110
                try other.save()
            }
            book.pages -= 10
            #expect(throws: LoomError.self) { try context.save() }
            context.rollback()
            let again = try #require(try context.fetch(FetchRequest<Book>()).first)
            let seen = again.pages
            again.pages = seen - 10
            do {
                try context.save()
                #expect(seen == 110, "saved a change based on a stale \(seen)")
            } catch {
                context.rollback()
            }
        }
        let final = try container.newBackgroundContext().performAndWait { try $0.existingObject(with: id).pages }
        #expect(final == 110 || final == 100)
    }

    @Test("Deleting an object another context changed since it was read is a version conflict; the row stays", arguments: StoreKind.allCases)
    func staleDeleteConflicts(kind: StoreKind) throws {
        let container = try kind.makeContainer(Book.self)
        let a = container.newBackgroundContext(), b = container.newBackgroundContext()
        let id = try a.performAndWait { context in
            let book = Book(isbn: "1", title: "x", pages: 0)
            context.insert(book)
            try context.save()
            return book.objectID
        }
        try a.performAndWait { context in
            let book = try #require(try context.fetch(FetchRequest<Book>()).first)
            #expect(book.pages == 0)
            try b.performAndWait { other in
                try other.existingObject(with: id).pages = 30
                try other.save()
            }
            context.delete(book)
            #expect(throws: LoomError.self) { try context.save() }
        }
        let final = try container.newBackgroundContext().performAndWait { try $0.count(for: FetchRequest<Book>()) }
        #expect(final == 1)
    }

    @Test("Updating an object another context deleted since it was read is a version conflict; nothing of the save is applied", arguments: StoreKind.allCases)
    func updateOfDeletedRowConflicts(kind: StoreKind) throws {
        let container = try kind.makeContainer(Book.self)
        let a = container.newBackgroundContext(), b = container.newBackgroundContext()
        let (gone, kept) = try a.performAndWait { context in
            let gone = Book(isbn: "1", title: "gone", pages: 10), kept = Book(isbn: "2", title: "kept", pages: 10)
            context.insert(gone)
            context.insert(kept)
            try context.save()
            return (gone.objectID, kept.objectID)
        }
        try a.performAndWait { context in
            let books = try context.fetch(FetchRequest<Book>(sortBy: [SortDescriptor(\.isbn)]))
            #expect(books.map(\.pages) == [10, 10])
            try b.performAndWait { other in
                other.delete(try other.existingObject(with: gone))
                try other.save()
            }
            books[0].pages -= 5   // a transfer out of the deleted one…
            books[1].pages += 5   // …into the other
            #expect(throws: LoomError.self) { try context.save() }
            context.rollback()
        }
        let pages = try container.newBackgroundContext().performAndWait { try $0.existingObject(with: kept).pages }
        #expect(pages == 10)
    }

    @Test("An object this context inserted and saved, changed by another context since, then deleted here from its stale copy: a version conflict; the row and its new value stay", arguments: StoreKind.allCases)
    func staleDeleteOfOwnInsert(kind: StoreKind) throws {
        let container = try kind.makeContainer(Book.self)
        let a = container.newBackgroundContext(), b = container.newBackgroundContext()
        try a.performAndWait { context in
            let book = Book(isbn: "1", title: "new", pages: 0)
            context.insert(book)
            try context.save()
            let id = book.objectID
            try b.performAndWait { other in
                try other.existingObject(with: id).pages = 30
                try other.save()
            }
            let fetched = try context.fetch(FetchRequest<Book>())
            #expect(fetched.count == 1 && fetched[0] === book)
            context.delete(book)   // its copy still says 0 pages
            #expect(throws: LoomError.self) { try context.save() }
            context.rollback()
        }
        let pages = try container.newBackgroundContext().performAndWait { try $0.fetch(FetchRequest<Book>()).map(\.pages) }
        #expect(pages == [30])
    }
}
