#include "CBenchSupport.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

uint64_t loom_bench_heap_in_use(void) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
    struct mallinfo2 info = mallinfo2();
    return (uint64_t)info.uordblks + (uint64_t)info.hblkhd;
#else
    return 0;
#endif
}

#ifndef LOOM_BENCH_LOOM_PATH
#define LOOM_BENCH_LOOM_PATH "?"
#endif

const char *loom_bench_loom_path(void) {
    return LOOM_BENCH_LOOM_PATH;
}
