// expect: passing closure as a 'sending' parameter risks causing data races
// An object handed to a detached task.
@MainActor func wrong(_ container: PersistentContainer) throws {
    let note = try container.viewContext.fetch(FetchRequest<Note>()).first!
    Task.detached { print(note.text) }
}
