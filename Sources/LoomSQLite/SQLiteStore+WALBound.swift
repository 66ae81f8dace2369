import Foundation
import GRDB
import GRDBSQLite
import Synchronization

/// Keeps the write-ahead log bounded while readers never stop.
///
/// SQLite copies the log into the database file (a checkpoint) every thousand pages, but it
/// starts the log over only at a moment when no reader is using it. A store read without pause
/// (a server's request contexts, a pinned query generation, a live query) never has that
/// moment, and the log grows without bound: SQLite's "checkpoint starvation" (`wal.html`,
/// "Avoiding Excessively Large WAL Files"). So once the log passes
/// ``SQLiteStore/Options/maximumWALSize``, the writer, after its commit, runs a `TRUNCATE`
/// checkpoint, which waits for the readers of the old log to finish and starts the log over at
/// size zero. It waits briefly (``restartWait``): a reader holding an old snapshot (a pinned
/// query generation) makes it give up rather than stall the save, and it tries again once the
/// log grew by a quarter of the bound more.
///
/// The log's length comes from SQLite's WAL hook, which tells the committing connection how
/// many pages the log holds: no call to the file system per save. The hook replaces SQLite's
/// automatic checkpoint (`sqlite3_wal_autocheckpoint` is itself a WAL hook), so it does that
/// checkpoint too, as SQLite's own does.
///
/// `Sendable`: its state is atomic; the hook runs on the writer, the readers read `frames`.
final class WALBound: Sendable {
    /// Pages in the log after this store's last commit.
    private let frames = Atomic<Int32>(0)
    /// The database's page size, in bytes (read when the writer opened).
    private let pageSize = Atomic<Int>(4096)
    /// The log's length, in pages, at which the next restart is tried.
    private let nextTry = Atomic<Int32>(0)
    /// ``SQLiteStore/Options/maximumWALSize``, in bytes.
    let maximumSize: Int

    /// How long a restart waits for the readers of the old log.
    static let restartWait: Duration = .milliseconds(100)
    /// SQLite's automatic checkpoint: a passive one once the log holds this many pages.
    static let automaticCheckpointPages: Int32 = 1000

    init(maximumSize: Int) {
        self.maximumSize = maximumSize
    }

    /// The log's content after the last commit, in bytes.
    var logBytes: Int { Int(frames.load(ordering: .relaxed)) * pageSize.load(ordering: .relaxed) }

    /// Installs the hook on a writing connection of the store (readers never commit); the
    /// bound outlives it (the pool's configuration keeps it).
    func install(on db: Database) throws {
        guard !db.configuration.readonly, let connection = db.sqliteConnection else { return }
        if let size = try Int.fetchOne(db, sql: "PRAGMA page_size"), size > 0 { pageSize.store(size, ordering: .relaxed) }
        nextTry.store(pages(maximumSize), ordering: .relaxed)
        sqlite3_wal_hook(connection, { context, connection, database, frames in
            guard let context else { return SQLITE_OK }
            Unmanaged<WALBound>.fromOpaque(context).takeUnretainedValue().frames.store(frames, ordering: .relaxed)
            // What SQLite's automatic checkpoint does, which this hook replaces.
            if frames >= WALBound.automaticCheckpointPages { sqlite3_wal_checkpoint(connection, database) }
            return SQLITE_OK
        }, Unmanaged.passUnretained(self).toOpaque())
    }

    /// `bytes` in pages, at least one.
    private func pages(_ bytes: Int) -> Int32 {
        Int32(clamping: max(1, bytes / max(1, pageSize.load(ordering: .relaxed))))
    }

    /// After a commit on the writer, outside any transaction: restarts the log when it passed
    /// the bound. A failure (readers kept the old log past the wait, or an I/O error) is left
    /// for the next try; the commit is done either way.
    func restartIfLarge(_ db: Database) {
        let frames = frames.load(ordering: .relaxed)
        guard frames >= nextTry.load(ordering: .relaxed), !db.isInsideTransaction, let connection = db.sqliteConnection else { return }
        sqlite3_busy_timeout(connection, Int32(Self.restartWait / .milliseconds(1)))
        var log: Int32 = 0
        var copied: Int32 = 0
        let code = sqlite3_wal_checkpoint_v2(connection, nil, SQLITE_CHECKPOINT_TRUNCATE, &log, &copied)
        // Back to the writer's own wait (the pool's `busyMode`, which GRDB sets the same way).
        sqlite3_busy_timeout(connection, Int32(SQLiteStore.busyTimeout * 1000))
        if code == SQLITE_OK {
            self.frames.store(0, ordering: .relaxed)
            nextTry.store(pages(maximumSize), ordering: .relaxed)
        } else {
            nextTry.store(frames &+ pages(maximumSize / 4), ordering: .relaxed)
        }
    }
}
