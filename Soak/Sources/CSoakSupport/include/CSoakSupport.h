#ifndef LOOM_SOAK_SUPPORT_H
#define LOOM_SOAK_SUPPORT_H

#include <stdint.h>

/// Malloc's state, from glibc's `mallinfo2` (all zero where it is not available): `in_use` is
/// what is allocated (`uordblks + hblkhd`), `held` what malloc holds from the system, in use or
/// kept after being freed (`arena + hblkhd`).
typedef struct {
    uint64_t in_use;
    uint64_t held;
} loom_soak_heap;

loom_soak_heap loom_soak_heap_state(void);

#endif
