import Foundation
import Loom
@testable import LoomCore
import Testing

/// What the undo stack holds: O(properties changed) per step, not a copy of the object.
@MainActor
@Suite("Undo memory", .serialized, .timeLimit(.minutes(5)))
struct UndoMemoryTests {
    @Test("10,000 single-attribute edits, one step each, hold at most 2 MB of undo state")
    func tenThousandSteps() throws {
        let container = try StoreKind.inMemory.makeGraphContainer()
        let context = container.viewContext
        var authors: [Author] = []
        for i in 0..<1_000 {
            let author = Author(name: "a\(i)")
            context.insert(author)
            authors.append(author)
        }
        try context.save()
        let stack = UndoStack()
        context.undoManager = stack
        for edit in 0..<10_000 {
            authors[edit % authors.count].rating = edit + 1
            context.processPendingChanges()
        }
        #expect(stack.stepCounts.undo == 10_000)
        let recorded = stack.recordedByteCount
        #expect(recorded <= 2_000_000, "the stack's records and marks take \(recorded) bytes")
        print("Undo memory: 10,000 one-edit steps hold \(recorded) bytes of records and marks")
        // Every step still undoes.
        for _ in 0..<10_000 { context.undo() }
        #expect(authors.allSatisfy { $0.rating == 0 })
        #expect(!context.hasChanges)
    }

    @Test("A step records the changed property, not the object: one edit of a 10-property object costs one record")
    func oneRecordPerProperty() throws {
        let container = try StoreKind.inMemory.makeGraphContainer()
        let context = container.viewContext
        let novel = Novel(title: String(repeating: "x", count: 10_000), pages: 1)
        context.insert(novel)
        try context.save()
        let stack = UndoStack()
        context.undoManager = stack
        for pages in 0..<100 { novel.pages = pages }       // one step, one record
        context.processPendingChanges()
        #expect(stack.undoSteps.records.count == 1)
        #expect(stack.recordedByteCount < 10_000)
    }
}
