import Foundation

/// A value guarded by a lock.
///
/// Loom uses this rather than `Synchronization.Mutex` because on Linux `Mutex` waits with raw
/// futex calls that ThreadSanitizer cannot see, which makes every TSan run report false races;
/// `NSLock` is a pthread mutex, which TSan understands. The cost is the same order.
///
/// `@unchecked Sendable`: `state` is only read or written inside `withLock`, while `lock` is held.
package final class Locked<State>: @unchecked Sendable {
    private let lock = NSLock()
    /// Only touched with `lock` held, so the run-time exclusivity check (a `swift_beginAccess`
    /// and `swift_endAccess` per use; every insert takes a key through
    /// here) is left out.
    @exclusivity(unchecked) private var state: State

    package init(_ state: State) { self.state = state }

    package func withLock<Result, Failure: Error>(_ body: (inout State) throws(Failure) -> Result) throws(Failure) -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&state)
    }
}
