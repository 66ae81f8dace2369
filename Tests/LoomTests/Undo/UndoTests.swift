import Foundation
import Loom
import Observation
@testable import LoomCore
import Testing

/// A context's own undo stack: what it records, how steps are grouped, what never enters it,
/// and how it meets saves, merges, rollback and reset (Core Data's semantics).
@MainActor
@Suite("Undo", .timeLimit(.minutes(5)))
struct UndoTests {
    func store<M: PersistentModel & SendableMetatype>(_ type: M.Type, _ container: PersistentContainer) throws -> Int {
        try container.newBackgroundContext().performAndWait { try $0.count(for: FetchRequest<M>()) }
    }

    @Test("Off by default: nothing is recorded and undo() does nothing")
    func offByDefault() throws {
        let container = try StoreKind.inMemory.makeGraphContainer()
        let context = container.viewContext
        #expect(context.undoManager == nil)
        let ann = Author(name: "Ann")
        context.insert(ann)
        ann.rating = 5
        context.processPendingChanges()
        #expect(!context.canUndo)
        context.undo()
        #expect(ann.rating == 5)
        #expect(!ann.isDeleted)
    }

    @Test("An attribute is undone and redone; the step's name is shown", arguments: StoreKind.allCases)
    func attribute(kind: StoreKind) throws {
        let container = try kind.makeGraphContainer()
        let context = container.viewContext
        let ann = Author(name: "Ann", rating: 1)
        context.insert(ann)
        try context.save()
        let stack = UndoStack()
        context.undoManager = stack
        context.undoGroup("Rate") {
            ann.rating = 2
            ann.rating = 3      // one record per property and step: the value before the step
        }
        #expect(stack.canUndo && stack.undoActionName == "Rate" && !stack.canRedo)
        #expect(stack.recordedByteCount > 0)
        context.undo()
        #expect(ann.rating == 1)
        #expect(!context.hasChanges)        // back to the saved value: nothing to save
        #expect(stack.canRedo && stack.redoActionName == "Rate" && !stack.canUndo)
        context.redo()
        #expect(ann.rating == 3)
        #expect(context.hasChanges)
        #expect(stack.undoActionName == "Rate" && !stack.canRedo)
    }

    @Test("Every event is one step; a new change empties the redo stack")
    func groupingByEvent() throws {
        let container = try StoreKind.inMemory.makeGraphContainer()
        let context = container.viewContext
        context.undoManager = UndoStack()
        let ann = Author(name: "Ann")
        context.insert(ann)
        ann.rating = 1
        context.processPendingChanges()
        ann.rating = 2
        ann.name = "Anne"
        context.processPendingChanges()
        ann.rating = 3          // the open event is a step too: undo() ends it first
        #expect(context.undoManager?.stepCounts.undo == 3)
        context.undo()
        #expect(ann.rating == 2 && ann.name == "Anne")
        context.undo()
        #expect(ann.rating == 1 && ann.name == "Ann")
        #expect(context.canRedo)
        ann.rating = 9
        context.processPendingChanges()
        #expect(!context.canRedo)
        context.undo()
        context.undo()
        #expect(ann.isDeleted || ann.managedObjectContext == nil)
        #expect(try context.fetch(FetchRequest<Author>()).isEmpty)
        #expect(!context.hasChanges)
        #expect(!context.canUndo)
        context.redo()
        #expect(ann.rating == 1 && ann.name == "Ann" && ann.isInserted)
        #expect(try context.fetch(FetchRequest<Author>()).count == 1)
    }

    @Test("Nested groups are one step, named by the outermost; undo inside a group is refused by a trap")
    func nestedGroups() throws {
        let container = try StoreKind.inMemory.makeGraphContainer()
        let context = container.viewContext
        context.undoManager = UndoStack()
        let ann = Author(name: "Ann")
        context.undoGroup("Add Ann") {
            context.insert(ann)
            context.undoGroup("Rate") { ann.rating = 4 }
            ann.name = "Anne"
        }
        #expect(context.undoManager?.stepCounts.undo == 1)
        #expect(context.undoManager?.undoActionName == "Add Ann")
        context.undo()
        #expect(try context.fetch(FetchRequest<Author>()).isEmpty)
        context.redo()
        #expect(ann.name == "Anne" && ann.rating == 4)
        // An empty group leaves no step.
        context.undoGroup("Nothing") {}
        #expect(context.undoManager?.stepCounts.undo == 1)
    }

    @Test("withoutUndo keeps changes out of the stack, its delete rules too")
    func withoutUndo() throws {
        let container = try StoreKind.inMemory.makeGraphContainer()
        let context = container.viewContext
        let ann = Author(name: "Ann")
        let novel = Novel(title: "N", author: ann)
        context.insert(ann)
        context.insert(novel)
        try context.save()
        context.undoManager = UndoStack()
        ann.rating = 1
        context.withoutUndo {
            ann.name = "Anne"
            context.delete(novel)
        }
        #expect(context.undoManager?.stepCounts.undo == 1)
        #expect(context.undoManager?.isUndoRegistrationEnabled == true)
        context.undo()
        #expect(ann.rating == 0)
        #expect(ann.name == "Anne")
        #expect(novel.isDeleted)
        #expect(ann.novels.isEmpty)
        #expect(!context.canUndo)
    }

    @Test("levelsOfUndo keeps the newest steps")
    func levels() throws {
        let container = try StoreKind.inMemory.makeGraphContainer()
        let context = container.viewContext
        let ann = Author(name: "Ann")
        context.insert(ann)
        context.undoManager = UndoStack(levelsOfUndo: 3)
        for rating in 1...10 {
            ann.rating = rating
            context.processPendingChanges()
        }
        #expect(context.undoManager?.stepCounts.undo == 3)
        while context.canUndo { context.undo() }
        #expect(ann.rating == 7)
        context.undoManager?.levelsOfUndo = 1
        #expect(context.undoManager?.stepCounts.redo == 1)
        context.redo()
        #expect(ann.rating == 8)
        #expect(!context.canRedo)
    }

    @Test("canUndo, canRedo and undoActionName are observable")
    func observable() throws {
        let container = try StoreKind.inMemory.makeGraphContainer()
        let context = container.viewContext
        let stack = UndoStack()
        context.undoManager = stack
        let ann = Author(name: "Ann")
        context.insert(ann)
        context.processPendingChanges()
        final class Flag: @unchecked Sendable { var fired = false }   // set once, read after
        let flag = Flag()
        withObservationTracking {
            _ = stack.canRedo
            _ = stack.undoActionName
        } onChange: {
            flag.fired = true
        }
        ann.rating = 1      // a change to an open step: canRedo and the name stay
        #expect(!flag.fired)
        context.undo()
        #expect(flag.fired)
        #expect(stack.canRedo)
    }

    @Test("Relationships are undone on both sides: to-one, to-many, one-to-one, many-to-many, ordered", arguments: StoreKind.allCases)
    func relationships(kind: StoreKind) throws {
        let container = try kind.makeGraphContainer()
        let context = container.viewContext
        let ann = Author(name: "Ann"), bob = Author(name: "Bob")
        let n1 = Novel(title: "N1", author: ann), n2 = Novel(title: "N2")
        let t1 = Tag(name: "t1"), t2 = Tag(name: "t2")
        let c1 = Chapter(title: "c1"), c2 = Chapter(title: "c2"), c3 = Chapter(title: "c3")
        for object in [ann, bob] { context.insert(object) }
        for object in [n1, n2] { context.insert(object) }
        for object in [t1, t2] { context.insert(object) }
        n1.tags = [t1]
        n1.chapters = [c1, c2]
        ann.profile = Profile(bio: "a")
        try context.save()
        context.undoManager = UndoStack()

        context.undoGroup("Move") {
            n1.author = bob
            n2.author = ann
            bob.mentor = ann
            n1.tags = [t2]
            n1.chapters = [c3, c2, c1]
            bob.profile = ann.profile        // one-to-one: Ann loses it
        }
        #expect(ann.novels == [n2] && bob.novels == [n1] && ann.students == [bob])
        #expect(t1.novels.isEmpty && t2.novels == [n1])
        #expect(n1.chapters.map(\.title) == ["c3", "c2", "c1"] && c3.novel === n1)
        #expect(ann.profile == nil && bob.profile?.bio == "a")

        context.undo()
        #expect(n1.author === ann && n2.author == nil && bob.mentor == nil)
        #expect(ann.novels == [n1] && bob.novels.isEmpty && ann.students.isEmpty)
        #expect(n1.tags == [t1] && t1.novels == [n1] && t2.novels.isEmpty)
        // c3 came in with the group, so undo took its insert back: it is no one's to use now.
        #expect(n1.chapters.map(\.title) == ["c1", "c2"] && !context.registeredObjects.contains { $0 === c3 })
        #expect(ann.profile?.bio == "a" && bob.profile == nil && ann.profile?.author === ann)

        context.redo()
        #expect(ann.novels == [n2] && bob.novels == [n1] && ann.students == [bob])
        #expect(t1.novels.isEmpty && t2.novels == [n1] && n1.tags == [t2])
        #expect(n1.chapters.map(\.title) == ["c3", "c2", "c1"])
        #expect(ann.profile == nil && bob.profile?.author === bob)

        // Undone after a save, then saved: the store has what it had.
        try context.save()
        context.undo()
        try context.save()
        let reader = container.newBackgroundContext()
        let seen = try reader.performAndWait { context in
            let novels = try context.fetch(FetchRequest<Novel>(sortBy: [SortDescriptor(\.title)]))
            return novels.map { novel in
                "\(novel.title):\(novel.author?.name ?? "-"):\(novel.tags.map(\.name).sorted()):\(novel.chapters.map(\.title))"
            }
        }
        #expect(seen == ["N1:Ann:[\"t1\"]:[\"c1\", \"c2\"]", "N2:-:[]:[]"])
    }

    @Test("Ordered many-to-many: order and members come back on both sides", arguments: StoreKind.allCases)
    func orderedManyToMany(kind: StoreKind) throws {
        let container: PersistentContainer
        let schema = try Schema([Playlist.self, Song.self])
        switch kind {
        case .inMemory: container = PersistentContainer(store: InMemoryStore(schema: schema))
        case .sqlite: container = PersistentContainer(store: try SQLiteStore(url: TemporaryDirectory.make().appending(path: "p.loom"), schema: schema))
        case .postgres: container = PersistentContainer(store: try PostgresServer.makeStore(schema))
        }
        let context = container.viewContext
        let list = Playlist(title: "L")
        let a = Song(name: "a"), b = Song(name: "b"), c = Song(name: "c")
        context.insert(list)
        for song in [a, b, c] { context.insert(song) }
        list.songs = [a, b]
        try context.save()
        context.undoManager = UndoStack()
        list.songs = [c, b, a]
        context.processPendingChanges()
        b.playlists = []
        context.processPendingChanges()
        #expect(list.songs.map(\.name) == ["c", "a"])
        context.undo()
        #expect(list.songs.map(\.name) == ["c", "b", "a"] && b.playlists == [list])
        context.undo()
        #expect(list.songs.map(\.name) == ["a", "b"] && c.playlists.isEmpty)
        context.redo()
        context.redo()
        #expect(list.songs.map(\.name) == ["c", "a"] && b.playlists.isEmpty)
        try context.save()
        context.undo()
        context.undo()
        try context.save()
        let names = try container.newBackgroundContext().performAndWait { context in
            try context.fetch(FetchRequest<Playlist>()).first?.songs.map(\.name)
        }
        #expect(names == ["a", "b"])
    }

    @Test("A cascade delete is undone whole, before and after a save", arguments: StoreKind.allCases)
    func cascadeDelete(kind: StoreKind) throws {
        let container = try kind.makeGraphContainer()
        let context = container.viewContext
        let ann = Author(name: "Ann"), bob = Author(name: "Bob")
        let n1 = Novel(title: "N1", author: ann)
        let tag = Tag(name: "t")
        for object in [ann, bob] { context.insert(object) }
        context.insert(n1)
        context.insert(tag)
        n1.tags = [tag]
        n1.chapters = [Chapter(title: "c1"), Chapter(title: "c2")]
        context.insert(Review(text: "good", novel: n1))
        bob.mentor = ann
        try context.save()
        context.undoManager = UndoStack()

        context.undoGroup("Delete Ann") { context.delete(ann) }
        #expect(n1.isDeleted && bob.mentor == nil && tag.novels.isEmpty)
        context.undo()
        #expect(!ann.isDeleted && !n1.isDeleted && n1.author === ann && bob.mentor === ann)
        #expect(tag.novels == [n1] && n1.chapters.map(\.title) == ["c1", "c2"] && n1.reviews.count == 1)
        #expect(!context.hasChanges)

        context.redo()
        try context.save()
        #expect(try store(Novel.self, container) + store(Chapter.self, container) == 0)
        context.undo()      // the saved deletion comes back as inserts of the same objects
        #expect(ann.isInserted && ann.name == "Ann" && n1.author === ann && bob.mentor === ann)
        #expect(n1.chapters.map(\.title) == ["c1", "c2"])
        try context.save()
        let seen = try container.newBackgroundContext().performAndWait { context in
            let novel = try #require(try context.fetch(FetchRequest<Novel>()).first)
            let bob = try #require(try context.fetch(FetchRequest<Author>(predicate: #Predicate { $0.name == "Bob" })).first)
            return "\(novel.author?.name ?? "-") \(novel.tags.map(\.name)) \(novel.chapters.map(\.title)) \(novel.reviews.count) \(bob.mentor?.name ?? "-")"
        }
        #expect(seen == "Ann [\"t\"] [\"c1\", \"c2\"] 1 Ann")
        #expect(ann.objectID == ann.objectID)
        _ = try context.existingObject(with: ann.objectID)
    }

    @Test("Unsaved objects deleted with a cascade come back on undo and go again on redo", arguments: StoreKind.allCases)
    func unsavedCascadeRedo(kind: StoreKind) throws {
        let container = try kind.makeGraphContainer()
        let context = container.viewContext
        let pan = Publisher(name: "Pan")
        context.insert(pan)
        try context.save()
        context.undoManager = UndoStack()
        // Unsaved: the author, her novel and its chapters; her rules after `novels` (profile,
        // mentor) run once the novel's cascade ran.
        let ann = Author(name: "Ann")
        context.insert(ann)
        ann.publisher = pan
        ann.profile = Profile(bio: "hi")
        let n1 = Novel(title: "N1", author: ann)
        n1.chapters = [Chapter(title: "c1"), Chapter(title: "c2")]
        context.processPendingChanges()
        context.undoGroup("Delete Ann") { context.delete(ann) }
        #expect(ann.isDeleted || ann.managedObjectContext == nil)
        context.undo()
        #expect(!ann.isDeleted && n1.author === ann && n1.chapters.map(\.title) == ["c1", "c2"] && ann.profile?.bio == "hi")
        #expect(pan.authors.map(\.name) == ["Ann"])
        context.redo()
        #expect(ann.isDeleted || ann.managedObjectContext == nil)
        #expect(pan.authors.isEmpty)
        context.undo()
        #expect(n1.chapters.map(\.title) == ["c1", "c2"])
        try context.save()
        #expect(try store(Chapter.self, container) == 2)
    }

    @Test("A member leaves an ordered list that was never loaded: undo puts it back where it stood", arguments: StoreKind.allCases)
    func orderedListNotLoaded(kind: StoreKind) throws {
        let container = try kind.makeGraphContainer()
        let setup = container.viewContext
        let n1 = Novel(title: "N1")
        setup.insert(n1)
        n1.chapters = [Chapter(title: "c1"), Chapter(title: "c2"), Chapter(title: "c3")]
        try setup.save()
        // A fresh context: the novel's list is not loaded when the chapter leaves it.
        let context = container.newBackgroundContext()
        try context.performAndWait { context in
            context.undoManager = UndoStack()
            let novel = try #require(try context.fetch(FetchRequest<Novel>()).first)
            let first = try #require(try context.fetch(FetchRequest<Chapter>(predicate: #Predicate { $0.title == "c1" })).first)
            first.novel = nil
            context.processPendingChanges()
            try context.save()
            // A later step loads the list and writes its order.
            novel.chapters = novel.chapters.reversed()
            context.processPendingChanges()
            #expect(novel.chapters.map(\.title) == ["c3", "c2"])
            context.undo()
            #expect(novel.chapters.map(\.title) == ["c2", "c3"])
            context.undo()
            #expect(novel.chapters.map(\.title) == ["c1", "c2", "c3"])
            try context.save()
        }
        let saved = try container.newBackgroundContext().performAndWait { try $0.fetch(FetchRequest<Novel>()).first!.chapters.map(\.title) }
        #expect(saved == ["c1", "c2", "c3"])
    }

    @Test("An object moved in one step to an object inserted in that step is moved back, not taken along by the insert's undo", arguments: StoreKind.allCases)
    func movedToInsertedInOneStep(kind: StoreKind) throws {
        let container = try kind.makeGraphContainer()
        let context = container.viewContext
        let n1 = Novel(title: "N1")
        context.insert(n1)
        n1.chapters = [Chapter(title: "c1"), Chapter(title: "c2")]
        try context.save()
        context.undoManager = UndoStack()
        let c1 = n1.chapters[0]
        context.undoGroup("Move to a new novel") {
            c1.novel = nil                      // first change of c1's novel: recorded here
            let n2 = Novel(title: "N2")
            context.insert(n2)
            c1.novel = n2                       // its cascade rule would take c1 along
        }
        context.undo()
        #expect(!c1.isDeleted && c1.novel === n1 && n1.chapters.map(\.title) == ["c1", "c2"])
        #expect(!context.hasChanges)
        context.redo()
        #expect(c1.novel?.title == "N2" && n1.chapters.map(\.title) == ["c2"])
        context.undo()
        try context.save()
        #expect(try store(Chapter.self, container) == 2 && store(Novel.self, container) == 1)
    }

    @Test("A many-to-many link added and removed in one step stays absent through undo and redo", arguments: StoreKind.allCases)
    func linkAddedAndRemovedInOneStep(kind: StoreKind) throws {
        let container = try kind.makeGraphContainer()
        let setup = container.viewContext
        setup.insert(Novel(title: "N1"))
        setup.insert(Tag(name: "t"))
        try setup.save()
        // No loaded list left to say where the link is: undo asks the store and the changes.
        let context = container.newBackgroundContext()
        try context.performAndWait { context in
            context.undoManager = UndoStack()
            try context.undoGroup("Tag and untag") {
                let novel = try #require(try context.fetch(FetchRequest<Novel>()).first)
                let tag = try #require(try context.fetch(FetchRequest<Tag>()).first)
                novel.tags.insert(tag)
                tag.novels.remove(novel)
            }
            try context.refreshAllObjects()     // loaded lists are dropped, to be read again
            context.undo()
            context.redo()
            let novel = try #require(try context.fetch(FetchRequest<Novel>()).first)
            #expect(novel.tags.isEmpty)
            context.undo()
            #expect(novel.tags.isEmpty)
            try context.save()
        }
        let links = try container.newBackgroundContext().performAndWait { try $0.fetch(FetchRequest<Tag>()).first!.novels.count }
        #expect(links == 0)
    }

    @Test("Setting a property to the value it holds records no step")
    func sameValueIsNoStep() throws {
        let container = try StoreKind.inMemory.makeGraphContainer()
        let context = container.viewContext
        let ann = Author(name: "Ann", rating: 1)
        context.insert(ann)
        try context.save()
        let stack = UndoStack()
        context.undoManager = stack
        ann.rating = 1
        context.processPendingChanges()
        #expect(!stack.canUndo)
        ann.rating = 2
        context.processPendingChanges()
        ann.rating = 2
        context.processPendingChanges()
        #expect(stack.stepCounts.undo == 1)
        context.undo()
        #expect(ann.rating == 1 && stack.stepCounts.redo == 1)
    }

    @Test("Undoing a saved insert deletes it cleanly; redoing inserts it again with its ID", arguments: StoreKind.allCases)
    func insertAfterSave(kind: StoreKind) throws {
        let container = try kind.makeGraphContainer()
        let context = container.viewContext
        context.undoManager = UndoStack()
        let ann = Author(name: "Ann")
        let novel = Novel(title: "N", author: ann)
        context.undoGroup("Add") {
            context.insert(ann)
            context.insert(novel)
        }
        try context.save()
        let id = ann.objectID
        #expect(context.canUndo)                // a save keeps the stack, as in Core Data
        context.undo()
        #expect(ann.isDeleted && novel.isDeleted)
        try context.save()
        #expect(try store(Author.self, container) + store(Novel.self, container) == 0)
        context.redo()
        #expect(novel.author === ann && ann.novels == [novel])
        try context.save()
        let name = try container.newBackgroundContext().performAndWait { try $0.existingObject(with: id).name }
        #expect(name == "Ann")
    }

    @Test("Rollback and reset empty the stack; a save does not")
    func rollbackAndReset() throws {
        let container = try StoreKind.inMemory.makeGraphContainer()
        let context = container.viewContext
        context.undoManager = UndoStack()
        let ann = Author(name: "Ann")
        context.insert(ann)
        context.processPendingChanges()
        try context.save()
        #expect(context.canUndo)
        ann.rating = 3
        context.rollback()
        #expect(!context.canUndo && !context.canRedo)
        ann.rating = 4
        context.processPendingChanges()
        context.undo()
        #expect(context.canRedo)
        context.reset()
        #expect(!context.canUndo && !context.canRedo)
    }

    @Test("Merged changes never enter the stack, and undo keeps merged values of other properties", arguments: StoreKind.availableCases)
    func merges(kind: StoreKind) async throws {
        let container = try kind.makeGraphContainer()
        let context = container.viewContext
        let ann = Author(name: "Ann")
        let novel = Novel(title: "N", pages: 10, author: ann)
        context.insert(ann)
        context.insert(novel)
        try context.save()
        context.undoManager = UndoStack()
        novel.pages = 20
        context.processPendingChanges()
        let id = novel.objectID
        try await container.newBackgroundContext().perform { other in
            let novel = try other.existingObject(with: id)
            novel.year = 1999
            novel.title = "M"
            try other.save()
        }
        try await settle { novel.title == "M" }
        #expect(context.undoManager?.stepCounts.undo == 1)
        context.undo()
        #expect(novel.pages == 10 && novel.title == "M" && novel.year == 1999)
        #expect(!context.canUndo)

        // An object deleted elsewhere: its steps are skipped, not trapped on.
        ann.rating = 5
        context.processPendingChanges()
        let annID = ann.objectID
        try await container.newBackgroundContext().perform { other in
            other.delete(try other.existingObject(with: annID))
            try other.save()
        }
        try await settle { ann.managedObjectContext == nil }
        context.undo()
        context.redo()
        #expect(try context.fetch(FetchRequest<Author>()).isEmpty)
    }

    @Test("A child context's save into its parent is not recorded in the parent's stack")
    func childSave() throws {
        let container = try StoreKind.inMemory.makeGraphContainer()
        let context = container.viewContext
        let ann = Author(name: "Ann")
        context.insert(ann)
        try context.save()
        context.undoManager = UndoStack()
        let child = context.newChildContext()
        let id = ann.objectID
        try child.performAndWait { child in
            let inChild = try child.existingObject(with: id)
            inChild.rating = 7
            try child.save()
        }
        #expect(ann.rating == 7)
        #expect(!context.canUndo)
    }

    @Test("One stack serves one context: the second context's assignment is a programmer error")
    func oneStackOneContext() async throws {
        await #expect(processExitsWith: .failure) {
            await MainActor.run {
                let first = try! StoreKind.inMemory.makeGraphContainer(), second = try! StoreKind.inMemory.makeGraphContainer()
                let stack = UndoStack()
                first.viewContext.undoManager = stack
                second.viewContext.undoManager = stack
            }
        }
    }
}
