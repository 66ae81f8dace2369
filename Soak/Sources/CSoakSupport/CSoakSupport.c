#include "CSoakSupport.h"
#if defined(__GLIBC__)
#include <malloc.h>
#endif

loom_soak_heap loom_soak_heap_state(void) {
    loom_soak_heap state = {0, 0};
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
    struct mallinfo2 info = mallinfo2();
    state.in_use = (uint64_t)info.uordblks + (uint64_t)info.hblkhd;
    state.held = (uint64_t)info.arena + (uint64_t)info.hblkhd;
#endif
    return state;
}
