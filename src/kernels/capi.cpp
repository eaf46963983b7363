// The C ABI's shared pieces, linked into every kindex shared library (libkindex.so, the GPU reference's): the
// thread-local last error, status names, the version, and the struct_size check every entry point starts with.
#include "kernels/capi.hpp"

#include <cstdint>
#include <cstring>
#include <string>

#include "core/error.hpp"

namespace kindex::capi {

static thread_local std::string last_error;

kindex_status fail(kindex_status status, const std::string& message) {
  last_error = message;
  return status;
}

void clear_error() { last_error.clear(); }

kindex_status check_params(const char* where, const void* params, size_t known_size, const char* type_name,
                           size_t older_size) {
  const std::string problem = params_problem(where, params, known_size, type_name, older_size);
  return problem.empty() ? KINDEX_STATUS_OK : fail(KINDEX_STATUS_INVALID_ARGUMENT, problem);
}

}  // namespace kindex::capi

extern "C" {

const char* kindex_last_error(void) { return kindex::capi::last_error.c_str(); }

const char* kindex_status_name(kindex_status status) {
  switch (status) {
    case KINDEX_STATUS_OK: return "ok";
    case KINDEX_STATUS_INVALID_ARGUMENT: return "invalid_argument";
    case KINDEX_STATUS_NOT_SUPPORTED: return "not_supported";
    case KINDEX_STATUS_WORKSPACE_TOO_SMALL: return "workspace_too_small";
    case KINDEX_STATUS_CUDA_ERROR: return "cuda_error";
    case KINDEX_STATUS_INVALID_INPUT: return "invalid_input";
  }
  return "unknown";
}

const char* kindex_version(void) { return KINDEX_VERSION; }

}  // extern "C"
