#pragma once
// Moved to runner/execute/libraries.hpp. Kept for tests/gpu/test_decode.cpp, which another change owns now; include runner/execute/libraries.hpp instead and drop this file
// once nothing includes it.
#include "runner/execute/libraries.hpp"
