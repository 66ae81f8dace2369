package import Logging
import Synchronization

/// A log that keeps what is logged to it, in order: for showing what Loom logged (the demo) and
/// for reading it back (the tests).
///
/// Isolation: none; it can be logged to and read from any thread.
package final class LogCollector: Sendable {
    /// One message and the `loom.store` metadata it was logged with (the store's path, or its
    /// PostgreSQL description).
    package struct Entry: Sendable {
        package var message: String
        package var store: String?
    }

    private let entries = Mutex<[Entry]>([])

    package init() {}

    /// Everything logged so far.
    package var all: [Entry] { entries.withLock { $0 } }

    /// The messages logged for the store whose description contains `store`.
    package func messages(of store: String) -> [String] {
        all.filter { $0.store?.contains(store) == true }.map(\.message)
    }

    /// A logger that writes here, at every level.
    package func logger(label: String) -> Logger {
        Logger(label: label) { _ in Handler(collector: self) }
    }

    private struct Handler: LogHandler {
        let collector: LogCollector
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            let store = (event.metadata?["loom.store"] ?? metadata["loom.store"]).map { "\($0)" }
            collector.entries.withLock { $0.append(Entry(message: "\(event.message)", store: store)) }
        }
    }
}
