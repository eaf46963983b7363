#pragma once
// The shared libraries the runner loads at run time. The runner reaches every GPU implementation through kindex's
// C ABI (include/kindex/kindex.h) in a library it dlopens: libkindex.so (the product), libkindex_gpu_reference.so
// (the simple GPU references and the calibration), or anyone's. So the CLI itself links no cuBLASLt and needs no GPU
// driver to start: the index half runs on a machine without either.
#include <string>

#include "catalog/inputs.hpp"
#include "core/error.hpp"
#include "kindex/gpu_reference.h"
#include "kindex/kindex.h"

namespace kindex::runner {

// Where kindex's own libraries live: <directory of the running executable>/../lib (the build tree's layout:
// build/bin/kindex and build/tests/* beside build/lib/).
std::string library_dir();

// The entry points of kindex's C ABI in one loaded library; a family it does not export stays nullptr.
struct CAbi {
  decltype(&kindex_paged_decode) decode = nullptr;
  decltype(&kindex_paged_decode_workspace_size) decode_workspace = nullptr;
  decltype(&kindex_gqa_rope_backward) backward = nullptr;
  decltype(&kindex_gqa_rope_backward_workspace_size) backward_workspace = nullptr;
  decltype(&kindex_last_error) last_error = nullptr;
  const char* (*version)() = nullptr;  // optional
  int (*host_pointers)() = nullptr;    // optional: non-zero = a CPU library that takes host pointers
  void* handle = nullptr;              // loaded for the life of the process
};

// Loads `path` (qualified so dlopen never searches LD_LIBRARY_PATH for a bare name) and looks up the C ABI.
// Throws Error(where, field, value, why) if it cannot be loaded or exports neither family with kindex_last_error
// (`value`: the argument as the user gave it, e.g. "external:./libmy.so").
CAbi load_c_abi(const std::string& path, const std::string& where, const std::string& field,
                const std::string& value);

// libkindex_gpu_reference.so's calibration entry points (kindex/gpu_reference.h), or nullptr where this build has
// no such library (no CUDA) or it cannot be loaded.
struct Calibration {
  kindex_status (*measure_rates)(double* copy_bytes_per_s, double* gemm_flops_per_s) = nullptr;
  const char* (*nvcc_version)() = nullptr;
  const char* (*cublaslt_version)() = nullptr;
};
const Calibration* calibration();

// libkindex_gpu_reference.so's input generator (kindex/gpu_reference.h), or nullptr where there is none.
struct DeviceGenerator {
  kindex_status (*fill_random)(const kindex_random_fill* fill, void* out, void* stream) = nullptr;
  const char* (*last_error)() = nullptr;
};
const DeviceGenerator* device_generator();
// libkindex_gpu_reference.so's comparator (kindex/gpu_reference.h: kindex_gpu_reference_compare), or nullptr.
struct DeviceComparator {
  decltype(&kindex_gpu_reference_compare) compare = nullptr;
  const char* (*last_error)() = nullptr;
};
const DeviceComparator* device_comparator();
// The generator's description of `fill` drawn from `seed` (the one translation of catalog::RandomFill to the C ABI).
// Throws RunFailure for a dtype the generator does not draw.
kindex_random_fill random_fill_abi(const catalog::RandomFill& fill, uint64_t seed);

}  // namespace kindex::runner
