import Testing

// README.md's undo example (also in the object-graph article), checked line for line by
// scripts/check-readme.py. It uses the object-graph example's models.

// BEGIN README UNDO
import Loom

@MainActor
func undoAndRedo() throws -> [String] {
    let container = try PersistentContainer(name: "Menu", for: Chef.self, Dish.self, Ingredient.self, Step.self, location: .inMemory)
    let context = container.viewContext
    let stack = UndoStack()                               // off by default; one stack per context
    context.undoManager = stack
    let soup = Dish(title: "Soup", minutes: 40)
    context.undoGroup("Add Soup") { context.insert(soup) }
    try context.save()                                    // a save keeps the steps
    context.undoGroup("Rename") { soup.title = "Leek soup" }
    var seen = [stack.undoActionName]                     // "Rename"
    context.undo()                                        // in memory; the store is not touched
    seen.append(soup.title)                               // "Soup"
    context.undo()                                        // the saved insert becomes a delete to save
    seen.append("\(soup.isDeleted)")                      // "true"
    context.redo()                                        // the same object again, with its ID
    try context.save()
    seen.append(try context.fetch(FetchRequest<Dish>()).map(\.title).joined())   // "Soup"
    return seen
}
// END README UNDO

@Suite("README undo")
struct ReadmeUndoTests {
    @Test("The undo example runs as the README says")
    @MainActor func undoRuns() throws {
        #expect(try undoAndRedo() == ["Rename", "Soup", "true", "Soup"])
    }
}
