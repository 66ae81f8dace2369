/// Delivers committed saves to the contexts that merge them in the order the store committed
/// them, whatever order their savers publish them in.
///
/// Every commit of the coordinator's store has a sequence number (``CommitReceipt/sequence``:
/// 1, 2, 3… with no gaps). The saver publishes its commit's events after the commit, outside
/// any lock, so save N+1's saver can publish first: its events then wait here until N's are
/// delivered. Every sequence number must be published exactly once, with no events if nothing
/// is to be delivered, or later saves would wait for it forever.
///
/// `Sendable`: its state is only touched while its lock is held.
final class SaveSequencer: Sendable {
    private struct State {
        /// The sequence number whose events are delivered next.
        var next: UInt64
        /// Events published ahead of their turn, by sequence number.
        var waiting: [UInt64: [SaveEvent]] = [:]
        /// Other coordinators' commits waiting for the local commit they came after.
        var remoteAfter: [UInt64: [SaveEvent]] = [:]
    }
    private let state: Locked<State>

    /// A sequencer whose first delivery is the commit after `lastCommitted`.
    init(after lastCommitted: UInt64) {
        state = Locked(State(next: lastCommitted + 1))
    }

    /// Hands the events of commit `sequence` to `deliver`, after those of every earlier commit;
    /// delivers any later commits that were waiting for this one. `deliver` runs with the
    /// sequencer's lock held, so deliveries never interleave: it must only queue events (as
    /// ``MergeInbox/deliver(_:)`` does), never wait.
    func publish(_ events: [SaveEvent], sequence: UInt64, deliver: ([SaveEvent]) -> Void) {
        state.withLock { state in
            guard sequence >= state.next else {
                // Not expected (every number is published once); deliver rather than drop.
                deliver(events)
                return
            }
            state.waiting[sequence] = events
            while let ready = state.waiting.removeValue(forKey: state.next) {
                if !ready.isEmpty { deliver(ready) }
                if let remote = state.remoteAfter.removeValue(forKey: state.next) { deliver(remote) }
                state.next += 1
            }
        }
    }

    /// Hands the events of another coordinator's commit, which came after this coordinator's
    /// commit `sequence` (0: before its first), to `deliver` right after that commit's events:
    /// at once if they were delivered, else when they are.
    func publish(remote events: [SaveEvent], after sequence: UInt64, deliver: ([SaveEvent]) -> Void) {
        state.withLock { state in
            if sequence < state.next {
                deliver(events)
            } else {
                state.remoteAfter[sequence, default: []] += events
            }
        }
    }
}
