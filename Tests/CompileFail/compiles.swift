// expect: compiles
// The control: the right way to do each thing the other snippets do wrong.
@MainActor func ok(_ container: PersistentContainer) async throws {
    let note = Note(backing: _ObjectBacking(entity: Note.entity))
    container.viewContext.insert(note)
    let id = note.objectID
    let background = container.newBackgroundContext()
    let text = try await background.perform { context in try context.existingObject(with: id).text }
    let other: ObjectID<Note> = try await container.performBackgroundTask { context in
        let n = Note(backing: _ObjectBacking(entity: Note.entity))
        context.insert(n)
        return n.objectID
    }
    _ = (text, other)
}
