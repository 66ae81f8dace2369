#if canImport(CBenchSupport)
import CBenchSupport  // built by Loom's own package
#else
import CBenchSupportStandalone  // built by Benchmarks/Package.swift
#endif
import Foundation
import Synchronization

/// Bytes the process has allocated through malloc right now (glibc `mallinfo2`: in-use chunks
/// with their headers, in every arena, plus mmapped chunks). SQLite allocates through malloc
/// too, so its page caches and statements are included.
func heapInUse() -> UInt64 {
    loom_bench_heap_in_use()
}

/// Measures how much the heap grows during a span of one contender's run.
///
/// `begin()` notes the heap in use; a sampler thread reads it about every 0.5 ms until
/// `end()`, which notes what is still allocated. The peak is the largest sample minus the
/// starting value: a spike shorter than the sampling interval can be missed. The retained
/// figure is exact. Process-wide: another thread's allocations during the span count too,
/// which is why memory is measured in a separate, untimed run with nothing else going on.
final class HeapMeter: Sendable {
    private struct State {
        var active = false
        var running = true
        var baseline: UInt64 = 0
        var peak: UInt64 = 0
        var retained: Int64 = 0
        var samples = 0
    }

    private let state = Mutex(State())

    /// The result of a span.
    struct Reading: Sendable {
        /// The highest heap in use seen during the span, minus the heap at its start.
        var peakGrowth: Int64
        /// The heap in use at the end of the span, minus the heap at its start.
        var retained: Int64
        var samples: Int
    }

    init() {
        let thread = Thread { [self] in sample() }
        thread.name = "loom-bench heap sampler"
        thread.start()
    }

    private func sample() {
        while true {
            let now = heapInUse()
            let keepGoing = state.withLock { state -> Bool in
                if state.active {
                    state.peak = max(state.peak, now)
                    state.samples += 1
                }
                return state.running
            }
            if !keepGoing { return }
            usleep(500)
        }
    }

    /// Starts the span: what is allocated now is the baseline.
    func begin() {
        let now = heapInUse()
        state.withLock { state in
            state.baseline = now
            state.peak = now
            state.samples = 0
            state.active = true
        }
    }

    /// Ends the span, noting what is still allocated.
    func end() {
        let now = heapInUse()
        state.withLock { state in
            guard state.active else { return }
            state.peak = max(state.peak, now)
            state.retained = Int64(now) - Int64(state.baseline)
            state.active = false
        }
    }

    var reading: Reading {
        state.withLock { state in
            Reading(peakGrowth: Int64(state.peak) - Int64(state.baseline), retained: state.retained, samples: state.samples)
        }
    }

    /// Stops the sampler thread.
    func stop() {
        state.withLock { $0.running = false }
    }
}
