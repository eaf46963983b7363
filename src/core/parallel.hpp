#pragma once
// parallel_for over [0, n) on all hardware threads (KINDEX_THREADS overrides), in contiguous chunks.
// The CPU references use it so the small workloads run in seconds on a 2-core machine.
#include <cstdint>
#include <functional>

namespace kindex {

int hardware_threads();
// Calls body(begin, end) on disjoint chunks covering [0, n); blocks until all are done; rethrows the first
// exception a chunk threw.
void parallel_for(int64_t n, const std::function<void(int64_t begin, int64_t end)>& body, int64_t min_chunk = 1);

}  // namespace kindex
