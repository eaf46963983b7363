// Host side of the paged decode: argument checks, the split plan, validation mode, and the C ABI.
#include "kernels/decode/paged_decode.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "core/error.hpp"
#include "kernels/capi.hpp"

namespace kindex::decode {

namespace {

constexpr const char* kWhere = "kindex_paged_decode";

[[noreturn]] void bad(const std::string& field, const std::string& value, const std::string& problem) {
  throw Error(kWhere, "params." + field, value, problem);
}

void check_cuda(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw capi::Failure(KINDEX_STATUS_CUDA_ERROR, std::string(kWhere) + ": " + what + ": " + cudaGetErrorString(err));
}

// What a plan needs to know of the current device, cached per device: SM count, opt-in shared memory per CTA, L2.
struct DeviceLimits {
  int device = 0;
  int sms = 1;
  size_t smem_optin = 0;
  int64_t l2_bytes = 0;
};
DeviceLimits device_limits() {
  static std::mutex mutex;
  static std::map<int, DeviceLimits> cache;
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = cache.find(device); it != cache.end()) return it->second;
  DeviceLimits d;
  d.device = device;
  int v = 0;
  check_cuda(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
  d.sms = std::max(1, v);
  check_cuda(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), "cudaDeviceGetAttribute");
  d.smem_optin = size_t(v);
  check_cuda(cudaDeviceGetAttribute(&v, cudaDevAttrL2CacheSize, device), "cudaDeviceGetAttribute");
  d.l2_bytes = v;
  cache[device] = d;
  return d;
}

// Resident CTAs of the main kernel on all SMs of the current device, cached per (device, configuration). Also
// raises the kernel's shared-memory limit on this device, once: launches rely on it.
int resident_ctas(const DeviceLimits& device, kindex_dtype dtype, int head_dim, int stages) {
  static std::mutex mutex;
  static std::map<std::tuple<int, int, int, int>, int> cache;
  const auto key = std::make_tuple(device.device, int(dtype), head_dim, stages);
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  const int ctas = device.sms * detail::ctas_per_sm(dtype, head_dim, stages);
  cache[key] = ctas;
  return ctas;
}

bool aligned(const void* ptr, size_t bytes) { return reinterpret_cast<uintptr_t>(ptr) % bytes == 0; }

void check_pointers(const kindex_paged_decode_params& p) {
  auto need = [&](const void* ptr, const char* field, size_t align) {
    if (!ptr) bad(field, "NULL", "required");
    if (!aligned(ptr, align)) bad(field, std::to_string(reinterpret_cast<uintptr_t>(ptr)),
                                  "must be " + std::to_string(align) + "-byte aligned");
  };
  if (p.batch_size == 0) return;
  need(p.q, "q", 16);
  need(p.output, "output", 16);
  need(p.kv_indptr, "kv_indptr", 4);
  auto address = [](const void* ptr) { return std::to_string(reinterpret_cast<uintptr_t>(ptr)); };
  if (p.lse && !aligned(p.lse, 4)) bad("lse", address(p.lse), "must be 4-byte aligned");
  if (p.num_kv_indices > 0) {
    need(p.k_cache, "k_cache", 16);
    need(p.v_cache, "v_cache", 16);
    need(p.kv_indices, "kv_indices", 4);
    if (p.kv_last_page_len && !aligned(p.kv_last_page_len, 4))
      bad("kv_last_page_len", address(p.kv_last_page_len), "must be 4-byte aligned");
  }
}

std::string describe_bad_entry(const kindex_paged_decode_params& p, unsigned long long code, cudaStream_t stream) {
  const int kind = int(code >> 40);
  const long long index = (long long)(code & ((1ull << 40) - 1));
  const int32_t* array = kind == 0 ? p.kv_indptr : kind == 1 ? p.kv_indices : p.kv_last_page_len;
  int32_t value = 0;
  check_cuda(cudaMemcpyAsync(&value, array + index, sizeof value, cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync");
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  const std::string v = std::to_string(value);
  const std::string at = "[" + std::to_string(index) + "]";
  if (kind == 0) {
    std::string why = index == 0 ? "must be 0"
                      : index == p.batch_size ? "must equal num_kv_indices (" + std::to_string(p.num_kv_indices) + ")"
                                              : "must be non-decreasing and within [0, num_kv_indices]";
    return format_error(kWhere, "kv_indptr" + at, v, why);
  }
  if (kind == 1)
    return format_error(kWhere, "kv_indices" + at, v,
                        "page id outside [0, num_pages = " + std::to_string(p.num_pages) + ")");
  return format_error(kWhere, "kv_last_page_len" + at, v,
                      "must be in [1, page_size = " + std::to_string(p.page_size) + "]");
}

}  // namespace

Plan make_plan(const kindex_paged_decode_params& p, const Tuning& tune) {
  if (p.dtype != KINDEX_DTYPE_BF16 && p.dtype != KINDEX_DTYPE_FP16)
    bad("dtype", std::to_string(int(p.dtype)), "must be KINDEX_DTYPE_BF16 or KINDEX_DTYPE_FP16");
  if (p.batch_size < 0) bad("batch_size", std::to_string(p.batch_size), "must be >= 0");
  if (p.num_kv_heads < 1 || p.num_kv_heads > 65535)
    bad("num_kv_heads", std::to_string(p.num_kv_heads), "must be in [1, 65535]");
  if (p.num_qo_heads < 1 || p.num_qo_heads % p.num_kv_heads != 0)
    bad("num_qo_heads", std::to_string(p.num_qo_heads), "must be a positive multiple of num_kv_heads");
  if (p.num_qo_heads / p.num_kv_heads > kMaxGroup)
    bad("num_qo_heads", std::to_string(p.num_qo_heads),
        "group size num_qo_heads / num_kv_heads must be at most " + std::to_string(kMaxGroup));
  if (p.head_dim != 64 && p.head_dim != 128 && p.head_dim != 256)
    bad("head_dim", std::to_string(p.head_dim), "must be 64, 128 or 256");
  if (p.page_size < 1 || p.page_size > 128) bad("page_size", std::to_string(p.page_size), "must be in [1, 128]");
  if (p.num_kv_indices < 0 || p.num_kv_indices > INT32_MAX)
    bad("num_kv_indices", std::to_string(p.num_kv_indices), "must be in [0, 2^31)");
  if (p.num_pages < 0 || (p.num_kv_indices > 0 && p.num_pages < 1))
    bad("num_pages", std::to_string(p.num_pages), "must be >= 1 when num_kv_indices > 0");
  if (!std::isfinite(p.sm_scale)) bad("sm_scale", std::to_string(p.sm_scale), "must be finite");

  Plan plan;
  plan.tuning = tune;
  const int64_t n = p.num_kv_indices;
  int64_t slots = 1;
  if (p.batch_size > 0) {
    const DeviceLimits device = device_limits();
    const size_t limit = tune.smem_limit ? std::min(tune.smem_limit, device.smem_optin) : device.smem_optin;
    plan.stages = detail::ring_stages(p.head_dim, limit);
    if (plan.stages == 0)
      throw capi::Failure(KINDEX_STATUS_NOT_SUPPORTED,
                    format_error(kWhere, "params.head_dim", std::to_string(p.head_dim),
                                 "needs " + std::to_string(detail::ring_smem_bytes(p.head_dim, 2)) +
                                     " bytes of shared memory per CTA; this device allows " + std::to_string(limit)));
    slots = resident_ctas(device, p.dtype, p.head_dim, plan.stages);
    // Long streams go faster without the cache-policy operand, shorter ones with evict-first (kPlainCopiesL2Multiple).
    const int64_t kv_bytes = p.num_kv_indices * p.page_size * p.num_kv_heads * p.head_dim * 2 * 2;
    plan.plain_copies = tune.plain_copies < 0 ? kv_bytes >= kPlainCopiesL2Multiple * device.l2_bytes
                                              : tune.plain_copies > 0;
  }
  if (n > 0 && p.batch_size > 0) {
    // One wave of equal segments: num_segments * num_kv_heads CTAs fill the resident slots of all SMs. A single
    // sequence is not cut shorter than itself within [128, 1024] tokens (splitting one sequence of 72-362 tokens
    // costs the grid barrier and merge for little parallelism); with two or more sequences segments go down to 64
    // tokens, so small batches fill the chip (2026-12-03 sweep, results/decode/segment_floor_sweep_h200.json:
    // batch-16 ps1 < 8k tokens 14-21% faster, ps64 batch 2-4 14-25%, batch 64 unchanged).
    const int64_t target = std::max<int64_t>(1, slots / p.num_kv_heads);
    const int64_t tokens = n * p.page_size;
    const int64_t min_tokens = tune.min_segment_tokens > 0 ? tune.min_segment_tokens
                               : p.batch_size == 1         ? std::clamp<int64_t>(tokens, 128, 1024)
                                                           : 64;
    const int64_t min_pages = std::max<int64_t>(1, (min_tokens + p.page_size - 1) / p.page_size);
    plan.pages_per_segment = std::max(min_pages, (n + target - 1) / target);
    plan.num_segments = (n + plan.pages_per_segment - 1) / plan.pages_per_segment;
  }
  // Merged in the main kernel after a grid-wide barrier: needs every CTA resident at once, which one wave of
  // num_segments * num_kv_heads <= slots CTAs is.
  plan.fused_merge = tune.merge == 1 && plan.num_segments > 1 && plan.num_segments * p.num_kv_heads <= slots;
  if (plan.num_segments > 1)
    plan.partial_bytes = size_t(plan.num_segments + p.batch_size) * size_t(p.num_qo_heads) *
                         size_t(p.head_dim + 1) * sizeof(float);
  if (p.validate) plan.validate_bytes = 256;
  return plan;
}

size_t workspace_size(const kindex_paged_decode_params& p, const Tuning& tuning) {
  return make_plan(p, tuning).workspace_bytes();
}

void paged_decode(const kindex_paged_decode_params& p, void* workspace, size_t workspace_bytes, cudaStream_t stream,
                  const Tuning& tuning) {
  const Plan plan = make_plan(p, tuning);
  check_pointers(p);
  if (workspace_bytes < plan.workspace_bytes() || (plan.workspace_bytes() > 0 && !workspace))
    throw capi::Failure(KINDEX_STATUS_WORKSPACE_TOO_SMALL,
                  format_error(kWhere, "workspace_bytes", std::to_string(workspace ? workspace_bytes : 0),
                               "needs " + std::to_string(plan.workspace_bytes()) +
                                   " bytes (kindex_paged_decode_workspace_size)"));
  if (workspace && !aligned(workspace, 256))
    bad("workspace", std::to_string(reinterpret_cast<uintptr_t>(workspace)), "must be 256-byte aligned");
  if (p.batch_size == 0) return;

  if (p.validate) {
    auto* first_bad = static_cast<unsigned long long*>(workspace);
    check_cuda(cudaError_t(detail::launch_validate(p, first_bad, stream)), "validation kernel launch");
    unsigned long long code = ~0ull;
    check_cuda(cudaMemcpyAsync(&code, first_bad, sizeof code, cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync");
    check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    if (code != ~0ull) throw capi::Failure(KINDEX_STATUS_INVALID_INPUT, describe_bad_entry(p, code, stream));
  }
  check_cuda(cudaError_t(detail::launch_decode(p, plan, workspace, stream)), "kernel launch");
}

}  // namespace kindex::decode

extern "C" {

kindex_status kindex_paged_decode_workspace_size(const kindex_paged_decode_params* params, size_t* bytes) {
  if (kindex_status s = kindex::capi::check_params("kindex_paged_decode_workspace_size", params,
                                                   sizeof *params, "kindex_paged_decode_params");
      s != KINDEX_STATUS_OK)
    return s;
  if (!bytes)
    return kindex::capi::fail(KINDEX_STATUS_INVALID_ARGUMENT, "kindex_paged_decode_workspace_size: bytes = NULL: required");
  return kindex::capi::guarded("kindex_paged_decode_workspace_size",
                               [&] { *bytes = kindex::decode::workspace_size(*params); });
}

kindex_status kindex_paged_decode(const kindex_paged_decode_params* params, void* workspace, size_t workspace_bytes,
                                  void* stream) {
  if (kindex_status s =
          kindex::capi::check_params("kindex_paged_decode", params, sizeof *params, "kindex_paged_decode_params");
      s != KINDEX_STATUS_OK)
    return s;
  return kindex::capi::guarded("kindex_paged_decode", [&] {
    kindex::decode::paged_decode(*params, workspace, workspace_bytes, static_cast<cudaStream_t>(stream));
  });
}

}  // extern "C"
