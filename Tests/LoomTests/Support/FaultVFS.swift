import Foundation
import LoomFaultVFS

/// The fault-injecting SQLite VFS (Tests/LoomFaultVFS) seen from Swift: it watches the files
/// under one folder and fails one chosen I/O call of theirs.
///
/// Its state is the process's: the tests that use it run one at a time (`.serialized`), and
/// files outside the watched folder, which other suites open meanwhile, are never counted or
/// failed.
enum FaultVFS {
    /// What an injected fault looks like to SQLite.
    enum Kind: String, CaseIterable, Sendable, CustomStringConvertible {
        /// The call's own `SQLITE_IOERR_*` code, once: a flaky disk.
        case ioError
        /// `SQLITE_FULL` on a write, truncation or shared-memory mapping, and on every such call
        /// after it until the disk is repaired: a disk that stays full.
        case diskFull
        /// The call's own `SQLITE_IOERR_*` code, and on every counted call after it (reads,
        /// syncs, locks and shared memory too) until the disk is repaired: a disk that stopped
        /// answering, where even a rollback's reads fail.
        case failingDisk

        var description: String { rawValue }
        var cKind: LoomFaultKind { self == .diskFull ? LOOM_FAULT_DISK_FULL : LOOM_FAULT_IO_ERROR }
        var persistent: Bool { self != .ioError }
        /// SQLite's primary result code for this kind of fault.
        var primaryCode: Int32 { self == .diskFull ? 13 : 10 }   // SQLITE_FULL, SQLITE_IOERR
    }

    /// Makes the fault VFS the process's default (once).
    static func install() {
        let code = loom_fault_vfs_install()
        precondition(code == 0, "the fault VFS could not be registered (SQLite error \(code))")
    }

    /// Watches the files under `folder` (`nil`: none).
    static func watch(_ folder: URL?) {
        if let folder { loom_fault_vfs_set_target(folder.path + "/") } else { loom_fault_vfs_set_target(nil) }
    }

    /// Counts the watched files' calls of `kind` from zero and fails call `failAt` (0: none).
    static func arm(failAt: Int, kind: Kind) {
        loom_fault_vfs_arm(Int64(failAt), kind.cKind, kind.persistent ? 1 : 0)
    }

    /// Stops failing calls: the disk is repaired.
    static func disarm() { loom_fault_vfs_disarm() }

    /// The calls counted since ``arm(failAt:kind:)``.
    static var calls: Int { Int(loom_fault_vfs_calls()) }

    /// The calls failed since ``arm(failAt:kind:)``.
    static var injected: Int { Int(loom_fault_vfs_injected()) }

    /// The extended code of the first fault injected since ``arm(failAt:kind:)`` (0: none).
    static var firstCode: Int32 { loom_fault_vfs_first_code() }
}
