// libkindex_gpu_reference.so: the GPU references behind kindex's C ABI (include/kindex/kindex.h), so the runner
// loads and calls them exactly as it does libkindex.so or anyone's library, plus the runner's calibration
// (kindex_gpu_reference_* below, declared in gpu_reference/c_abi.h).
#include "gpu_reference/c_abi.h"

#include "gpu_reference/gpu_reference.hpp"
#include "kernels/capi.hpp"

namespace {

kindex_status check(const char* where, const kindex_paged_decode_params* params) {
  kindex::capi::clear_error();
  return kindex::capi::check_params(where, params, sizeof *params, "kindex_paged_decode_params");
}

kindex_status check(const char* where, const kindex_gqa_rope_backward_params* params) {
  kindex::capi::clear_error();
  return kindex::capi::check_params(where, params, sizeof *params, "kindex_gqa_rope_backward_params");
}

}  // namespace

extern "C" {

kindex_status kindex_paged_decode_workspace_size(const kindex_paged_decode_params* params, size_t* bytes) {
  if (kindex_status s = check("kindex_paged_decode_workspace_size", params); s != KINDEX_STATUS_OK) return s;
  if (!bytes)
    return kindex::capi::fail(KINDEX_STATUS_INVALID_ARGUMENT, "kindex_paged_decode_workspace_size: bytes = NULL: required");
  *bytes = 0;
  return KINDEX_STATUS_OK;
}

kindex_status kindex_paged_decode(const kindex_paged_decode_params* params, void*, size_t, void* stream) {
  if (kindex_status s = check("kindex_paged_decode", params); s != KINDEX_STATUS_OK) return s;
  return kindex::gpu_reference::paged_decode(*params, stream);
}

kindex_status kindex_gqa_rope_backward_workspace_size(const kindex_gqa_rope_backward_params* params, size_t* bytes) {
  if (kindex_status s = check("kindex_gqa_rope_backward_workspace_size", params); s != KINDEX_STATUS_OK) return s;
  if (!bytes)
    return kindex::capi::fail(KINDEX_STATUS_INVALID_ARGUMENT,
                              "kindex_gqa_rope_backward_workspace_size: bytes = NULL: required");
  *bytes = kindex::gpu_reference::gqa_rope_backward_workspace_bytes(params->batch_size, params->seq_len);
  return KINDEX_STATUS_OK;
}

kindex_status kindex_gqa_rope_backward(const kindex_gqa_rope_backward_params* params, void* workspace,
                                       size_t workspace_bytes, void* stream) {
  if (kindex_status s = check("kindex_gqa_rope_backward", params); s != KINDEX_STATUS_OK) return s;
  return kindex::gpu_reference::gqa_rope_backward(*params, workspace, workspace_bytes, stream);
}

kindex_status kindex_gpu_reference_measure_rates(double* copy_bytes_per_s, double* gemm_flops_per_s) {
  kindex::capi::clear_error();
  return kindex::gpu_reference::measure_rates(copy_bytes_per_s, gemm_flops_per_s);
}

const char* kindex_gpu_reference_nvcc_version(void) { return kindex::gpu_reference::nvcc_version(); }
const char* kindex_gpu_reference_cublaslt_version(void) { return kindex::gpu_reference::cublaslt_version(); }

kindex_status kindex_gpu_reference_fill_random(const kindex_random_fill* fill, void* out, void* stream) {
  kindex::capi::clear_error();
  if (!fill) return kindex::capi::fail(KINDEX_STATUS_INVALID_ARGUMENT, "kindex_gpu_reference_fill_random: fill = NULL");
  return kindex::gpu_reference::fill_random(*fill, out, stream);
}

}  // extern "C"
