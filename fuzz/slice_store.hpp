#pragma once
// The store the request-path fuzz targets query: in memory, holding the KernelIndex export slices (kernel and
// serving) that fuzz/CMakeLists.txt names, imported once per process.
#include <memory>

#include "store/import.hpp"
#include "store/store.hpp"

namespace kindex::fuzz {

inline store::Store& slice_store() {
  static const std::unique_ptr<store::Store> store = [] {
    auto s = store::Store::open(":memory:");
    store::import_files(*s, {KINDEX_FUZZ_SLICE, KINDEX_FUZZ_SERVING_SLICE});
    return s;
  }();
  return *store;
}

}  // namespace kindex::fuzz
