#ifndef LOOM_SOAK_SUPPORT_H
#define LOOM_SOAK_SUPPORT_H

#include <stdint.h>

/// Bytes in use through malloc in this process, every arena: glibc's `mallinfo2().uordblks +
/// mallinfo2().hblkhd`. 0 where mallinfo2 is not available.
uint64_t loom_soak_heap_in_use(void);

/// Bytes malloc holds from the system: `mallinfo2().arena + mallinfo2().hblkhd` (in use or kept
/// after being freed). 0 where mallinfo2 is not available.
uint64_t loom_soak_heap_held(void);

#endif
