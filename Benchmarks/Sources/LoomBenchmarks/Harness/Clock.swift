import Glibc

/// Nanoseconds on the monotonic clock (`CLOCK_MONOTONIC`), for timing; cheap to read
/// around every timed operation.
@inline(__always)
func monotonicNanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) &* 1_000_000_000 &+ UInt64(now.tv_nsec)
}

/// Seconds elapsed since `start`, a value of ``monotonicNanoseconds()``.
@inline(__always)
func seconds(since start: UInt64) -> Double {
    Double(monotonicNanoseconds() &- start) / 1e9
}

/// Runs `body` and returns its result with the seconds it took.
@inline(__always)
func timed<T>(_ body: () throws -> T) rethrows -> (T, Double) {
    let start = monotonicNanoseconds()
    let result = try body()
    return (result, seconds(since: start))
}
