import Foundation
import GRDB
import LoomSQL
@_spi(LoomStore) import LoomCore
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Finds the commits other store instances (another coordinator, another process) make on a
/// store file, and hands them to the coordinator in commit order, each once.
///
/// One thread per store, with its own read-only connection. It sleeps until the `-wal` file is
/// written (inotify on Linux; elsewhere it polls every ``pollInterval``), then asks SQLite
/// whether the file changed (`PRAGMA data_version`, which moves when any other connection
/// commits), and if so reads the history after the last transaction it saw: the numbers and
/// origins first, then the whole rows of the transactions other instances committed. Its own
/// instance's transactions only tell it which local commit came before the others.
///
/// Its own store's saves write the `-wal` file too: a burst of them woke it about once a
/// millisecond, and each look read the history only to pass over what it found. The store now
/// tells it of its commits (``OwnCommits``): when every commit since its last look is known to
/// be the store's own, it moves past them without reading. Another instance's commit is never
/// passed over: one between two of the store's commits breaks the store's run, so the next look
/// reads; one after the store's last commit is read by the first look that finds no newer
/// commit of the store or a broken run, at most two wake-ups (a few milliseconds) later than
/// before.
///
/// An idle watcher costs a wake-up per ``safetyInterval`` (Linux) or ``pollInterval``
/// (elsewhere): one `PRAGMA data_version`.
///
/// `Sendable`: the thread owns the connection and the loop's state; `stopRequested` and the
/// pipe are the only things shared.
final class RemoteCommitWatcher: Sendable {
    /// Without inotify: how often `data_version` is read.
    static let pollInterval: Duration = .milliseconds(5)
    /// With inotify: how often `data_version` is read all the same (a write inotify did not
    /// report, such as one through another path to the file).
    static let safetyInterval: Duration = .milliseconds(500)
    /// After the `-wal` file was written and nothing more is: `data_version` is read again after
    /// 1, 2, 4… ms, up to this. A commit's last frame is written before SQLite marks it
    /// committed in the `-shm` index, so the wake-up that its write causes may come just before
    /// the commit shows.
    static let settleWindow: Duration = .milliseconds(32)
    /// How long a wake-up waits for more writes before it looks (seconds).
    static let coalescing: TimeInterval = 0.001
    /// While its store's own commits follow each other (writes unwatched): how often it looks.
    static let ownBurstInterval: Duration = .milliseconds(1)
    /// Tests only: milliseconds a new watcher's thread waits before it starts, as a thread of a
    /// loaded machine may.
    static let startDelayForTesting = Atomic<Int>(0)

    private let stopRequested = Atomic<Bool>(false)
    /// Wake-ups that moved past the store's own commits without reading (for tests).
    var skippedWakeUps: Int { skips.value.load(ordering: .relaxed) }
    private let skips = Counter()
    /// Written to by ``stop()`` to wake the thread; read end first.
    private let wakePipe: (Int32, Int32)
    private let finished = DispatchSemaphore(value: 0)
    /// Set when ``stop()`` was called on the watcher's own thread.
    private let stoppedFromWatcher = Atomic<Bool>(false)
    /// Set on the watcher's thread, so that ``stop()`` called from it (the handler releasing
    /// the last reference to the store) does not wait for itself.
    private static let isWatcherThread = ThreadLocalFlag()

    /// Starts watching the store at `path`, whose transactions committed through this instance
    /// carry `origin`, from the transaction after `after` (the last one when the store opened).
    /// `own` is what the store publishes of its commits.
    init(path: String, store: UUID, origin: Int64, own: OwnCommits, after: Int64, handler: @escaping @Sendable (RemoteCommits) -> Void) throws {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw LoomError(.storeFailure, "The remote-change watcher of \(path) could not make its wake-up pipe (errno \(errno)).", path: path) }
        wakePipe = (fds[0], fds[1])
        _ = fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK)
        let queue: DatabaseQueue
        do {
            // Not opened read-only, though it only reads: a read-only connection that has
            // shared the WAL index keeps the last connection's close from checkpointing the WAL
            // into the file (then a copy of the file alone misses the last commits).
            var configuration = Configuration()
            configuration.busyMode = .timeout(SQLiteStore.busyTimeout)
            queue = try DatabaseQueue(path: path, configuration: configuration)
        } catch {
            close(fds[0]); close(fds[1])
            throw error
        }
        let delay = Self.startDelayForTesting.load(ordering: .relaxed)
        let thread = Thread { [self] in
            Self.isWatcherThread.set()
            if delay > 0 { Thread.sleep(forTimeInterval: Double(delay) / 1_000) }
            var loop = Loop(queue: queue, path: path, store: store, origin: origin, own: own, skips: skips, lastNumber: after, handler: handler)
            loop.run(until: stopRequested, wake: wakePipe.0)
            try? queue.close()
            // Stopped from this thread (see stop()): nobody waits to close the pipe.
            if stoppedFromWatcher.load(ordering: .acquiring) {
                close(wakePipe.0)
                close(wakePipe.1)
            }
            finished.signal()
        }
        thread.name = "Loom remote changes"
        thread.start()
    }

    /// Stops the thread and waits for it (a read in progress finishes first). Call once.
    func stop() {
        stopRequested.store(true, ordering: .releasing)
        var byte: UInt8 = 1
        _ = write(wakePipe.1, &byte, 1)
        // From the watcher's own thread: it ends after this turn and closes the pipe itself.
        if Self.isWatcherThread.isSet {
            stoppedFromWatcher.store(true, ordering: .releasing)
            return
        }
        finished.wait()
        close(wakePipe.0)
        close(wakePipe.1)
    }

    /// The watcher thread's state.
    private struct Loop {
        let queue: DatabaseQueue
        let path: String
        let store: UUID
        let origin: Int64
        let own: OwnCommits
        let skips: Counter
        var lastNumber: Int64
        /// Which rows are this instance's, and the last of its commits seen.
        var origins: HistoryOrigins
        var dataVersion: Int64 = -1
        let handler: @Sendable (RemoteCommits) -> Void
        var inotify = INotify()

        init(queue: DatabaseQueue, path: String, store: UUID, origin: Int64, own: OwnCommits, skips: Counter, lastNumber: Int64, handler: @escaping @Sendable (RemoteCommits) -> Void) {
            self.queue = queue
            self.path = path
            self.store = store
            self.origin = origin
            self.own = own
            self.skips = skips
            self.origins = HistoryOrigins(mine: origin)
            self.lastNumber = lastNumber
            self.handler = handler
        }

        mutating func run(until stop: borrowing Atomic<Bool>, wake: Int32) {
            dataVersion = (try? currentDataVersion()) ?? -1
            // Commits made after the store read `lastNumber` but before this thread started are
            // already counted in `dataVersion`: without this read they would wait for the next
            // commit to be seen (and a coordinator opened just before another process's last
            // commit would miss it for good).
            try? readHistory()
            // After the file was written: when to look again if nothing more is written.
            var recheck: Duration?
            // While the store's own commits follow each other: writes are not watched (see
            // ``INotify/reportWrites(_:)``), and it looks once per `ownBurstInterval`.
            var inOwnBurst = false
            while !stop.load(ordering: .acquiring) {
                if !inotify.isWatching {
                    inotify.watch(path + "-wal")
                    inOwnBurst = false
                }
                let timeout = inOwnBurst ? RemoteCommitWatcher.ownBurstInterval
                    : recheck ?? (inotify.isWatching ? RemoteCommitWatcher.safetyInterval : RemoteCommitWatcher.pollInterval)
                let written = inotify.wait(timeout: timeout, alsoOn: wake)
                if stop.load(ordering: .acquiring) { break }
                if written {
                    // A burst of writes (a commit is several; saves may follow each other every
                    // few microseconds) is looked at once per `coalescing`, not once per write.
                    Thread.sleep(forTimeInterval: RemoteCommitWatcher.coalescing)
                    inotify.discardPending()
                    recheck = .milliseconds(1)
                } else if !inOwnBurst, let current = recheck {
                    recheck = current >= RemoteCommitWatcher.settleWindow ? nil : current * 2
                }
                if skipOwnCommits() {
                    // The store is committing: its commits tell whether another connection's
                    // came between (a broken run), so writes need not wake the watcher, and
                    // watching them cost each of the store's writes to the file.
                    if !inOwnBurst, inotify.isWatching {
                        inotify.reportWrites(false)
                        inOwnBurst = true
                    }
                    continue
                }
                if inOwnBurst {
                    // No newer commit of the store's own, or another connection's came between:
                    // writes are watched again before it looks, so none after the look is missed.
                    inotify.reportWrites(true)
                    inOwnBurst = false
                    recheck = .milliseconds(1)
                }
                guard let version = try? currentDataVersion(), version != dataVersion else { continue }
                dataVersion = version
                // A failed read (the file busy or going away) is tried again at the next wake-up:
                // `lastNumber` only moves past what was handed on.
                try? readHistory()
            }
            inotify.close()
        }

        /// Moves past the store's own commits without reading them, when every commit since
        /// the last one seen (``HistoryOrigins/lastLocalCommit``, whose commit and everything
        /// before it were read or skipped) is known to be the store's own: a later commit of the
        /// store in the same run (``OwnCommits``). Then no other instance's row lies between.
        mutating func skipOwnCommits() -> Bool {
            let seen = origins.lastLocalCommit
            guard let last = own.latest, last.sequence > seen, last.runStart <= seen else { return false }
            lastNumber = max(lastNumber, last.number)
            origins.advance(to: last.sequence)
            skips.value.add(1, ordering: .relaxed)
            return true
        }

        /// Runs `body` in a read transaction on the watcher's connection, with statements
        /// prepared once. Not `DatabaseQueue.read`: it turns `PRAGMA query_only` on and off
        /// around the transaction, and changing a flag pragma expires every prepared statement
        /// of the connection, so every look prepared its statements again (most of a look's
        /// work). This connection runs nothing but these reads.
        func inReadTransaction<T>(_ body: (Database) throws -> T) throws -> T {
            try queue.inDatabase { db in
                try db.cachedStatement(sql: "BEGIN DEFERRED TRANSACTION").execute()
                do {
                    let value = try body(db)
                    try db.cachedStatement(sql: "COMMIT TRANSACTION").execute()
                    return value
                } catch {
                    if db.isInsideTransaction { try? db.cachedStatement(sql: "ROLLBACK TRANSACTION").execute() }
                    throw error
                }
            }
        }

        func currentDataVersion() throws -> Int64 {
            try queue.inDatabase { db in try Int64.fetchOne(db.cachedStatement(sql: "PRAGMA data_version")) ?? 0 }
        }

        /// Reads the history after `lastNumber` and hands on what other instances committed.
        mutating func readHistory() throws {
            let (found, lost) = try inReadTransaction { db -> ([(number: Int64, origin: Int64?, commit: Int64?)], (Int64?)?) in
                let deleted = try Int64.fetchOne(
                    db.cachedStatement(sql: "SELECT CAST(value AS INTEGER) FROM loom_metadata WHERE key = ?"), arguments: [SQLiteStore.historyDeletedKey]) ?? 0
                if deleted > lastNumber {
                    return ([], (try Int64.fetchOne(db, sql: "SELECT MAX(number) FROM loom_history")))
                }
                let rows = try Row.fetchAll(db.cachedStatement(sql: "SELECT number, origin, originCommit FROM loom_history WHERE number > ? ORDER BY number"), arguments: [lastNumber])
                return (rows.map { ($0[0], $0[1], $0[2]) }, nil)
            }
            if let lost {
                let after = HistoryToken(storeIdentifier: store, transactionNumber: lastNumber)
                lastNumber = lost ?? lastNumber
                handler(.historyLost(after: after, current: lost.map { HistoryToken(storeIdentifier: store, transactionNumber: $0) }))
                return
            }
            guard let last = found.last?.number else { return }
            let (foreign, localCommit) = origins.foreign(found)
            if !foreign.isEmpty {
                let numbers = foreign.map(\.number)
                let transactions = try inReadTransaction { db in
                    try SQLiteStore.historyTransactions(
                        db, sql: "SELECT \(SQLiteStore.historyColumns) FROM loom_history WHERE number >= ? AND number <= ? AND (origin IS NULL OR origin != ?) AND changes IS NOT NULL ORDER BY number",
                        arguments: [numbers.first!, numbers.last!, origin], entityNames: nil, store: store, path: path)
                }
                let committed = origins.ordered(transactions, foreign: foreign, localCommit: localCommit)
                if !committed.isEmpty { handler(.committed(committed)) }
            }
            origins.advance(to: localCommit)
            lastNumber = last
        }
    }
}

/// What a store tells its watcher of its own commits, so that the watcher need not read the
/// history to find them: the history number and commit sequence of its last commit that wrote
/// history, and where the run of commits it belongs to started.
///
/// A run is a series of the store's commits with no other connection's commit between them:
/// the writer connection's data version (`SQLITE_FCNTL_DATA_VERSION`, which moves with every
/// commit of its own and with every change it finds at the start of a transaction, another
/// connection's commit) is the same at each commit's `BEGIN` as after the commit before it. Every
/// commit of the database from the run's first commit to its last is then the store's own. The
/// store's other writes (key reservations, deleting history) move the version too: the next
/// commit starts a new run, which costs the watcher one read, never a missed commit.
final class OwnCommits: Sendable {
    struct Last: Sendable, Equatable {
        /// The commit's ``CommitReceipt/sequence`` (`originCommit` in its history rows).
        var sequence: UInt64
        /// Its last history row.
        var number: Int64
        /// The sequence of the run's first commit.
        var runStart: UInt64
    }

    // A sequence lock, with atomics only (which ThreadSanitizer follows): `version` is odd while
    // the one writer (the store's, its write scope held) changes the fields, and moves by 2 with
    // every commit; a reader that finds it odd or moved while it read gets `nil`, as if nothing
    // were known yet, and reads the history. A lock would add its round trip to every save.
    private let version = Atomic<UInt64>(0)
    private let sequence = Atomic<UInt64>(0)
    private let number = Atomic<Int64>(0)
    private let runStart = Atomic<UInt64>(0)

    /// The last commit published (`nil`: none, or one being published).
    var latest: Last? {
        let before = version.load(ordering: .acquiring)
        guard before != 0, before & 1 == 0 else { return nil }
        let last = Last(sequence: sequence.load(ordering: .relaxed), number: number.load(ordering: .relaxed), runStart: runStart.load(ordering: .relaxed))
        atomicMemoryFence(ordering: .acquiring)
        return version.load(ordering: .relaxed) == before ? last : nil
    }

    /// Publishes a commit; from one thread at a time.
    func publish(_ commit: Last) {
        let before = version.load(ordering: .relaxed)
        version.store(before + 1, ordering: .relaxed)
        atomicMemoryFence(ordering: .releasing)
        sequence.store(commit.sequence, ordering: .relaxed)
        number.store(commit.number, ordering: .relaxed)
        runStart.store(commit.runStart, ordering: .relaxed)
        version.store(before + 2, ordering: .releasing)
    }
}

/// An inotify watch on one file (Linux); elsewhere never watching, so the loop polls.
private struct INotify {
    #if os(Linux)
    private var fd: Int32 = -1
    private var wd: Int32 = -1
    private var path = ""
    /// Where events are read, kept: a new one for every wake-up was most of a skipped look's
    /// work (zeroing 4 KB).
    private var buffer = [UInt8](repeating: 0, count: 4096)
    #endif

    var isWatching: Bool {
        #if os(Linux)
        wd >= 0
        #else
        false
        #endif
    }

    mutating func watch(_ path: String) {
        #if os(Linux)
        if fd < 0 { fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC)) }
        guard fd >= 0 else { return }
        self.path = path
        wd = inotify_add_watch(fd, path, Self.mask(writes: true))
        #endif
    }

    #if os(Linux)
    private static func mask(writes: Bool) -> UInt32 {
        UInt32((writes ? IN_MODIFY : 0) | IN_DELETE_SELF | IN_MOVE_SELF)
    }
    #endif

    /// Whether writes to the file are reported (they are once it is watched); its deletion or
    /// move always is. A watched write costs the writing process about half a microsecond in
    /// the kernel (an event made and merged into the queue): four per single-object save.
    mutating func reportWrites(_ writes: Bool) {
        #if os(Linux)
        guard wd >= 0 else { return }
        // Without IN_MASK_ADD: the watch's mask is replaced, and the same watch comes back,
        // unless the path now names another file.
        let changed = inotify_add_watch(fd, path, Self.mask(writes: writes))
        if changed != wd {
            _ = inotify_rm_watch(fd, wd)
            wd = changed
        }
        #endif
    }

    /// Sleeps until the watched file is written, `other` is readable, or `timeout` passes.
    /// Returns whether the file was written.
    mutating func wait(timeout: Duration, alsoOn other: Int32) -> Bool {
        let milliseconds = Int32(timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
        var fds = [pollfd(fd: other, events: Int16(POLLIN), revents: 0)]
        #if os(Linux)
        if wd >= 0 { fds.append(pollfd(fd: fd, events: Int16(POLLIN), revents: 0)) }
        #endif
        let ready = poll(&fds, nfds_t(fds.count), max(1, milliseconds))
        guard ready > 0 else { return false }
        #if os(Linux)
        if fds.count > 1, fds[1].revents & Int16(POLLIN) != 0 { return drain() }
        #endif
        return false
    }

    /// Drops the events that arrived meanwhile, whatever they are.
    mutating func discardPending() {
        #if os(Linux)
        if wd >= 0 { _ = drain() }
        #endif
    }

    #if os(Linux)
    /// Reads every pending event; a watch the kernel dropped (the file deleted or moved) is
    /// made again at the next turn.
    private mutating func drain() -> Bool {
        var written = false
        let fd = self.fd
        while true {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count <= 0 { break }
            var at = 0
            while at + MemoryLayout<inotify_event>.size <= count {
                let event = buffer.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: at, as: inotify_event.self) }
                if event.mask & UInt32(IN_MODIFY) != 0 { written = true }
                // Only the current watch's end counts (an earlier one's, replaced, may follow).
                if event.wd == wd, event.mask & UInt32(IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF) != 0 {
                    if wd >= 0 { _ = inotify_rm_watch(fd, wd) }
                    wd = -1
                    written = true
                }
                at += MemoryLayout<inotify_event>.size + Int(event.len)
            }
        }
        return written
    }
    #endif

    mutating func close() {
        #if os(Linux)
        if fd >= 0 { _ = Glibc.close(fd) }
        fd = -1
        wd = -1
        #endif
    }
}

/// A count shared with the watcher's thread.
private final class Counter: Sendable {
    let value = Atomic<Int>(0)
}

/// A flag set on some threads only.
private final class ThreadLocalFlag: Sendable {
    private let key: pthread_key_t

    init() {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        self.key = key
    }

    func set() { pthread_setspecific(key, UnsafeRawPointer(bitPattern: 1)) }
    var isSet: Bool { pthread_getspecific(key) != nil }
}
