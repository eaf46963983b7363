// Fuzzes the safetensors reader: header length, header JSON, dtypes, shapes against byte lengths, offsets.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "catalog/safetensors.hpp"
#include "core/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto file = kindex::catalog::parse_safetensors(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
    // What was read must serialize and read back the same.
    auto again = kindex::catalog::parse_safetensors(kindex::catalog::serialize_safetensors(file.tensors, file.metadata),
                                                    "fuzz-roundtrip");
    if (again.tensors.size() != file.tensors.size()) __builtin_trap();
  } catch (const kindex::Error&) {
  }
  return 0;
}
