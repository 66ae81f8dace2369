import Loom
import Synchronization

/// The live streams a server has open, and the contexts of their live queries that are still
/// alive: `GET /health/streams`, so that an operator (and the tests) can see that a stream whose
/// client went away released its live query.
///
/// Sendable: its state is behind a mutex; used from every request's task.
final class LiveStreams: Sendable {
    /// The counts `GET /health/streams` answers with.
    struct Counts: Codable, Equatable, Sendable {
        /// Streams whose response is still being written.
        var open: Int
        /// Contexts of live queries not released yet (a context outlives its stream by no more
        /// than the stream's last step).
        var contexts: Int
    }

    private struct Entry {
        var isOpen: Bool
        weak var context: BackgroundContext?
    }

    private let entries = Mutex<[Int: Entry]>([:])
    private let nextNumber = Atomic<Int>(0)

    /// One stream's registration; `close()` when its response ends.
    struct Registration: Sendable {
        let streams: LiveStreams
        let number: Int

        func close() {
            streams.entries.withLock { $0[number]?.isOpen = false }
        }
    }

    /// Registers a stream whose live query lives in `context`.
    func open(_ context: BackgroundContext) -> Registration {
        let number = nextNumber.add(1, ordering: .relaxed).newValue
        entries.withLock { $0[number] = Entry(isOpen: true, context: context) }
        return Registration(streams: self, number: number)
    }

    /// How many streams are open and how many of their contexts are alive; forgets the streams
    /// that ended and whose context is gone.
    var counts: Counts {
        entries.withLock { entries in
            entries = entries.filter { $0.value.isOpen || $0.value.context != nil }
            return Counts(open: entries.values.count(where: \.isOpen), contexts: entries.values.count { $0.context != nil })
        }
    }
}
