#pragma once
// Where test fixtures live: ../shared (reference material, tests only) and the source tree.
#include <cstdlib>
#include <string>

namespace kindex::test {

inline std::string shared_dir() {
  if (const char* env = std::getenv("KINDEX_SHARED_DIR")) return env;
  return KINDEX_SHARED_DIR;
}
inline std::string source_dir() { return KINDEX_SOURCE_DIR; }
inline std::string binary_dir() { return KINDEX_BINARY_DIR; }

}  // namespace kindex::test
