#pragma once
// Moved to runner/record/floors.hpp. Kept for benchmarks/gpu/bench_decode.cu, which another change owns now; include runner/record/floors.hpp instead and drop this file
// once nothing includes it.
#include "runner/record/floors.hpp"
