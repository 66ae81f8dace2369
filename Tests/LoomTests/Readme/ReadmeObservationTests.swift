import Testing

// README.md's observation example, checked line for line by scripts/check-readme.py. It uses the
// object-graph example's models.

// BEGIN README OBSERVATION
import Loom
import Observation
import Synchronization

/// Counts the changes an observer heard; `onChange` is `@Sendable`, so it counts under a lock.
final class HeardChanges: Sendable {
    let count = Mutex(0)
}

@MainActor
func observeDish() async throws -> (heard: Int, title: String) {
    let container = try PersistentContainer(name: "Menu", for: Chef.self, Dish.self, Ingredient.self, Step.self, location: .inMemory)
    let soup = Dish(title: "Soup", minutes: 40)
    container.viewContext.insert(soup)
    try container.viewContext.save()
    let id = soup.objectID

    let heard = HeardChanges()
    withObservationTracking {
        _ = soup.title                                        // observes soup.title, nothing else
    } onChange: {
        heard.count.withLock { $0 += 1 }                      // on the main actor, the view context's
    }
    try await container.save { context in                    // returns once the view context merged it
        try context.existingObject(with: id).minutes = 45    // another attribute: not heard
    }
    try await container.save { context in
        try context.existingObject(with: id).title = "Leek soup"   // heard
    }
    return (heard.count.withLock { $0 }, soup.title)
}
// END README OBSERVATION

@Suite("README observation")
struct ReadmeObservationTests {
    @Test("The observation example runs as the README says")
    @MainActor func observationRuns() async throws {
        let result = try await observeDish()
        #expect(result.heard == 1)
        #expect(result.title == "Leek soup")
    }
}
