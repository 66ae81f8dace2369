// expect: main actor-isolated property 'viewContext' can not be referenced from a nonisolated context
// The view context touched off the main actor.
func wrong(_ container: PersistentContainer) throws {
    _ = try container.viewContext.count(for: FetchRequest<Note>())
}
