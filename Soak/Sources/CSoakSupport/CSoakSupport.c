#include "CSoakSupport.h"
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
#define LOOM_SOAK_MALLINFO2 1
#endif

uint64_t loom_soak_heap_in_use(void) {
#ifdef LOOM_SOAK_MALLINFO2
    struct mallinfo2 info = mallinfo2();
    return (uint64_t)info.uordblks + (uint64_t)info.hblkhd;
#else
    return 0;
#endif
}

uint64_t loom_soak_heap_held(void) {
#ifdef LOOM_SOAK_MALLINFO2
    struct mallinfo2 info = mallinfo2();
    return (uint64_t)info.arena + (uint64_t)info.hblkhd;
#else
    return 0;
#endif
}
