import Foundation
import Synchronization

/// Who holds a store's write, and the commits made through it: the one place that knows.
///
/// A store composes one and runs every write through it: a change set applied alone
/// (``write(_:)`` then ``asOwner(_:)`` and ``commit()``), a write transaction
/// (``transaction(begin:_:commit:rollBack:)``), a key reservation, a migration, closing
/// (``close(_:)``). Writes are serial: each holds the scope's gate for its whole length, which
/// the thread holding it may take again. While a thread holds the write, its reads go where
/// they see its uncommitted writes (``isHeldByCurrentThread``), and the coordinator keeps what
/// it reads out of the shared cache.
///
/// The scope also numbers the commits (``CommitReceipt/sequence``: 1, 2, 3… with no gaps; a
/// write that fails takes no number) and remembers that the store was closed.
///
/// `Sendable`; every method may be called from any thread.
@_spi(LoomStore) public final class WriteScope: Sendable {
    /// Held by every write for its whole length (recursive: a thread holding the write may
    /// write again, as a change set applied inside its transaction does).
    private let gate = NSRecursiveLock()
    /// The thread that holds the write (0: none). Read without a lock, relaxed: only the
    /// holding thread sets it to its own ID (and back to 0), so a thread comparing it with its
    /// own ID sees the truth, and every other thread passes without taking the gate.
    private let owner = Atomic<UInt>(0)
    /// The last commit's sequence number; changed only with the gate held.
    private let sequence = Atomic<UInt64>(0)
    private let closedFlag = Atomic<Bool>(false)
    private let closedError: @Sendable () -> LoomError

    /// Creates the scope of a store that has made no commit yet.
    ///
    /// - Parameter closedError: the error every write throws once the store is closed, naming
    ///   the store (its path or server).
    public init(closedError: @escaping @Sendable () -> LoomError) {
        self.closedError = closedError
    }

    /// Whether the calling thread holds the write: inside a write transaction, or while it
    /// applies a change set alone. Its reads must see its uncommitted writes, and must not reach
    /// a cache other threads read. No lock.
    public var isHeldByCurrentThread: Bool {
        let holder = owner.load(ordering: .relaxed)
        return holder != 0 && holder == ThreadID.current
    }

    /// The sequence number of the last commit (0 before the first).
    public var lastCommitSequence: UInt64 { sequence.load(ordering: .relaxed) }

    /// The receipt the write transaction the calling thread holds will commit under: what a
    /// change set applied inside it returns.
    public var receiptOfOpenTransaction: CommitReceipt { CommitReceipt(sequence: lastCommitSequence + 1) }

    /// Whether ``close(_:)`` ran.
    public var isClosed: Bool { closedFlag.load(ordering: .acquiring) }

    /// Throws the store's ``LoomError/Code/closed`` error once the store is closed.
    public func checkOpen() throws(LoomError) {
        if isClosed { throw closedError() }
    }

    /// The store's ``LoomError/Code/closed`` error.
    public func closed() -> LoomError { closedError() }

    /// Runs `body` holding the gate, without checking that the store is open: for work on the
    /// writer that closing must wait for (a diagnostic read, a history deletion).
    public func exclusively<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        gate.lock()
        defer { gate.unlock() }
        return try body()
    }

    /// Runs a write: waits for the gate, then throws ``LoomError/Code/closed`` if the store was
    /// closed meanwhile, else runs `body` holding the gate.
    public func write<T>(_ body: () throws(LoomError) -> T) throws(LoomError) -> T {
        try checkOpen()
        gate.lock()
        defer { gate.unlock() }
        try checkOpen()
        return try body()
    }

    /// Runs `body` as the holder of the write (``isHeldByCurrentThread`` true), for a change set
    /// applied alone: its reads of the store (the conflicts of a refusal) see its transaction.
    /// Only inside ``write(_:)`` or ``exclusively(_:)``.
    public func asOwner<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        owner.store(ThreadID.current, ordering: .relaxed)
        defer { owner.store(0, ordering: .relaxed) }
        return try body()
    }

    /// Numbers a commit just made (the gate held) and returns its receipt.
    public func commit() -> CommitReceipt {
        let next = sequence.load(ordering: .relaxed) + 1
        sequence.store(next, ordering: .relaxed)
        return CommitReceipt(sequence: next)
    }

    /// Runs one write transaction: `begin` opens it on the store's writer, `body` runs with the
    /// calling thread holding the write (its calls of the store run inside the transaction),
    /// then `commit` commits it and the commit is numbered. If `begin`, `body` or `commit`
    /// throws, `rollBack` ends the transaction and the error is rethrown unchanged; the
    /// transaction takes no number.
    ///
    /// Traps when the calling thread already holds a write transaction of this store: the
    /// inner one could not commit on its own.
    public func transaction<T>(
        begin: () throws -> Void, _ body: () throws -> T, commit commitTransaction: () throws -> Void, rollBack: () -> Void
    ) throws -> (value: T, receipt: CommitReceipt) {
        try checkOpen()
        gate.lock()
        defer { gate.unlock() }
        if isHeldByCurrentThread { fatalError("A write transaction was opened inside another on the same thread and store.") }
        try checkOpen()
        try begin()
        let value: T
        do {
            value = try asOwner(body)
            try commitTransaction()
        } catch {
            rollBack()
            throw error
        }
        return (value, commit())
    }

    /// Runs the write that opens the store (creating its tables, or checking them and migrating
    /// them to the model), in the opener's own transaction, before any other write. A migration
    /// is a commit as a save is: it takes the next number, and its receipt is returned; `nil`
    /// when `body` says it migrated nothing (a new store, or one already on the model).
    public func opening<T>(_ body: () throws(LoomError) -> (value: T, migrated: Bool)) throws(LoomError) -> (value: T, migration: CommitReceipt?) {
        try write { () throws(LoomError) -> (value: T, migration: CommitReceipt?) in
            let outcome = try asOwner(body)
            return (outcome.value, outcome.migrated ? commit() : nil)
        }
    }

    /// Closes the store once: waits for a write in progress to finish, marks the scope closed
    /// (every later write throws ``LoomError/Code/closed``), and runs `body`, which releases the
    /// store's resources. Closing again does nothing.
    public func close<E: Error>(_ body: () throws(E) -> Void) throws(E) {
        gate.lock()
        defer { gate.unlock() }
        guard !closedFlag.exchange(true, ordering: .acquiringAndReleasing) else { return }
        try body()
    }
}

extension PersistentStore {
    /// The last commit's number, as the store's ``writeScope`` counted it.
    @_spi(LoomStore) public var lastCommitSequence: UInt64 { writeScope.lastCommitSequence }
}
