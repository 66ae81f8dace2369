import Synchronization

/// What a stream writes next.
enum StreamStep: Sendable {
    case event(CardStreamEvent)
    case heartbeat
    /// The store failed while the live query read its result again: Loom's message.
    case failed(String)
    /// The live query ended (its context or the store closed).
    case ended
    /// The server is shutting down gracefully.
    case shutdown
    /// The stream's task was cancelled: the client went away.
    case cancelled
}

/// Hands a stream's steps to the task writing its response: the live query's events one at a
/// time (their reader waits until its event is taken), heartbeats and shutdown as signals (one
/// pending at most; shutdown first). Only the writer's wait is cancellable mid-stream, so the
/// live query's reader is never cancelled while the stream runs.
///
/// Sendable: its state is behind a mutex.
final class StreamMailbox: Sendable {
    private struct State {
        var event: StreamStep?
        var signal: StreamStep?
        var reader: CheckedContinuation<Void, Never>?
        var poster: CheckedContinuation<Void, Never>?

        mutating func takeReader() -> CheckedContinuation<Void, Never>? {
            defer { reader = nil }
            return reader
        }

        mutating func takePoster() -> CheckedContinuation<Void, Never>? {
            defer { poster = nil }
            return poster
        }
    }

    private let state = Mutex(State())

    /// Posts the live query's next step and waits until the writer took it (or this task is
    /// cancelled: the stream ended).
    func post(_ step: StreamStep) async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let (reader, now) = state.withLock { state in
                    state.event = step
                    if Task.isCancelled { return (state.takeReader(), true) }
                    state.poster = continuation
                    return (state.takeReader(), false)
                }
                reader?.resume()
                if now { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.takePoster() }?.resume()
        }
    }

    /// Signals a heartbeat due or the server's shutdown; a shutdown is not replaced by a
    /// heartbeat.
    func signal(_ step: StreamStep) {
        state.withLock { state -> CheckedContinuation<Void, Never>? in
            if case .shutdown = state.signal { return nil }
            state.signal = step
            return state.takeReader()
        }?.resume()
    }

    /// The next step: a shutdown first, then the live query's event, then a heartbeat;
    /// `.cancelled` once this task is cancelled.
    func take() async -> StreamStep {
        while true {
            let (step, poster) = state.withLock { state -> (StreamStep?, CheckedContinuation<Void, Never>?) in
                if case .shutdown = state.signal { return (.shutdown, nil) }
                if let event = state.event {
                    state.event = nil
                    return (event, state.takePoster())
                }
                defer { state.signal = nil }
                return (state.signal, nil)
            }
            poster?.resume()
            if let step { return step }
            if Task.isCancelled { return .cancelled }
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let ready = state.withLock { state in
                        if state.event != nil || state.signal != nil || Task.isCancelled { return true }
                        state.reader = continuation
                        return false
                    }
                    if ready { continuation.resume() }
                }
            } onCancel: {
                state.withLock { $0.takeReader() }?.resume()
            }
        }
    }
}
