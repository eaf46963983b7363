// The C ABI's shared pieces: the thread-local last error, status names, version, and the entry points of a
// build without CUDA (each says so instead of failing silently).
#include "kernels/capi.hpp"

#include <string>

namespace kindex::capi {

static thread_local std::string last_error;

kindex_status fail(kindex_status status, const std::string& message) {
  last_error = message;
  return status;
}

void clear_error() { last_error.clear(); }

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

#ifdef KINDEX_HAVE_CUDA
const char* kindex_version(void) { return "0.1.0+cuda"; }
#else
const char* kindex_version(void) { return "0.1.0+nocuda"; }

static kindex_status no_cuda(const char* what) {
  return kindex::capi::fail(KINDEX_STATUS_NOT_SUPPORTED,
                            std::string(what) + ": this libkindex was built without CUDA");
}
kindex_status kindex_paged_decode_workspace_size(const kindex_paged_decode_params*, size_t* bytes) {
  if (bytes) *bytes = 0;
  return no_cuda("kindex_paged_decode_workspace_size");
}
kindex_status kindex_paged_decode(const kindex_paged_decode_params*, void*, size_t, void*) {
  return no_cuda("kindex_paged_decode");
}
kindex_status kindex_gqa_rope_backward_workspace_size(const kindex_gqa_rope_backward_params*, size_t* bytes) {
  if (bytes) *bytes = 0;
  return no_cuda("kindex_gqa_rope_backward_workspace_size");
}
kindex_status kindex_gqa_rope_backward(const kindex_gqa_rope_backward_params*, void*, size_t, void*) {
  return no_cuda("kindex_gqa_rope_backward");
}
#endif

}  // extern "C"
