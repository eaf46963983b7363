// The kernel entry points of a build without CUDA: each checks its params like the real one, then says the
// library was built without CUDA instead of failing silently.
#include <string>

#include "kernels/capi.hpp"

namespace {

// The struct_size check comes first here too, so a caller learns of a header mismatch on any build.
template <class Params>
kindex_status no_cuda(const char* what, const Params* params) {
  if (kindex_status s = kindex::capi::check_params(what, params); s != KINDEX_STATUS_OK) return s;
  return kindex::capi::fail(KINDEX_STATUS_NOT_SUPPORTED,
                            std::string(what) + ": this libkindex was built without CUDA");
}

}  // namespace

extern "C" {
kindex_status kindex_paged_decode_workspace_size(const kindex_paged_decode_params* params, size_t* bytes) {
  if (bytes) *bytes = 0;
  return no_cuda("kindex_paged_decode_workspace_size", params);
}
kindex_status kindex_paged_decode(const kindex_paged_decode_params* params, void*, size_t, void*) {
  return no_cuda("kindex_paged_decode", params);
}
kindex_status kindex_paged_decode_plan(const kindex_paged_decode_params* params, void*, size_t, void*) {
  return no_cuda("kindex_paged_decode_plan", params);
}
kindex_status kindex_paged_decode_run(const kindex_paged_decode_params* params, void*, size_t, void*) {
  return no_cuda("kindex_paged_decode_run", params);
}
kindex_status kindex_gqa_rope_backward_workspace_size(const kindex_gqa_rope_backward_params* params,
                                                      size_t* bytes) {
  if (bytes) *bytes = 0;
  return no_cuda("kindex_gqa_rope_backward_workspace_size", params);
}
kindex_status kindex_gqa_rope_backward(const kindex_gqa_rope_backward_params* params, void*, size_t, void*) {
  return no_cuda("kindex_gqa_rope_backward", params);
}

}  // extern "C"
