#pragma once
// Where test fixtures live: tests/data (upstream fixtures with their licences; tests/data/README.md) and the
// source and build trees.
#include <string>

namespace kindex::test {

inline std::string source_dir() { return KINDEX_SOURCE_DIR; }
inline std::string data_dir() { return std::string(KINDEX_SOURCE_DIR) + "/tests/data"; }
inline std::string binary_dir() { return KINDEX_BINARY_DIR; }

}  // namespace kindex::test
