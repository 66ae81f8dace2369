import Foundation
import Synchronization

/// Set once by a worker thread when it is done; read from anywhere.
final class DoneFlag: Sendable {
    private let done = Atomic<Bool>(false)
    private let failure = Mutex<String?>(nil)

    var isDone: Bool { done.load(ordering: .acquiring) }

    func finish(error: (any Error)? = nil) {
        if let error { failure.withLock { $0 = "\(error)" } }
        done.store(true, ordering: .releasing)
    }

    /// Throws the worker's error, if it had one.
    func check() throws {
        if let message = failure.withLock({ $0 }) { throw BenchError("a worker thread failed: \(message)") }
    }
}

/// Starts `body` on a new thread.
func startThread(_ name: String, _ body: @escaping @Sendable () -> Void) {
    let thread = Thread(block: body)
    thread.name = name
    thread.start()
}

/// Runs `body` on `count` new threads at once and returns when all are done, with the wall time
/// from the moment they were released together to the end of the last one.
func runThreads(_ count: Int, name: String, _ body: @escaping @Sendable (Int) -> Void) -> Double {
    let ready = DispatchSemaphore(value: 0)
    let go = DispatchSemaphore(value: 0)
    let group = DispatchGroup()
    for index in 0..<count {
        group.enter()
        startThread("\(name) \(index)") {
            ready.signal()
            go.wait()
            body(index)
            group.leave()
        }
    }
    for _ in 0..<count { ready.wait() }
    let start = monotonicNanoseconds()
    for _ in 0..<count { go.signal() }
    group.wait()
    return seconds(since: start)
}

/// Collects values from several threads.
final class SharedSamples: Sendable {
    private let values = Mutex<[Double]>([])

    func append(contentsOf more: [Double]) { values.withLock { $0.append(contentsOf: more) } }
    var all: [Double] { values.withLock { $0 } }
}
