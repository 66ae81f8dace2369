import Dispatch
import Foundation
import Synchronization
import Testing

/// Runs a suite's or test's code on threads of its own instead of Swift's cooperative pool: for
/// tests that wait for child processes.
///
/// Why: on Linux the cooperative pool has one thread per core, two here. An exit test's parent
/// reads the child's back channel with a blocking `read` on a thread of that pool for the whole
/// life of the child (Swift Testing's `ExitTest`), and ``LoomExecutable`` and the compile-fail
/// tests wait for the `loom` tool and `swiftc` the same way. Two such waits at once stopped every other test of the process: tests
/// that start three or eight children in a task group also deadlocked with themselves until a
/// child's own timeout (a reader child waiting for a writer child not yet started), and in CI
/// about twenty unrelated tests then exceeded their three-minute limits. With this trait the
/// test's task prefers ``OwnThreadsExecutor``, which its child tasks (Swift Testing's reads of
/// the back channel, task groups) inherit.
struct OwnThreadsTrait: SuiteTrait, TestTrait, TestScoping {
    var isRecursive: Bool { true }

    func provideScope(for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void) async throws {
        try await withTaskExecutorPreference(OwnThreadsExecutor.shared) {
            try await function()
        }
    }
}

extension Trait where Self == OwnThreadsTrait {
    /// Runs the suite's or test's code on threads of its own (``OwnThreadsTrait``).
    static var ownThreads: Self { Self() }
}

/// A task executor that runs each job on a serial dispatch queue of its own: dispatch gives
/// such queues threads beyond the cooperative pool's width (overcommit), so a job that blocks
/// blocks only itself.
final class OwnThreadsExecutor: TaskExecutor {
    static let shared = OwnThreadsExecutor()

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        DispatchQueue(label: "loom.tests.own-thread").async {
            job.runSynchronously(on: executor)
        }
    }
}

/// Runs `body` on a new thread of its own and waits for it: for synchronous code that must run
/// off the calling thread (a read outside the caller's write transaction, a check that another
/// thread's state is its own). Rethrows what `body` throws.
func onAnotherThread<T: Sendable, E: Error>(_ body: @escaping @Sendable () throws(E) -> T) throws(E) -> T {
    let outcome = Mutex<Result<T, E>?>(nil)
    let done = DispatchSemaphore(value: 0)
    Thread {
        let result: Result<T, E>
        do throws(E) { result = .success(try body()) } catch { result = .failure(error) }
        outcome.withLock { $0 = result }
        done.signal()
    }.start()
    done.wait()
    return try outcome.withLock { $0! }.get()
}

/// Runs `body` on a new thread of its own and suspends until it ends: for blocking work (a
/// child process waited for) that must hold neither the caller's actor nor a thread of the
/// cooperative pool. Rethrows what `body` throws.
func onThreadOfItsOwn<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}
