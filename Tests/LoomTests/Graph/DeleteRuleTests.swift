import Foundation
import Loom
import Testing

/// Delete rules run when the context processes pending changes, as in Core Data.
@MainActor
@Suite("Delete rules", .timeLimit(.minutes(5)))
struct DeleteRuleTests {
    /// Ann (published by Pan) wrote N1 (tagged t, two chapters, one review) and N2; Bob is her
    /// student; Ann has a profile.
    func library(_ context: ManagedObjectContext) throws -> (ann: Author, bob: Author, n1: Novel, n2: Novel, tag: Tag, pan: Publisher) {
        let pan = Publisher(name: "Pan")
        let ann = Author(name: "Ann"), bob = Author(name: "Bob")
        let n1 = Novel(title: "N1", author: ann), n2 = Novel(title: "N2", author: ann)
        let tag = Tag(name: "t")
        context.insert(pan)
        for object in [ann, bob] { context.insert(object) }
        for object in [n1, n2] { context.insert(object) }
        context.insert(tag)
        ann.publisher = pan
        bob.mentor = ann
        ann.profile = Profile(bio: "hi")
        n1.tags = [tag]
        n1.chapters = [Chapter(title: "c1"), Chapter(title: "c2")]
        context.insert(Review(text: "good", novel: n1))
        try context.save()
        return (ann, bob, n1, n2, tag, pan)
    }

    func count<M: PersistentModel & SendableMetatype>(_ type: M.Type, _ container: PersistentContainer) throws -> Int {
        try container.newBackgroundContext().performAndWait { try $0.count(for: FetchRequest<M>()) }
    }

    @Test("Nullify (the default) clears the other side: to-one, to-many, one-to-one, many-to-many", arguments: StoreKind.allCases)
    func nullify(kind: StoreKind) throws {
        let container = try kind.makeGraphContainer()
        let context = container.viewContext
        let (ann, bob, n1, _, tag, _) = try library(context)
        let profile = try #require(ann.profile)

        // Novel.author is nullify: the author loses the novel.
        let n3 = Novel(title: "N3", author: ann)
        context.insert(n3)
        try context.save()
        context.delete(n3)
        #expect(ann.novels.count == 3)              // rules run at the end of the event...
        context.processPendingChanges()
        #expect(ann.novels.count == 2)              // ...not before

        // Tag.novels is noAction, but Novel.tags is nullify: deleting a novel untags it.
        context.delete(n1)
        context.processPendingChanges()
        #expect(tag.novels.isEmpty)
        context.rollback()
        #expect(tag.novels == [n1])

        // Author.mentor / students and Author.profile are nullify.
        context.delete(bob)
        context.processPendingChanges()
        #expect(ann.students.isEmpty)
        try context.save()
        context.delete(profile)
        context.processPendingChanges()
        #expect(ann.profile == nil)
        try context.save()
        #expect(try count(Author.self, container) == 1)
        let stored = try container.newBackgroundContext().performAndWait { context in
            let ann = try context.fetch(FetchRequest<Author>()).first!
            return "\(ann.profile == nil) \(ann.students.count)"
        }
        #expect(stored == "true 0")
    }

    @Test("Cascade deletes recursively: author → novels → chapters and reviews", arguments: StoreKind.allCases)
    func cascade(kind: StoreKind) throws {
        let container = try kind.makeGraphContainer()
        let context = container.viewContext
        let (ann, bob, n1, _, tag, pan) = try library(context)
        ann.publisher = nil                          // the publisher's deny rule would refuse it
        let chapters = n1.chapters
        context.delete(ann)
        context.processPendingChanges()
        #expect(n1.isDeleted)
        let chaptersDeleted = chapters.allSatisfy { $0.isDeleted }
        #expect(chaptersDeleted)
        #expect(context.deleted.count == 1 + 2 + 2 + 1)   // Ann, two novels, two chapters, one review
        #expect(bob.mentor == nil)                   // nullified, not cascaded
        #expect(tag.novels.isEmpty)
        #expect(pan.authors.isEmpty)
        try context.save()
        #expect(try count(Author.self, container) == 1)
        #expect(try count(Novel.self, container) == 0)
        #expect(try count(Chapter.self, container) == 0)
        #expect(try count(Review.self, container) == 0)
        #expect(try count(Tag.self, container) == 1)
        #expect(try count(Profile.self, container) == 1)   // one-to-one nullify
    }

    @Test("Deny refuses the save, naming the object and the relationship, and changes nothing", arguments: StoreKind.allCases)
    func deny(kind: StoreKind) throws {
        let container = try kind.makeGraphContainer()
        let context = container.viewContext
        let (ann, _, _, _, _, pan) = try library(context)
        context.delete(pan)
        let error = try #require(throws: LoomError.self) { try context.save() }
        #expect(error.code == .deleteDenied)
        #expect(error.entityName == "Publisher")
        #expect(error.attributeNames == ["authors"])
        #expect(error.objectID == pan.anyObjectID)
        #expect(error.message.contains("Publisher/1 cannot be deleted: its relationship 'authors' (delete rule deny) still holds 1 object"))
        #expect(try count(Publisher.self, container) == 1)
        #expect(pan.isDeleted)                       // the context is as it was: fix and retry
        ann.publisher = nil
        try context.save()
        #expect(try count(Publisher.self, container) == 0)

        // An object whose denied objects are deleted too can go.
        let hachette = Publisher(name: "Hachette")
        context.insert(hachette)
        let cy = Author(name: "Cy")
        cy.publisher = hachette
        try context.save()
        context.delete(cy)
        context.delete(hachette)
        try context.save()
        #expect(try count(Publisher.self, container) == 0)
    }

    @Test("No action leaves references to the deleted object; reading one after the save is safe", arguments: StoreKind.allCases)
    func noAction(kind: StoreKind) throws {
        let container = try kind.makeGraphContainer()
        let context = container.viewContext
        let (_, _, n1, _, tag, _) = try library(context)
        let n1ID = n1.objectID
        context.delete(tag)
        context.processPendingChanges()
        #expect(n1.tags == [tag])                    // still there, as the rule says
        #expect(n1.tags.first?.isDeleted == true)
        try context.save()
        // The join row went with the tag; a fresh context sees no tag.
        let tags = try container.newBackgroundContext().performAndWait { try $0.existingObject(with: n1ID).tags.count }
        #expect(tags == 0)
    }

    @Test("An object inserted and deleted before saving leaves no trace, in relationships either", arguments: StoreKind.allCases)
    func insertedThenDeleted(kind: StoreKind) throws {
        let container = try kind.makeGraphContainer()
        let context = container.viewContext
        let (ann, _, _, _, tag, _) = try library(context)
        try context.save()
        var events: [ObjectChanges] = []
        context.addObserver(for: .objectsDidChange) { if case .objectsDidChange(let c) = $0 { events.append(c) } }
        let ghost = Novel(title: "Ghost", author: ann)
        ghost.tags = [tag]
        ghost.chapters = [Chapter(title: "g")]
        context.insert(ghost)
        let chapter = ghost.chapters[0]
        #expect(ann.novels.count == 3)
        context.delete(ghost)
        #expect(ann.novels.count == 2)
        #expect(tag.novels.count == 1)
        #expect(chapter.isDeleted || chapter.managedObjectContext == nil)   // cascaded, never saved
        #expect(!context.hasChanges)
        #expect(context.inserted.isEmpty && context.deleted.isEmpty)
        context.processPendingChanges()
        #expect(events.allSatisfy { $0.inserted.isEmpty && $0.deleted.isEmpty })
        try context.save()
        #expect(try count(Novel.self, container) == 2)
        #expect(try count(Chapter.self, container) == 2)
    }

    @Test("An unsaved object whose rules cascade to unsaved objects is deleted with all of them, its other rules applied", arguments: StoreKind.allCases)
    func unsavedCascadeToUnsaved(kind: StoreKind) throws {
        let container = try kind.makeGraphContainer()
        let context = container.viewContext
        let (ann, _, _, _, tag, pan) = try library(context)
        // Cy and everything below her are unsaved; Novel's cascade to the chapters runs while
        // Cy's own rules are still running (her profile, publisher and mentor come after).
        let cy = Author(name: "Cy")
        context.insert(cy)
        cy.publisher = pan
        cy.mentor = ann
        cy.profile = Profile(bio: "new")
        let novel = Novel(title: "N3", author: cy)
        novel.chapters = [Chapter(title: "c3"), Chapter(title: "c4")]
        novel.tags = [tag]
        context.insert(Review(text: "fine", novel: novel))
        let profile = try #require(cy.profile), chapter = novel.chapters[0]
        context.delete(cy)
        for object in [cy, novel, chapter] as [any PersistentModel] {
            #expect(object.isDeleted || object.managedObjectContext == nil)
        }
        // Nullify (the profile's rule) leaves the profile, without an author.
        #expect(!profile.isDeleted && profile.author == nil)
        #expect(ann.students.map(\.name).sorted() == ["Bob"])
        #expect(tag.novels.map(\.title) == ["N1"])
        #expect(pan.authors.map(\.name) == ["Ann"])
        #expect(context.inserted.count == 1 && context.inserted.first === profile)
        try context.save()
        #expect(try count(Author.self, container) == 2)
        #expect(try count(Novel.self, container) == 2)
        #expect(try count(Chapter.self, container) == 2)
        #expect(try count(Review.self, container) == 1)
        #expect(try count(Profile.self, container) == 2)
    }

    @Test("A list read before a member's delete rules ran can be set again: the deleted member is left out", arguments: StoreKind.allCases)
    func deletedMemberInListSetAgain(kind: StoreKind) throws {
        let container = try kind.makeGraphContainer()
        let context = container.viewContext
        let (_, _, n1, _, _, _) = try library(context)
        let (c1, c2) = (n1.chapters[0], n1.chapters[1])
        context.delete(c1)
        // The rules run at the end of the event: the list still holds c1 until then.
        n1.chapters = n1.chapters.reversed()
        #expect(n1.chapters.map(\.title) == ["c2"])
        context.processPendingChanges()
        #expect(n1.chapters.map(\.title) == ["c2"] && c1.isDeleted && c2.novel === n1)
        try context.save()
        let saved = try container.newBackgroundContext().performAndWait { context in
            try context.fetch(FetchRequest<Novel>(predicate: #Predicate { $0.title == "N1" })).first!.chapters.map(\.title)
        }
        #expect(saved == ["c2"])
    }

    @Test("A required to-one left empty fails the save with a clear error", arguments: StoreKind.allCases)
    func requiredToOne(kind: StoreKind) throws {
        let container = try kind.makeGraphContainer()
        let context = container.viewContext
        let review = Review(context: context)
        review.text = "orphan"
        let error = try #require(throws: LoomError.self) { try context.save() }
        #expect(error.code == .missingRequiredValue)
        #expect(error.attributeNames == ["novel"])
        #expect(error.message.contains("Review.novel is a required relationship but is empty"))
        review.novel = Novel(title: "Home")
        try context.save()
        #expect(try count(Review.self, container) == 1)
    }

    @Test("Rules run in background contexts at the end of perform", arguments: StoreKind.allCases)
    func background(kind: StoreKind) async throws {
        let container = try kind.makeGraphContainer()
        let worker = container.newBackgroundContext()
        try await worker.perform { context in
            let ann = Author(name: "Ann")
            context.insert(Novel(title: "N", author: ann))
            try context.save()
        }
        let remaining = try await worker.perform { context in
            let novel = try context.fetch(FetchRequest<Novel>()).first!
            let ann = novel.author!
            context.delete(novel)
            return ann.objectID
        }
        let count = try await worker.perform { context in try context.existingObject(with: remaining).novels.count }
        #expect(count == 0)
    }

    @Test("An object related and deleted in one save, after its first instance was released, is deleted without a false conflict")
    func relatedThenDeletedInOneSave() async throws {
        typealias Book = LibraryRelsV2.Book
        typealias Tag = LibraryRelsV2.Tag
        let container = PersistentContainer(store: try SQLiteStore(url: TemporaryDirectory.make().appending(path: "d.loom"), schema: try LibraryRelsV2.schema()))
        try await container.save { context in
            context.insert(Book(title: "B1"))
            context.insert(Tag(name: "red"))
        }
        // The tag fetched first is released after the insert (a to-many holds keys); the
        // relationship change registers a bare fault for it, which the second fetch must give
        // the saved row's version, or the delete expects version 0 and conflicts.
        try await container.save { context in
            let book = try context.fetch(FetchRequest<Book>()).first!
            book.labels.insert(try context.fetch(FetchRequest<Tag>()).first!)
            context.delete(try context.fetch(FetchRequest<Tag>()).first!)
        }
        let left = try await container.performBackgroundTask { context in
            (try context.count(for: FetchRequest<Tag>()), try context.fetch(FetchRequest<Book>()).first!.labels.count)
        }
        #expect(left == (0, 0))
        try await container.close()
    }
}
