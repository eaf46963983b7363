// libkindex_gpu_reference.so: the GPU references behind kindex's C ABI (include/kindex/kindex.h), so the runner
// loads and calls them exactly as it does libkindex.so or anyone's library, plus the runner's calibration
// (kindex_gpu_reference_* below, declared in include/kindex/gpu_reference.h).
#include "kindex/gpu_reference.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "gpu_reference/gpu_reference.hpp"
#include "kernels/capi.hpp"
#include "measure/device.hpp"
#include "measure/timer.hpp"

namespace {

kindex_status check(const char* where, const kindex_paged_decode_params* params) {
  kindex::capi::clear_error();
  return kindex::capi::check_params(where, params);
}

// The GPU reference computes FlashInfer-Bench's plain decode only: a struct asking for a version-2 variant (kindex.h)
// is refused naming the field, never answered as if it were plain.
kindex_status plain_decode(const char* where, const kindex_paged_decode_params* params,
                           kindex_paged_decode_params* out) {
  const kindex_paged_decode_params p = kindex::capi::upgraded(params);
  const kindex_paged_decode_params plain = KINDEX_PAGED_DECODE_PARAMS_INIT;
  const char* field = p.kv_format != plain.kv_format             ? "kv_format"
                      : p.kv_layout != plain.kv_layout           ? "kv_layout"
                      : p.k_scale != plain.k_scale               ? "k_scale"
                      : p.v_scale != plain.v_scale               ? "v_scale"
                      : p.q_len_per_req != plain.q_len_per_req   ? "q_len_per_req"
                      : p.window_left >= 0                       ? "window_left"
                      : p.logits_soft_cap != plain.logits_soft_cap ? "logits_soft_cap"
                      : p.sinks                                  ? "sinks"
                      : p.pos_encoding != plain.pos_encoding     ? "pos_encoding"
                                                                 : nullptr;
  if (field)
    return kindex::capi::fail(KINDEX_STATUS_NOT_SUPPORTED, std::string(where) + ": params." + field +
                                                               ": the GPU reference computes the plain decode only");
  *out = p;
  return KINDEX_STATUS_OK;
}

kindex_status check(const char* where, const kindex_gqa_rope_backward_params* params) {
  kindex::capi::clear_error();
  return kindex::capi::check_params(where, params);
}

// A callback's non-zero return, carried out of the timer as an exception.
struct StepStopped {};

void copy_text(const std::string& text, char* out, size_t size) {
  if (!out || size == 0) return;
  const size_t n = std::min(text.size(), size - 1);
  std::memcpy(out, text.data(), n);
  out[n] = '\0';
}

}  // namespace

extern "C" {

kindex_status kindex_paged_decode_workspace_size(const kindex_paged_decode_params* params, size_t* bytes) {
  if (kindex_status s = check("kindex_paged_decode_workspace_size", params); s != KINDEX_STATUS_OK) return s;
  if (!bytes)
    return kindex::capi::fail(KINDEX_STATUS_INVALID_ARGUMENT, "kindex_paged_decode_workspace_size: bytes = NULL: required");
  *bytes = 0;
  kindex_paged_decode_params plain;
  return plain_decode("kindex_paged_decode_workspace_size", params, &plain);
}

kindex_status kindex_paged_decode(const kindex_paged_decode_params* params, void*, size_t, void* stream) {
  if (kindex_status s = check("kindex_paged_decode", params); s != KINDEX_STATUS_OK) return s;
  kindex_paged_decode_params p;
  if (kindex_status s = plain_decode("kindex_paged_decode", params, &p); s != KINDEX_STATUS_OK) return s;
  return kindex::gpu_reference::paged_decode(p, stream);
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

kindex_status kindex_gpu_reference_compare(kindex_compare_rule rule, kindex_dtype dtype, const void* actual,
                                           const void* expected, int64_t numel, float atol, float rtol,
                                           kindex_compare_tally* tally, void* stream) {
  kindex::capi::clear_error();
  return kindex::gpu_reference::compare_tally(rule, dtype, actual, expected, numel, atol, rtol, tally, stream);
}

kindex_status kindex_gpu_reference_time_calls(const kindex_timing_protocol* protocol, kindex_timed_step prepare,
                                              kindex_timed_step call, void* user, void* stream, double* ns,
                                              char* timer, size_t timer_size, char* note, size_t note_size) {
  kindex::capi::clear_error();
  if (!protocol || !call || !ns)
    return kindex::capi::fail(KINDEX_STATUS_INVALID_ARGUMENT,
                              "kindex_gpu_reference_time_calls: protocol, call and ns are required");
  if (protocol->untimed < 0 || protocol->warmup < 0 || protocol->iterations < 1)
    return kindex::capi::fail(KINDEX_STATUS_INVALID_ARGUMENT,
                              "kindex_gpu_reference_time_calls: protocol->iterations = " +
                                  std::to_string(protocol->iterations) + ": needs at least one timed call");
  const kindex::measure::TimingProtocol p{protocol->untimed, protocol->warmup, protocol->iterations,
                                         protocol->cold_l2 != 0};
  try {
    auto step = [user](kindex_timed_step fn) {
      if (fn && fn(user) != 0) throw StepStopped{};
    };
    kindex::measure::TimingSamples t = kindex::measure::time_device(
        p, [&] { step(prepare); }, [&] { step(call); }, stream, protocol->prefer_cupti != 0);
    std::copy(t.ns.begin(), t.ns.end(), ns);
    copy_text(t.timer, timer, timer_size);
    copy_text(t.note, note, note_size);
    return KINDEX_STATUS_OK;
  } catch (const StepStopped&) {
    return kindex::capi::fail(KINDEX_STATUS_INVALID_INPUT,
                              "kindex_gpu_reference_time_calls: a step stopped the timing");
  } catch (const std::exception& e) {
    return kindex::capi::fail(KINDEX_STATUS_CUDA_ERROR, std::string("kindex_gpu_reference_time_calls: ") + e.what());
  }
}

kindex_status kindex_gpu_reference_ipc_open(const void* handle, size_t handle_size, void** ptr) {
  kindex::capi::clear_error();
  if (!handle || !ptr)
    return kindex::capi::fail(KINDEX_STATUS_INVALID_ARGUMENT, "kindex_gpu_reference_ipc_open: handle and ptr are required");
  try {
    *ptr = kindex::measure::device::ipc_open(std::string(static_cast<const char*>(handle), handle_size));
    return KINDEX_STATUS_OK;
  } catch (const std::exception& e) {
    return kindex::capi::fail(KINDEX_STATUS_CUDA_ERROR, std::string("kindex_gpu_reference_ipc_open: ") + e.what());
  }
}

kindex_status kindex_gpu_reference_ipc_close(void* ptr) {
  kindex::capi::clear_error();
  try {
    kindex::measure::device::ipc_close(ptr);
    return KINDEX_STATUS_OK;
  } catch (const std::exception& e) {
    return kindex::capi::fail(KINDEX_STATUS_CUDA_ERROR, std::string("kindex_gpu_reference_ipc_close: ") + e.what());
  }
}

}  // extern "C"
