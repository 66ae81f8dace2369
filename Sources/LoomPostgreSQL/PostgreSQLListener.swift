import Foundation
import Synchronization
@_spi(LoomStore) import LoomCore
import LoomSQL
import PostgresNIO

/// Finds the commits other store instances (other servers, other coordinators) make on the
/// same store, in commit order, each once: a thread of its own with a connection of its own
/// that `LISTEN`s on the store's channel. A notification wakes it; it then reads the
/// history after the last number it handed on, so a notification lost with a dropped
/// connection loses nothing. A notification of this instance's own commit (``HistoryNotice``)
/// needs no read and does not even wake the thread: it waits for the next wake-up or poll, and
/// then only moves the last number on, so that a server's own saves cost its listener nothing
/// (not even a thread woken after each save, on the cores the saving threads and the database
/// share). While a commit of this instance's has an unknown outcome, its notifications wake
/// the thread as any other. After a lost connection the thread connects again
/// (waits doubling from the configuration's
/// ``PostgreSQLStore/Configuration/ListenerReconnection/initialDelay`` up to its
/// ``PostgreSQLStore/Configuration/ListenerReconnection/maximumDelay``), listens again and
/// catches up from the history. It also reads every
/// ``PostgreSQLStore/Configuration/ListenerReconnection/pollInterval`` when nothing woke it. A
/// wait for the server is bounded by the configuration's response timeout, so a silent server
/// cannot hold the thread.
///
/// Nothing in it waits on Swift's cooperative thread pool: it runs on its own thread and waits
/// only for NIO's event loops (``PGConnection/addListener(channel:handler:)`` says how the
/// notification handler is added without postgres-nio's trap on a connection being lost), so a
/// pool kept busy by other work delays nothing here, and ``stop()`` never waits for the pool.
///
/// `@unchecked Sendable`: the loop's state is only touched on its thread; `stopped` and the
/// semaphore are thread-safe.
final class PostgreSQLListener: @unchecked Sendable {
    private let configuration: PostgreSQLStore.Configuration
    private let store: UUID
    private let origin: Int64
    private let channel: String
    private let handler: @Sendable (RemoteCommits) -> Void
    private let wake = DispatchSemaphore(value: 0)
    private let lock = NSLock()
    private var stopped = false
    /// The listening connection; only the thread uses it.
    private var connection: PGConnection?
    private let finished = DispatchSemaphore(value: 0)
    /// The last history number handed on (or seen as this instance's own).
    private var lastNumber: Int64
    /// Which rows are this instance's, and the last of its commits seen.
    private var origins: HistoryOrigins
    /// This instance's commits whose outcome it never learned: their rows are handed on.
    private let unacknowledged: UnacknowledgedCommits
    /// The payloads of the notifications received and not looked at yet.
    private let notices = Notices()
    /// How many notifications of this instance's own commits may wait without waking the thread.
    static let ownNoticesWithoutWakeUp = 64

    /// Notification payloads in the order they came (commit order): the handler adds them on
    /// the event loop, the thread takes them.
    private final class Notices: Sendable {
        private let payloads = Mutex<[String]>([])
        /// Adds a payload; returns how many wait now.
        func append(_ payload: String) -> Int {
            payloads.withLock { payloads in
                payloads.append(payload)
                return payloads.count
            }
        }
        func take() -> [String] {
            payloads.withLock { payloads in
                defer { payloads.removeAll() }
                return payloads
            }
        }
    }

    init(configuration: PostgreSQLStore.Configuration, store: UUID, origin: Int64, channel: String, after: Int64,
         unacknowledged: UnacknowledgedCommits, handler: @escaping @Sendable (RemoteCommits) -> Void) {
        var configuration = configuration
        configuration.trace = nil
        self.configuration = configuration
        self.store = store
        self.origin = origin
        self.channel = channel
        self.lastNumber = after
        self.origins = HistoryOrigins(mine: origin)
        self.unacknowledged = unacknowledged
        self.handler = handler
    }

    func start() {
        let thread = Thread { [self] in run() }
        thread.name = "Loom PostgreSQL listener"
        thread.start()
    }

    private var isStopped: Bool { lock.withLock { stopped } }

    /// Wakes the thread to look at the notifications received (and read the history unless
    /// they are all this instance's own commits).
    func wakeUp() {
        wake.signal()
    }

    /// Stops the thread and waits for it to end (it hands nothing on after this returns). The
    /// thread closes its connection itself: closing it from here while a query is in flight
    /// can leave that query's future unanswered.
    func stop() {
        lock.withLock { stopped = true }
        wake.signal()
        // A read in flight ends within a round trip; a server gone silent must not hold the
        // caller (a store's deinit on the main actor) for good: the handler is not called once
        // `stopped` is set, whether or not the thread has ended.
        if finished.wait(timeout: .now() + 5) == .success { finished.signal() }
    }

    private func run() {
        defer { finished.signal() }
        let policy = configuration.listenerReconnection
        // Failed attempts to connect in a row.
        var failures = 0
        // Whether the history must be read at this turn: always after (re)connecting.
        var mustRead = true
        while !isStopped {
            // (Re)connect and listen again; then catch up from the history, which holds every
            // commit made meanwhile (a notification sent while the connection was down is lost,
            // the commit is not). Not reported as unavailable: a server away for a while only
            // delays other instances' commits, it loses none (unless the policy gives up).
            if connection == nil || connection!.isClosed {
                if let lost = connection {
                    lost.close()
                    connection = nil
                    _ = wake.wait(timeout: .now() + policy.delay(beforeAttempt: 1).timeInterval)
                    if isStopped { break }
                }
                do {
                    let opened = try PGConnection.open(configuration)
                    connection = opened
                    configuration.listenerConnected?()
                    let wake = self.wake, notices = self.notices, origin = self.origin, unacknowledged = self.unacknowledged
                    guard try opened.addListener(channel: channel, handler: { payload in
                        let waiting = notices.append(payload)
                        // This instance's own commits need no read (``skipOwnCommits(_:)``): they
                        // wait for the next wake-up or poll instead of waking the thread, on the
                        // cores the saving threads and the server share, after every save; a few
                        // dozen at most, whatever the poll interval.
                        if waiting < Self.ownNoticesWithoutWakeUp, let notice = HistoryNotice(payload: payload),
                           notice.origin == origin, unacknowledged.isEmpty { return }
                        wake.signal()
                    }) else {
                        throw PGConnectionLost(reason: "the connection was lost before the listener could listen")
                    }
                    // postgres-nio sent its own LISTEN, but tells nothing of the server's answer:
                    // this one, run after it, returns once the server listens, so the catch-up
                    // below misses no commit announced before it (a second LISTEN does nothing).
                    try opened.query("LISTEN \(SQLGenerator.quote(channel))")
                    failures = 0
                    mustRead = true
                    if isStopped { break }
                } catch {
                    connection?.close()
                    connection = nil
                    failures += 1
                    if let maximum = policy.maximumAttempts, failures >= maximum {
                        if !isStopped {
                            handler(.unavailable(LoomError(
                                .storeFailure,
                                "Other servers' commits to the PostgreSQL store at \(configuration.description) are no longer watched: the listener lost its connection and \(failures) attempt\(failures == 1 ? "" : "s") to connect again failed (the last: \(PostgreSQLStore.describe(error))).",
                                underlying: error)))
                        }
                        break
                    }
                    _ = wake.wait(timeout: .now() + policy.delay(beforeAttempt: failures + 1).timeInterval)
                    continue
                }
            }
            // A failed read is tried again at the next wake-up: `lastNumber` only moves past
            // what was handed on. A lost connection is replaced at the top of the loop.
            if let connection, mustRead { try? readHistory(connection) }
            if connection?.isClosed == true { continue }
            let woken = wake.wait(timeout: .now() + policy.pollInterval.timeInterval) == .success
            // Read at every poll (after moving over this instance's own commits, so that the
            // read is short); after a wake-up only when a notification is not this instance's
            // own next commit. A wake-up with no notice left was a notification the last
            // wake-up took already (or ``stop()``).
            let received = notices.take()
            let skipped = !received.isEmpty && skipOwnCommits(received)
            mustRead = woken ? !received.isEmpty && !skipped : true
        }
        connection?.close()
    }

    /// Moves the last number over `payloads` while each is this instance's own next commit
    /// (which it announced to its contexts itself) or one already read; returns whether all
    /// were. Any other — another instance's commit, a gap, a payload of a store made before
    /// notifications carried their row, a commit whose outcome this instance never learned
    /// waiting — needs a read of the history.
    private func skipOwnCommits(_ payloads: [String]) -> Bool {
        guard unacknowledged.isEmpty else { return false }
        for payload in payloads {
            guard let notice = HistoryNotice(payload: payload) else { return false }
            if notice.number <= lastNumber { continue }
            guard notice.number == lastNumber + 1, notice.origin == origin else { return false }
            let (foreign, localCommit) = origins.foreign([(notice.number, notice.origin, notice.commit)])
            guard foreign.isEmpty else { return false }
            origins.advance(to: localCommit)
            lastNumber = notice.number
        }
        configuration.listenerSkippedRead?()
        return true
    }

    /// Reads the history after `lastNumber` and hands on what other instances committed, and
    /// what this one committed without learning it (``UnacknowledgedCommits``): its contexts
    /// were never told of such a commit, so it reaches them as another instance's would, once.
    private func readHistory(_ connection: PGConnection) throws {
        configuration.listenerReadHistory?()
        var deletedBindings = PostgresBindings()
        deletedBindings.append(PostgreSQLStore.historyDeletedKey)
        let deleted = try connection.query("SELECT value::int8 FROM loom_metadata WHERE key = $1", deletedBindings).first.map { PostgreSQLValues.int64($0.first { _ in true }!) } ?? 0
        if deleted > lastNumber {
            let current = try connection.query("SELECT MAX(number) FROM loom_history").first.flatMap { row -> Int64? in
                let cell = row.first { _ in true }!
                return cell.bytes == nil ? nil : PostgreSQLValues.int64(cell)
            }
            let after = HistoryToken(storeIdentifier: store, transactionNumber: lastNumber)
            lastNumber = current ?? lastNumber
            if !isStopped { handler(.historyLost(after: after, current: current.map { HistoryToken(storeIdentifier: store, transactionNumber: $0) })) }
            return
        }
        var bindings = PostgresBindings()
        bindings.append(lastNumber)
        let rows = try connection.query("SELECT number, origin, origincommit, timestamp FROM loom_history WHERE number > $1 ORDER BY number", bindings).map { row -> (number: Int64, origin: Int64?, commit: Int64?, timestamp: Double?) in
            let values = try row.map(PostgreSQLValues.value)
            func integer(_ i: Int) -> Int64? { if case .integer(let v) = values[i] { v } else { nil } }
            let timestamp: Double? = if case .real(let v) = values[3] { v } else { nil }
            return (integer(0) ?? 0, integer(1), integer(2), timestamp)
        }
        guard let last = rows.last?.number else { return }
        let adopted = unacknowledged.adopt(rows, mine: origin)
        let found = rows.map { row in (number: row.number, origin: adopted.contains(row.number) ? nil : row.origin, commit: row.commit) }
        let (foreign, localCommit) = origins.foreign(found)
        if !foreign.isEmpty {
            var range = PostgresBindings()
            range.append(foreign.first!.number)
            range.append(foreign.last!.number)
            range.append(origin)
            range.append(adopted.sorted())
            let transactions = try PostgreSQLStore.historyTransactions(
                try connection.query("SELECT \(SQLHistory.columns) FROM loom_history WHERE number >= $1 AND number <= $2 AND (origin IS NULL OR origin <> $3 OR number = ANY($4)) AND changes IS NOT NULL ORDER BY number", range),
                on: connection, entityNames: nil, store: store, location: configuration.description)
            let committed = origins.ordered(transactions, foreign: foreign, localCommit: localCommit)
            if !committed.isEmpty, !isStopped { handler(.committed(committed)) }
        }
        origins.advance(to: localCommit)
        lastNumber = last
    }
}

/// What a notification on a store's channel says of the history row whose commit sent it:
/// `"number origin commit"`, `-` for a missing origin or commit (see
/// `PostgreSQLStore.notifyFunctionBody(channel:)`). A store made before notifications carried
/// their row sends an empty payload, which reads as no notice.
struct HistoryNotice: Equatable {
    let number: Int64
    let origin: Int64?
    let commit: Int64?

    init(number: Int64, origin: Int64?, commit: Int64?) {
        self.number = number
        self.origin = origin
        self.commit = commit
    }

    init?(payload: String) {
        let parts = payload.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 3, let number = Int64(parts[0]) else { return nil }
        func optional(_ part: Substring) -> Int64?? { part == "-" ? .some(nil) : Int64(part).map { .some($0) } }
        guard let origin = optional(parts[1]), let commit = optional(parts[2]) else { return nil }
        self.init(number: number, origin: origin, commit: commit)
    }
}

extension Duration {
    /// The duration in seconds, for Dispatch's deadlines.
    var timeInterval: Double { self / .seconds(1) }
}
