// Any bytes as one file handed to `kindex import` (into an in-memory store): whatever the content looks like (an
// export, trace lines, run records, a manifest), the importer refuses bad input with kindex::Error and leaves the
// store consistent; it never crashes, hangs or reads out of bounds.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <filesystem>
#include <string>

#include "core/error.hpp"
#include "store/import.hpp"
#include "store/store.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path =
      (std::filesystem::temp_directory_path() / ("kindex-fuzz-import-" + std::to_string(::getpid()))).string();
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data),
                                                                 static_cast<std::streamsize>(size));
  static auto store = kindex::store::Store::open(":memory:");
  try {
    kindex::store::import_files(*store, {path});
  } catch (const kindex::Error&) {
  }
  return 0;
}
