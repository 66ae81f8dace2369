// expect: does not conform to the 'Sendable' protocol
// An object returned out of performBackgroundTask.
func wrong(_ container: PersistentContainer) async throws {
    let note: Note = try await container.performBackgroundTask { context in
        let n = Note(backing: _ObjectBacking(entity: Note.entity))
        context.insert(n)
        return n
    }
    _ = note
}
