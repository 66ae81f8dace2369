// expect: does not conform to the 'Sendable' protocol
// A background context smuggled out of its own perform.
func wrong(_ container: PersistentContainer) async {
    let background = container.newBackgroundContext()
    let context = await background.perform { context in context }
    _ = context.hasChanges
}
