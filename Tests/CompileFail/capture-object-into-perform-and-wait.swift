// expect: risks causing data races
// A main-actor object used inside a background context's synchronous performAndWait.
@MainActor func wrong(_ container: PersistentContainer) throws {
    let note = try container.viewContext.fetch(FetchRequest<Note>()).first!
    let background = container.newBackgroundContext()
    background.performAndWait { _ in note.text = "changed on the wrong queue" }
}
