#ifndef LOOM_FAULT_VFS_H
#define LOOM_FAULT_VFS_H

// A SQLite VFS for tests that fails one chosen I/O call, the way SQLite's own test suite does
// in its "I/O error" and "disk full" loops.
//
// It wraps the default VFS and is registered as the new default, so that every connection the
// process opens afterwards (GRDB's pool, Loom's reader connections, a migration's own queue)
// goes through it without any option. Only files whose path starts with the target prefix are
// watched; every other file is opened by the wrapped VFS itself, untouched, so that tests
// running beside the fault tests are not affected.
//
// Thread-safe: the state is atomic, and the target prefix is read under a lock.

#include <stdint.h>

/// What an injected fault returns.
typedef enum {
    /// The call's own `SQLITE_IOERR_*` code (read: `SQLITE_IOERR_READ`, write:
    /// `SQLITE_IOERR_WRITE`, sync: `SQLITE_IOERR_FSYNC`, …). Counts every read, write, sync,
    /// truncate, size, lock and shared-memory call; releasing a lock is neither counted nor
    /// failed (the real lock would stay held while SQLite believes it released).
    LOOM_FAULT_IO_ERROR = 0,
    /// `SQLITE_FULL`. Counts only the calls a full disk fails: writes, truncations and
    /// shared-memory mappings (which grow the `-shm` file).
    LOOM_FAULT_DISK_FULL = 1,
} LoomFaultKind;

/// Registers the fault VFS as the process's default SQLite VFS (once; later calls do nothing).
/// Returns `SQLITE_OK` or SQLite's error code.
int loom_fault_vfs_install(void);

/// Watches the files whose path starts with `prefix` (copied); `NULL` watches none. Files
/// already open keep the state they were opened with.
void loom_fault_vfs_set_target(const char *prefix);

/// Starts counting the watched files' calls of `kind` from zero, and fails call number
/// `fail_at` (1-based; 0: fail none, only count). `persistent`: every counted call from
/// `fail_at` on fails too, until ``loom_fault_vfs_disarm`` (a disk that stays full).
void loom_fault_vfs_arm(int64_t fail_at, LoomFaultKind kind, int persistent);

/// Stops failing calls ("the disk is repaired"); the counts stay readable.
void loom_fault_vfs_disarm(void);

/// How many calls of the armed kind were counted since ``loom_fault_vfs_arm``.
int64_t loom_fault_vfs_calls(void);

/// How many calls were failed since ``loom_fault_vfs_arm``.
int64_t loom_fault_vfs_injected(void);

/// The extended result code of the first fault injected since ``loom_fault_vfs_arm`` (0: none).
int loom_fault_vfs_first_code(void);

#endif
