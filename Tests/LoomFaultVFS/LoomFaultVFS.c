#include "LoomFaultVFS.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

// A watched file: the wrapped VFS's file follows this header in the same allocation.
typedef struct {
    sqlite3_file base;
    sqlite3_file *real;
} FaultFile;

static sqlite3_vfs *wrapped;
static sqlite3_vfs fault_vfs;
static sqlite3_io_methods fault_methods;

static pthread_mutex_t target_lock = PTHREAD_MUTEX_INITIALIZER;
static char *target;   // guarded by target_lock

static _Atomic int64_t fail_at;
static _Atomic int armed_kind;
static _Atomic int persistent;
static _Atomic int failing;   // 0 after disarm
static _Atomic int64_t calls;
static _Atomic int64_t injected;
static _Atomic int first_code;

// Counts a call and returns the code it fails with, or SQLITE_OK to run it. `disk_full_too`:
// the call is one that a full disk fails.
static int fault(int io_error_code, int disk_full_too) {
    int kind = atomic_load(&armed_kind);
    if (kind == LOOM_FAULT_DISK_FULL && !disk_full_too) return SQLITE_OK;
    int64_t number = atomic_fetch_add(&calls, 1) + 1;
    if (!atomic_load(&failing)) return SQLITE_OK;
    int64_t at = atomic_load(&fail_at);
    if (at == 0 || number < at || (number > at && !atomic_load(&persistent))) return SQLITE_OK;
    int code = kind == LOOM_FAULT_DISK_FULL ? SQLITE_FULL : io_error_code;
    int none = 0;
    atomic_compare_exchange_strong(&first_code, &none, code);
    atomic_fetch_add(&injected, 1);
    return code;
}

#define REAL(file) (((FaultFile *)(file))->real)

static int fault_close(sqlite3_file *file) {
    int rc = REAL(file)->pMethods->xClose(REAL(file));
    file->pMethods = NULL;
    return rc;
}

static int fault_read(sqlite3_file *file, void *buffer, int amount, sqlite3_int64 offset) {
    int rc = fault(SQLITE_IOERR_READ, 0);
    if (rc != SQLITE_OK) return rc;
    return REAL(file)->pMethods->xRead(REAL(file), buffer, amount, offset);
}

static int fault_write(sqlite3_file *file, const void *buffer, int amount, sqlite3_int64 offset) {
    int rc = fault(SQLITE_IOERR_WRITE, 1);
    if (rc != SQLITE_OK) return rc;
    return REAL(file)->pMethods->xWrite(REAL(file), buffer, amount, offset);
}

static int fault_truncate(sqlite3_file *file, sqlite3_int64 size) {
    int rc = fault(SQLITE_IOERR_TRUNCATE, 1);
    if (rc != SQLITE_OK) return rc;
    return REAL(file)->pMethods->xTruncate(REAL(file), size);
}

static int fault_sync(sqlite3_file *file, int flags) {
    int rc = fault(SQLITE_IOERR_FSYNC, 0);
    if (rc != SQLITE_OK) return rc;
    return REAL(file)->pMethods->xSync(REAL(file), flags);
}

static int fault_file_size(sqlite3_file *file, sqlite3_int64 *size) {
    int rc = fault(SQLITE_IOERR_FSTAT, 0);
    if (rc != SQLITE_OK) return rc;
    return REAL(file)->pMethods->xFileSize(REAL(file), size);
}

static int fault_lock(sqlite3_file *file, int level) {
    int rc = fault(SQLITE_IOERR_LOCK, 0);
    if (rc != SQLITE_OK) return rc;
    return REAL(file)->pMethods->xLock(REAL(file), level);
}

// Releasing a lock is never failed: the lock would stay held while SQLite believes it gone,
// which no disk does (the file's lock is the process's, and ends with it), and every later
// connection would wait on it.
static int fault_unlock(sqlite3_file *file, int level) {
    return REAL(file)->pMethods->xUnlock(REAL(file), level);
}

static int fault_check_reserved_lock(sqlite3_file *file, int *result) {
    int rc = fault(SQLITE_IOERR_CHECKRESERVEDLOCK, 0);
    if (rc != SQLITE_OK) return rc;
    return REAL(file)->pMethods->xCheckReservedLock(REAL(file), result);
}

static int fault_file_control(sqlite3_file *file, int op, void *argument) {
    return REAL(file)->pMethods->xFileControl(REAL(file), op, argument);
}

static int fault_sector_size(sqlite3_file *file) {
    return REAL(file)->pMethods->xSectorSize(REAL(file));
}

static int fault_device_characteristics(sqlite3_file *file) {
    return REAL(file)->pMethods->xDeviceCharacteristics(REAL(file));
}

static int fault_shm_map(sqlite3_file *file, int region, int size, int extend, void volatile **address) {
    int rc = fault(SQLITE_IOERR_SHMMAP, 1);
    if (rc != SQLITE_OK) return rc;
    return REAL(file)->pMethods->xShmMap(REAL(file), region, size, extend, address);
}

static int fault_shm_lock(sqlite3_file *file, int offset, int count, int flags) {
    // Only taking a lock fails, as for `fault_unlock`.
    int rc = (flags & SQLITE_SHM_LOCK) ? fault(SQLITE_IOERR_SHMLOCK, 0) : SQLITE_OK;
    if (rc != SQLITE_OK) return rc;
    return REAL(file)->pMethods->xShmLock(REAL(file), offset, count, flags);
}

static void fault_shm_barrier(sqlite3_file *file) {
    REAL(file)->pMethods->xShmBarrier(REAL(file));
}

static int fault_shm_unmap(sqlite3_file *file, int delete_flag) {
    return REAL(file)->pMethods->xShmUnmap(REAL(file), delete_flag);
}

static int fault_fetch(sqlite3_file *file, sqlite3_int64 offset, int amount, void **pointer) {
    return REAL(file)->pMethods->xFetch(REAL(file), offset, amount, pointer);
}

static int fault_unfetch(sqlite3_file *file, sqlite3_int64 offset, void *pointer) {
    return REAL(file)->pMethods->xUnfetch(REAL(file), offset, pointer);
}

static int is_target(const char *name) {
    if (name == NULL) return 0;
    pthread_mutex_lock(&target_lock);
    int matches = target != NULL && strncmp(name, target, strlen(target)) == 0;
    pthread_mutex_unlock(&target_lock);
    return matches;
}

static int fault_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *file, int flags, int *out_flags) {
    (void)vfs;
    // Not watched: the wrapped VFS's own file, in place, with its own methods.
    if (!is_target(name)) return wrapped->xOpen(wrapped, name, file, flags, out_flags);
    FaultFile *fault_file = (FaultFile *)file;
    fault_file->real = (sqlite3_file *)(fault_file + 1);
    int rc = wrapped->xOpen(wrapped, name, fault_file->real, flags, out_flags);
    if (fault_file->real->pMethods == NULL) {
        file->pMethods = NULL;
        return rc;
    }
    file->pMethods = &fault_methods;
    return rc;
}

static int fault_delete(sqlite3_vfs *vfs, const char *name, int sync_directory) {
    (void)vfs;
    return wrapped->xDelete(wrapped, name, sync_directory);
}

static int fault_access(sqlite3_vfs *vfs, const char *name, int flags, int *result) {
    (void)vfs;
    return wrapped->xAccess(wrapped, name, flags, result);
}

static int fault_full_pathname(sqlite3_vfs *vfs, const char *name, int size, char *output) {
    (void)vfs;
    return wrapped->xFullPathname(wrapped, name, size, output);
}

static void *fault_dl_open(sqlite3_vfs *vfs, const char *name) {
    (void)vfs;
    return wrapped->xDlOpen(wrapped, name);
}

static void fault_dl_error(sqlite3_vfs *vfs, int size, char *message) {
    (void)vfs;
    wrapped->xDlError(wrapped, size, message);
}

static void (*fault_dl_sym(sqlite3_vfs *vfs, void *handle, const char *symbol))(void) {
    (void)vfs;
    return wrapped->xDlSym(wrapped, handle, symbol);
}

static void fault_dl_close(sqlite3_vfs *vfs, void *handle) {
    (void)vfs;
    wrapped->xDlClose(wrapped, handle);
}

static int fault_randomness(sqlite3_vfs *vfs, int size, char *output) {
    (void)vfs;
    return wrapped->xRandomness(wrapped, size, output);
}

static int fault_sleep(sqlite3_vfs *vfs, int microseconds) {
    (void)vfs;
    return wrapped->xSleep(wrapped, microseconds);
}

static int fault_current_time(sqlite3_vfs *vfs, double *time) {
    (void)vfs;
    return wrapped->xCurrentTime(wrapped, time);
}

static int fault_get_last_error(sqlite3_vfs *vfs, int size, char *message) {
    (void)vfs;
    return wrapped->xGetLastError(wrapped, size, message);
}

static int fault_current_time_int64(sqlite3_vfs *vfs, sqlite3_int64 *time) {
    (void)vfs;
    return wrapped->xCurrentTimeInt64(wrapped, time);
}

static int fault_set_system_call(sqlite3_vfs *vfs, const char *name, sqlite3_syscall_ptr call) {
    (void)vfs;
    return wrapped->xSetSystemCall(wrapped, name, call);
}

static sqlite3_syscall_ptr fault_get_system_call(sqlite3_vfs *vfs, const char *name) {
    (void)vfs;
    return wrapped->xGetSystemCall(wrapped, name);
}

static const char *fault_next_system_call(sqlite3_vfs *vfs, const char *name) {
    (void)vfs;
    return wrapped->xNextSystemCall(wrapped, name);
}

static int install_result = SQLITE_ERROR;
static pthread_once_t install_once = PTHREAD_ONCE_INIT;

static void install(void) {
    wrapped = sqlite3_vfs_find(NULL);
    if (wrapped == NULL) return;
    fault_methods = (sqlite3_io_methods){
        .iVersion = 3,
        .xClose = fault_close,
        .xRead = fault_read,
        .xWrite = fault_write,
        .xTruncate = fault_truncate,
        .xSync = fault_sync,
        .xFileSize = fault_file_size,
        .xLock = fault_lock,
        .xUnlock = fault_unlock,
        .xCheckReservedLock = fault_check_reserved_lock,
        .xFileControl = fault_file_control,
        .xSectorSize = fault_sector_size,
        .xDeviceCharacteristics = fault_device_characteristics,
        .xShmMap = fault_shm_map,
        .xShmLock = fault_shm_lock,
        .xShmBarrier = fault_shm_barrier,
        .xShmUnmap = fault_shm_unmap,
        .xFetch = fault_fetch,
        .xUnfetch = fault_unfetch,
    };
    fault_vfs = (sqlite3_vfs){
        .iVersion = wrapped->iVersion < 3 ? wrapped->iVersion : 3,
        .szOsFile = (int)sizeof(FaultFile) + wrapped->szOsFile,
        .mxPathname = wrapped->mxPathname,
        .zName = "loom-fault",
        .xOpen = fault_open,
        .xDelete = fault_delete,
        .xAccess = fault_access,
        .xFullPathname = fault_full_pathname,
        .xDlOpen = fault_dl_open,
        .xDlError = fault_dl_error,
        .xDlSym = fault_dl_sym,
        .xDlClose = fault_dl_close,
        .xRandomness = fault_randomness,
        .xSleep = fault_sleep,
        .xCurrentTime = fault_current_time,
        .xGetLastError = fault_get_last_error,
        .xCurrentTimeInt64 = fault_current_time_int64,
        .xSetSystemCall = fault_set_system_call,
        .xGetSystemCall = fault_get_system_call,
        .xNextSystemCall = fault_next_system_call,
    };
    install_result = sqlite3_vfs_register(&fault_vfs, 1);
}

int loom_fault_vfs_install(void) {
    pthread_once(&install_once, install);
    return install_result;
}

void loom_fault_vfs_set_target(const char *prefix) {
    char *copy = prefix == NULL ? NULL : strdup(prefix);
    pthread_mutex_lock(&target_lock);
    free(target);
    target = copy;
    pthread_mutex_unlock(&target_lock);
}

void loom_fault_vfs_arm(int64_t at, LoomFaultKind kind, int stays) {
    atomic_store(&failing, 0);
    atomic_store(&calls, 0);
    atomic_store(&injected, 0);
    atomic_store(&first_code, 0);
    atomic_store(&fail_at, at);
    atomic_store(&armed_kind, (int)kind);
    atomic_store(&persistent, stays);
    atomic_store(&failing, 1);
}

void loom_fault_vfs_disarm(void) {
    atomic_store(&failing, 0);
}

int64_t loom_fault_vfs_calls(void) { return atomic_load(&calls); }

int64_t loom_fault_vfs_injected(void) { return atomic_load(&injected); }

int loom_fault_vfs_first_code(void) { return atomic_load(&first_code); }
