#pragma once
// Moved to runner/measurement.hpp. Kept for benchmarks/gpu/bench_decode.cu, which another change owns now; include runner/measurement.hpp instead and drop this file
// once nothing includes it.
#include "runner/measurement.hpp"
