// expect: passing closure as a 'sending' parameter risks causing data races
// A context sent to another task.
@MainActor func wrong(_ container: PersistentContainer) {
    let context = container.viewContext
    Task.detached { _ = context.hasChanges }
}
