/// Carries a context to its own isolation.
///
/// `@unchecked Sendable`: the box is only opened on the context's own isolation (the main actor
/// for the view context, the context's queue otherwise); every use does so (see MergeInbox and ContextObservation).
struct UncheckedContext: @unchecked Sendable {
    weak var context: ManagedObjectContext?
    init(_ context: ManagedObjectContext) { self.context = context }
}
