import Foundation
@_spi(LoomTesting) import LoomCore
import Loom
import Observation
import Testing

/// Relationships: both sides always in step, in memory at once and in the store after a save.
@MainActor
@Suite("Relationships", .timeLimit(.minutes(5)))
struct RelationshipTests {
    @Test("Setting a to-one updates the inverse to-many at once, and moving it moves it", arguments: StoreKind.allCases)
    func toOneUpdatesInverse(kind: StoreKind) throws {
        let container = try kind.makeGraphContainer()
        let context = container.viewContext
        let ann = Author(name: "Ann"), bob = Author(name: "Bob")
        context.insert(ann); context.insert(bob)
        let novel = Novel(title: "Threads")
        context.insert(novel)
        #expect(ann.novels.isEmpty)

        novel.author = ann
        #expect(ann.novels == [novel])
        novel.author = bob
        #expect(ann.novels.isEmpty)
        #expect(bob.novels == [novel])
        novel.author = nil
        #expect(bob.novels.isEmpty)
        novel.author = ann
        try context.save()

        let other = container.newBackgroundContext()
        let names = try other.performAndWait { context in
            try context.fetch(FetchRequest<Novel>()).map { $0.author?.name ?? "-" }
        }
        #expect(names == ["Ann"])
        let titles = try other.performAndWait { context in
            try context.fetch(FetchRequest<Author>(sortBy: [SortDescriptor(\.name)])).map { $0.novels.map(\.title).sorted() }
        }
        #expect(titles == [["Threads"], []])
    }

    @Test("Setting a to-many sets and clears the inverse to-ones", arguments: StoreKind.allCases)
    func toManyUpdatesInverse(kind: StoreKind) throws {
        let container = try kind.makeGraphContainer()
        let context = container.viewContext
        let ann = Author(name: "Ann"), bob = Author(name: "Bob")
        let a = Novel(title: "A"), b = Novel(title: "B"), c = Novel(title: "C")
        for object in [ann, bob] { context.insert(object) }
        for object in [a, b, c] { context.insert(object) }

        ann.novels = [a, b]
        #expect(a.author === ann && b.author === ann && c.author == nil)
        bob.novels.insert(b)            // moves b from Ann to Bob
        #expect(b.author === bob)
        #expect(ann.novels == [a])
        ann.novels = [c]
        #expect(a.author == nil && c.author === ann)
        try context.save()

        let fresh = container.newBackgroundContext()
        let view = try fresh.performAndWait { context in
            try context.fetch(FetchRequest<Novel>(sortBy: [SortDescriptor(\.title)])).map { "\($0.title):\($0.author?.name ?? "-")" }
        }
        #expect(view == ["A:-", "B:Bob", "C:Ann"])
    }

    @Test("Assigning a to-many moves saved members from their owner, tells both sides' observers, and undoes in one step", arguments: StoreKind.allCases)
    func assigningToManyMovesMembers(kind: StoreKind) throws {
        let container = try kind.makeGraphContainer()
        try container.newBackgroundContext().performAndWait { context in
            let ann = Author(name: "Ann"), bob = Author(name: "Bob")
            context.insert(ann); context.insert(bob)
            ann.novels = [Novel(title: "A"), Novel(title: "B"), Novel(title: "C")]
            context.insert(Novel(title: "E"))   // no author yet
            try context.save()
        }
        let context = container.viewContext
        let stack = UndoStack()
        context.undoManager = stack
        let authors = try context.fetch(FetchRequest<Author>(sortBy: [SortDescriptor(\.name)]))
        let (ann, bob) = (authors[0], authors[1])
        #expect(ann.novels.map(\.title).sorted() == ["A", "B", "C"])   // the old owner's list loaded
        let novels = try context.fetch(FetchRequest<Novel>(sortBy: [SortDescriptor(\.title)]))
        let (a, b, c, e) = (novels[0], novels[1], novels[2], novels[3])
        let d = Novel(title: "D")
        let heard = Locked<Set<String>>([])
        withObservationTracking { _ = a.author } onChange: { heard.withLock { _ = $0.insert("a.author") } }
        withObservationTracking { _ = c.author } onChange: { heard.withLock { _ = $0.insert("c.author") } }
        withObservationTracking { _ = e.author } onChange: { heard.withLock { _ = $0.insert("e.author") } }
        withObservationTracking { _ = ann.novels } onChange: { heard.withLock { _ = $0.insert("ann.novels") } }
        withObservationTracking { _ = bob.novels } onChange: { heard.withLock { _ = $0.insert("bob.novels") } }

        context.undoGroup("Move") { bob.novels = [a, b, d, e] }
        #expect(a.author === bob && b.author === bob && d.author === bob && e.author === bob && c.author === ann)
        #expect(bob.novels == [a, b, d, e])
        #expect(ann.novels == [c])
        #expect(heard.withLock { $0 } == ["a.author", "e.author", "ann.novels", "bob.novels"])
        context.processPendingChanges()

        context.undo()
        #expect(a.author === ann && b.author === ann && c.author === ann && e.author == nil)
        #expect(ann.novels == [a, b, c])
        #expect(bob.novels.isEmpty)
        context.redo()
        #expect(ann.novels == [c] && bob.novels.map(\.title).sorted() == ["A", "B", "D", "E"])
        try context.save()
        let view = try container.newBackgroundContext().performAndWait { context in
            try context.fetch(FetchRequest<Author>(sortBy: [SortDescriptor(\.name)])).map { "\($0.name):\($0.novels.map(\.title).sorted())" }
        }
        #expect(view == ["Ann:[\"C\"]", "Bob:[\"A\", \"B\", \"D\", \"E\"]"])
    }

    @Test("Many-to-many: both sides in step, saved in a join table", arguments: StoreKind.allCases)
    func manyToMany(kind: StoreKind) throws {
        let container = try kind.makeGraphContainer()
        let context = container.viewContext
        let fantasy = Tag(name: "fantasy"), classic = Tag(name: "classic")
        let a = Novel(title: "A"), b = Novel(title: "B")
        for object in [fantasy, classic] { context.insert(object) }
        for object in [a, b] { context.insert(object) }

        a.tags = [fantasy, classic]
        fantasy.novels.insert(b)
        #expect(fantasy.novels == [a, b])
        #expect(classic.novels == [a])
        #expect(b.tags == [fantasy])
        try context.save()

        classic.novels = []
        #expect(a.tags == [fantasy])
        a.tags.insert(classic)
        a.tags.remove(classic)          // undone before the save: no change
        try context.save()

        let fresh = container.newBackgroundContext()
        let view = try fresh.performAndWait { context in
            try context.fetch(FetchRequest<Tag>(sortBy: [SortDescriptor(\.name)])).map { "\($0.name):\($0.novels.map(\.title).sorted())" }
        }
        #expect(view == ["classic:[]", "fantasy:[\"A\", \"B\"]"])
    }

    @Test("An ordered to-many keeps its order through saves; repeated objects count once", arguments: StoreKind.allCases)
    func orderedToMany(kind: StoreKind) throws {
        let container = try kind.makeGraphContainer()
        let context = container.viewContext
        let novel = Novel(title: "N")
        context.insert(novel)
        let chapters = ["One", "Two", "Three"].map { Chapter(title: $0) }
        novel.chapters = [chapters[2], chapters[0], chapters[1], chapters[0]]
        #expect(novel.chapters.map(\.title) == ["Three", "One", "Two"])
        #expect(chapters.allSatisfy { $0.novel === novel })
        try context.save()

        let id = novel.objectID
        let fresh = container.newBackgroundContext()
        let order = try fresh.performAndWait { context in try context.existingObject(with: id).chapters.map(\.title) }
        #expect(order == ["Three", "One", "Two"])

        novel.chapters = [chapters[1], chapters[2]]
        #expect(chapters[0].novel == nil)
        let extra = Chapter(title: "Four")
        extra.novel = novel               // added from the to-one side: goes at the end
        context.insert(extra)
        #expect(novel.chapters.map(\.title) == ["Two", "Three", "Four"])
        chapters[1].novel = nil
        chapters[1].novel = novel         // given back: at the end again
        #expect(novel.chapters.map(\.title) == ["Three", "Four", "Two"])
        try context.save()
        let after = try fresh.performAndWait { context in
            try context.refresh(context.existingObject(with: id), mergeChanges: false)
            return try context.existingObject(with: id).chapters.map(\.title)
        }
        #expect(after == ["Three", "Four", "Two"])
    }

    @Test("One-to-one: taking a partner frees the previous one", arguments: StoreKind.allCases)
    func oneToOne(kind: StoreKind) throws {
        let container = try kind.makeGraphContainer()
        let context = container.viewContext
        let ann = Author(name: "Ann"), bob = Author(name: "Bob")
        let p = Profile(bio: "p"), q = Profile(bio: "q")
        for object in [ann, bob] { context.insert(object) }
        for object in [p, q] { context.insert(object) }
        ann.profile = p
        #expect(p.author === ann)
        bob.profile = p                    // p leaves Ann
        #expect(ann.profile == nil)
        #expect(p.author === bob)
        q.author = bob                     // Bob leaves p
        #expect(bob.profile === q)
        #expect(p.author == nil)
        try context.save()
        let fresh = container.newBackgroundContext()
        let pairs = try fresh.performAndWait { context in
            try context.fetch(FetchRequest<Profile>(sortBy: [SortDescriptor(\.bio)])).map { "\($0.bio):\($0.author?.name ?? "-"):\($0.author?.profile?.bio ?? "-")" }
        }
        #expect(pairs == ["p:-:-", "q:Bob:q"])
    }

    @Test("Self-referencing: mentor and students", arguments: StoreKind.allCases)
    func selfReferencing(kind: StoreKind) throws {
        let container = try kind.makeGraphContainer()
        let context = container.viewContext
        let ann = Author(name: "Ann"), bob = Author(name: "Bob"), cy = Author(name: "Cy")
        for object in [ann, bob, cy] { context.insert(object) }
        bob.mentor = ann
        cy.mentor = ann
        ann.mentor = ann                   // one's own mentor, why not
        #expect(ann.students == [ann, bob, cy])
        try context.save()
        let fresh = container.newBackgroundContext()
        let students = try fresh.performAndWait { context in
            try context.fetch(FetchRequest<Author>(predicate: #Predicate { $0.name == "Ann" })).first!.students.map(\.name).sorted()
        }
        #expect(students == ["Ann", "Bob", "Cy"])
    }

    @Test("Relationships set before insertion apply at insertion, inserting the new objects too", arguments: StoreKind.allCases)
    func detachedObjects(kind: StoreKind) throws {
        let container = try kind.makeGraphContainer()
        let context = container.viewContext
        let ann = Author(name: "Ann")
        let novel = Novel(title: "Early", author: ann)   // both new, neither inserted
        let tag = Tag(name: "t")
        novel.tags = [tag]
        #expect(novel.author === ann)
        context.insert(novel)
        #expect(ann.isInserted && tag.isInserted)
        #expect(ann.novels == [novel])
        #expect(tag.novels == [novel])
        try context.save()
        #expect(try context.count(for: FetchRequest<Author>()) == 1)
    }

    @Test("Relationship changes are events: the owner is updated, with the relationship's name", arguments: StoreKind.allCases)
    func events(kind: StoreKind) throws {
        let container = try kind.makeGraphContainer()
        let context = container.viewContext
        let ann = Author(name: "Ann"), novel = Novel(title: "N")
        context.insert(ann); context.insert(novel)
        try context.save()
        var seen: [ObjectChanges] = []
        context.addObserver(for: .objectsDidChange) { if case .objectsDidChange(let c) = $0 { seen.append(c) } }
        var saved: [ObjectChanges] = []
        context.addObserver(for: .didSave) { if case .didSave(let c) = $0 { saved.append(c) } }
        novel.author = ann
        context.processPendingChanges()
        #expect(seen.last?.updated == [ann.anyObjectID, novel.anyObjectID])
        #expect(seen.last?.changedProperties[ann.anyObjectID] == ["novels"])
        #expect(seen.last?.changedProperties[novel.anyObjectID] == ["author"])
        #expect(!ann.isUpdated)            // its row does not change: the novel holds the key
        try context.save()
        #expect(saved.last?.changedProperties[ann.anyObjectID] == ["novels"])
    }

    @Test("A save in another context reaches loaded relationships when merged", arguments: StoreKind.allCases)
    func merging(kind: StoreKind) async throws {
        let container = try kind.makeGraphContainer()
        let context = container.viewContext
        let ann = Author(name: "Ann"), bob = Author(name: "Bob")
        let novel = Novel(title: "N", author: ann)
        context.insert(ann); context.insert(bob); context.insert(novel)
        try context.save()
        #expect(ann.novels == [novel])       // loaded
        #expect(bob.novels.isEmpty)          // loaded

        let novelID = novel.objectID, bobID = bob.objectID
        try await container.save { context in
            let novel = try context.existingObject(with: novelID)
            novel.author = try context.existingObject(with: bobID)
        }
        #expect(novel.author === bob)
        #expect(ann.novels.isEmpty)
        #expect(bob.novels == [novel])
    }

    @Test("A child context's relationship changes reach the parent and then the store", arguments: StoreKind.allCases)
    func childContexts(kind: StoreKind) async throws {
        let container = try kind.makeGraphContainer()
        let context = container.viewContext
        let ann = Author(name: "Ann")
        let tag = Tag(name: "t")
        context.insert(ann); context.insert(tag)
        try context.save()
        let annID = ann.objectID, tagID = tag.objectID
        let child = context.newChildContext()
        try await child.perform { context in
            let ann = try context.existingObject(with: annID)
            let novel = Novel(title: "From the child", author: ann)
            novel.tags = [try context.existingObject(with: tagID)]
            context.insert(novel)
            try context.save()
        }
        #expect(ann.novels.map(\.title) == ["From the child"])
        #expect(tag.novels.map(\.title) == ["From the child"])
        try context.save()
        let fresh = container.newBackgroundContext()
        let view = try fresh.performAndWait { context in
            try context.fetch(FetchRequest<Novel>()).map { "\($0.title):\($0.author?.name ?? "-"):\($0.tags.map(\.name))" }
        }
        #expect(view == ["From the child:Ann:[\"t\"]"])
    }

    @Test("Rollback puts relationships back", arguments: StoreKind.allCases)
    func rollback(kind: StoreKind) throws {
        let container = try kind.makeGraphContainer()
        let context = container.viewContext
        let ann = Author(name: "Ann"), bob = Author(name: "Bob")
        let novel = Novel(title: "N", author: ann)
        let tag = Tag(name: "t")
        for object in [ann, bob] { context.insert(object) }
        context.insert(novel); context.insert(tag)
        novel.tags = [tag]
        try context.save()
        novel.author = bob
        novel.tags = []
        context.rollback()
        #expect(novel.author === ann)
        #expect(ann.novels == [novel])
        #expect(bob.novels.isEmpty)
        #expect(novel.tags == [tag])
        #expect(!context.hasChanges)
    }

    @Test("A new object's to-many lists are exact from its insertion, and reading them asks no store", arguments: StoreKind.allCases)
    func newOwnersLists(kind: StoreKind) throws {
        let log = StatementLog()
        let container = try kind.makeGraphContainer(trace: log.hook)
        let context = container.viewContext
        // Saved objects first: a new owner's lists must not lose members that come from them.
        let saved = Novel(title: "Saved")
        context.insert(saved)
        try context.save()
        let before = log.selects.count

        let ann = Author(name: "Ann"), bob = Author(name: "Bob")
        context.insert(ann); context.insert(bob)
        #expect(ann.novels.isEmpty && ann.students.isEmpty)
        // Members set from their side (the foreign key) before the owner's list was read.
        let a = Novel(title: "A"), b = Novel(title: "B")
        context.insert(a); context.insert(b)
        a.author = bob
        b.author = bob
        saved.author = bob
        #expect(bob.novels == [a, b, saved])
        // Moved, cleared and deleted members leave the list.
        b.author = ann
        #expect(bob.novels == [a, saved] && ann.novels == [b])
        saved.author = nil
        context.delete(a)
        #expect(bob.novels.isEmpty)
        // Self-reference, many-to-many and an ordered to-many, all on new objects.
        let student = Author(name: "Cid")
        context.insert(student)
        student.mentor = ann
        #expect(ann.students == [student])
        let tag = Tag(name: "t")
        context.insert(tag)
        b.tags.insert(tag)
        #expect(tag.novels == [b])
        let one = Chapter(title: "1"), two = Chapter(title: "2")
        context.insert(two); context.insert(one)
        one.novel = b
        two.novel = b
        #expect(b.chapters.map(\.title) == ["1", "2"])
        if kind != .inMemory { #expect(log.selects.count == before) }

        try context.save()
        let fresh = container.newBackgroundContext()
        let view = try fresh.performAndWait { context in
            try context.fetch(FetchRequest<Author>(sortBy: [SortDescriptor(\.name)])).map {
                "\($0.name):\($0.novels.map(\.title).sorted()):\($0.students.map(\.name))"
            }
        }
        #expect(view == ["Ann:[\"B\"]:[\"Cid\"]", "Bob:[]:[]", "Cid:[]:[]"])
        #expect(try fresh.performAndWait { try $0.fetch(FetchRequest<Novel>(predicate: #Predicate { $0.title == "B" })).first?.chapters.map(\.title) } == ["1", "2"])
    }

    @Test("New owners never related share nothing: relating, merging into or deleting one leaves the others' lists empty", arguments: StoreKind.allCases)
    func newOwnersShareNothing(kind: StoreKind) throws {
        let container = try kind.makeGraphContainer()
        let context = container.viewContext
        let authors = (0..<4).map { Author(name: "A\($0)") }
        for author in authors { context.insert(author) }
        let novel = Novel(title: "N")
        context.insert(novel)
        novel.author = authors[0]
        #expect(authors[0].novels == [novel])
        #expect(authors.dropFirst().allSatisfy { $0.novels.isEmpty && $0.students.isEmpty })
        try context.save()

        // Another context relates one of the saved owners never related here, and deletes another.
        let (related, gone) = (authors[1].objectID, authors[2].objectID)
        try container.newBackgroundContext().performAndWait { other in
            let added = Novel(title: "M")
            other.insert(added)
            added.author = try other.existingObject(with: related)
            other.delete(try other.existingObject(with: gone))
            try other.save()
        }
        context.mergePendingSaves()
        #expect(authors[1].novels.map(\.title) == ["M"])
        #expect(authors[2].isDeleted)
        #expect(authors[0].novels == [novel] && authors[3].novels.isEmpty && authors[3].students.isEmpty)

        // A new owner after all that starts empty too; relating it touches no other list.
        let late = Author(name: "Late")
        context.insert(late)
        #expect(late.novels.isEmpty && late.students.isEmpty)
        late.students.insert(authors[3])
        #expect(authors[3].mentor === late)
        #expect(authors[0].students.isEmpty && authors[1].students.isEmpty && authors[3].students.isEmpty)
        try context.save()
        let view = try container.newBackgroundContext().performAndWait { context in
            try context.fetch(FetchRequest<Author>(sortBy: [SortDescriptor(\.name)])).map {
                "\($0.name):\($0.novels.map(\.title).sorted()):\($0.students.map(\.name))"
            }
        }
        #expect(view == ["A0:[\"N\"]:[]", "A1:[\"M\"]:[]", "A3:[]:[]", "Late:[]:[\"A3\"]"])
    }

    @Test("Undoing and redoing a new owner's insertion and its members keeps its lists exact")
    func newOwnersListsUndo() throws {
        let container = try StoreKind.inMemory.makeGraphContainer()
        let context = container.viewContext
        let stack = UndoStack()
        context.undoManager = stack
        let ann = Author(name: "Ann")
        let novel = Novel(title: "N")
        context.undoGroup("Insert") {
            context.insert(ann)
            context.insert(novel)
        }
        context.undoGroup("Relate") { novel.author = ann }
        #expect(ann.novels == [novel])
        context.undo()
        #expect(ann.novels.isEmpty && novel.author == nil)
        context.redo()
        #expect(ann.novels == [novel] && novel.author === ann)
        context.undo()
        context.undo()
        #expect(!context.hasChanges)
        context.redo()
        context.redo()
        #expect(ann.novels == [novel] && novel.author === ann)
        try context.save()
        let fresh = container.newBackgroundContext()
        #expect(try fresh.performAndWait { try $0.fetch(FetchRequest<Author>()).map { $0.novels.map(\.title) } } == [["N"]])
    }
}
