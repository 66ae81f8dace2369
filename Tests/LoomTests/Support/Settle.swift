import Testing

/// Waits (bounded, about 1 s) for the main actor to run the merges scheduled for it, until
/// `condition` holds; records an issue if it never does.
@MainActor
func settle(_ condition: () throws -> Bool) async throws {
    for _ in 0..<500 {
        if try condition() { return }
        try await Task.sleep(for: .milliseconds(2))
    }
    Issue.record("condition not met within 1 s")
}
