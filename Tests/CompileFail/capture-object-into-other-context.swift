// expect: passing closure as a 'sending' parameter risks causing data races
// A main-actor object captured into a background context's perform.
@MainActor func wrong(_ container: PersistentContainer) async throws {
    let note = try container.viewContext.fetch(FetchRequest<Note>()).first!
    let background = container.newBackgroundContext()
    await background.perform { _ in note.text = "changed on the wrong queue" }
}
