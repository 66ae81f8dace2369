#ifndef LOOM_BENCH_SUPPORT_H
#define LOOM_BENCH_SUPPORT_H

#include <stdint.h>

/// Bytes currently allocated through malloc in this process, in every arena: glibc's
/// `mallinfo2().uordblks + mallinfo2().hblkhd` (in-use chunks, malloc's headers included, plus
/// mmapped chunks). 0 where mallinfo2 is not available.
uint64_t loom_bench_heap_in_use(void);

/// The Loom checkout the benchmarks were built against (Package.swift defines it).
const char *loom_bench_loom_path(void);

#endif
