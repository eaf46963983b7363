// Host side of the paged decode: argument checks, the launch shape and its cost model, validation mode, the C ABI.
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

// The cost model's constants, fitted to a segment sweep of the run kernel alone on an H100 SXM (2026-12-08,
// results/decode/v8_h100/sweep_call1_parsed.json, fit_decode_cost.py --run-only --chip-tb-per-s 2.98, this code's
// H100 chip rate: 11 model-shaped cases x 8 forced segment counts; the model's pick 1.007x the fastest measured count,
// geomean). The plan's cost is the same sweep's plan + run minus run alone at each count > 1: 4.8-5.5 us (the fit of
// plan + run gives the same constants with merge 7.78 = 2.76 + 5.0). Not yet measured on the H200; its chip rate
// comes from the device.
constexpr double kCtaBytesPerUs = 5.48e4;       // one CTA streaming alone: ~55 GB/s
constexpr double kPieceUs = 0.883;              // a sequence piece's fixed cost in a CTA
constexpr double kMergeUs = 2.76;               // grid barrier and merge, once
constexpr double kMergeUsPerSegment = 0.055;    // ... and per segment: a cut row sums one partial per segment
constexpr double kPlanUs = 5.1;                 // the plan kernel, in a call that makes its plan (median 5.14)
// The fp8 kernel's CTA streams an element ~1.2x slower than the bf16 one (the same sweep, run alone at the fastest
// count, CTA-bound cases: 1.06-1.31x): its conversion, not its halved bytes, sets a CTA's rate. Counting fp8 bytes
// there had it split 2-4x too little (1.34-1.67x the fastest count on small calls).
constexpr double kFp8CtaCost = 1.2;

[[noreturn]] void bad(const std::string& field, const std::string& value, const std::string& problem) {
  throw Error(kWhere, "params." + field, value, problem);
}

[[noreturn]] void not_yet(const std::string& field, const std::string& value) {
  throw capi::Failure(KINDEX_STATUS_NOT_SUPPORTED,
                      format_error(kWhere, "params." + field, value, "not supported by this version's kernels yet"));
}

// The version-2 fields (kindex.h): their ranges, each refused by name and value.
void check_variant(const kindex_paged_decode_params& p) {
  if (p.kv_format < KINDEX_KV_FORMAT_SAME_AS_Q || p.kv_format > KINDEX_KV_FORMAT_FP8_E5M2)
    bad("kv_format", std::to_string(int(p.kv_format)), "must be SAME_AS_Q, FP8_E4M3 or FP8_E5M2");
  if (p.kv_layout != KINDEX_KV_LAYOUT_NHD && p.kv_layout != KINDEX_KV_LAYOUT_HND)
    bad("kv_layout", std::to_string(int(p.kv_layout)), "must be NHD or HND");
  if (!(std::isfinite(p.k_scale) && p.k_scale > 0)) bad("k_scale", std::to_string(p.k_scale), "must be finite and > 0");
  if (!(std::isfinite(p.v_scale) && p.v_scale > 0)) bad("v_scale", std::to_string(p.v_scale), "must be finite and > 0");
  if (p.q_len_per_req < 1 || p.q_len_per_req > 8)
    bad("q_len_per_req", std::to_string(p.q_len_per_req), "must be in [1, 8]");
  if (!(std::isfinite(p.logits_soft_cap) && p.logits_soft_cap >= 0))
    bad("logits_soft_cap", std::to_string(p.logits_soft_cap), "must be finite and >= 0 (0: off)");
  if (p.pos_encoding != KINDEX_POS_ENCODING_NONE && p.pos_encoding != KINDEX_POS_ENCODING_ROPE_LLAMA)
    bad("pos_encoding", std::to_string(int(p.pos_encoding)), "must be NONE or ROPE_LLAMA");
  if (!(std::isfinite(p.rope_scale) && p.rope_scale > 0))
    bad("rope_scale", std::to_string(p.rope_scale), "must be finite and > 0");
  if (!(std::isfinite(p.rope_theta) && p.rope_theta > 0))
    bad("rope_theta", std::to_string(p.rope_theta), "must be finite and > 0");
}

void check_cuda(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw capi::Failure(KINDEX_STATUS_CUDA_ERROR, std::string(kWhere) + ": " + what + ": " + cudaGetErrorString(err));
}

// What a launch shape needs to know of the current device, cached per device: SM count, opt-in shared memory per
// CTA, L2, and the DRAM's clock and width (its peak rate).
struct DeviceLimits {
  int device = 0;
  int sms = 1;
  size_t smem_optin = 0;
  int64_t l2_bytes = 0;
  int64_t memory_clock_khz = 0;
  int64_t bus_bits = 0;
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
  // The memory clock and bus width only feed the cost model: a device that does not report them gets a default.
  if (cudaDeviceGetAttribute(&v, cudaDevAttrMemoryClockRate, device) == cudaSuccess) d.memory_clock_khz = v;
  if (cudaDeviceGetAttribute(&v, cudaDevAttrGlobalMemoryBusWidth, device) == cudaSuccess) d.bus_bits = v;
  cudaGetLastError();
  cache[device] = d;
  return d;
}

// Resident CTAs of the main kernel on all SMs of the current device, cached per (device, configuration). Also
// raises the kernel's shared-memory limit on this device, once: launches rely on it.
int resident_ctas(const DeviceLimits& device, kindex_dtype dtype, int head_dim, int stages, KernelKind kind) {
  static std::mutex mutex;
  static std::map<std::tuple<int, int, int, int, int>, int> cache;
  const auto key = std::make_tuple(device.device, int(dtype), head_dim, stages, int(kind));
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  const int ctas = device.sms * detail::ctas_per_sm(dtype, head_dim, stages, kind);
  cache[key] = ctas;
  return ctas;
}

bool aligned(const void* ptr, size_t bytes) { return reinterpret_cast<uintptr_t>(ptr) % bytes == 0; }

// The pointers a call reads: the plan only the page table, the run everything.
void check_pointers(const kindex_paged_decode_params& p, bool plan_only) {
  auto need = [&](const void* ptr, const char* field, size_t align) {
    if (!ptr) bad(field, "NULL", "required");
    if (!aligned(ptr, align)) bad(field, std::to_string(reinterpret_cast<uintptr_t>(ptr)),
                                  "must be " + std::to_string(align) + "-byte aligned");
  };
  if (p.batch_size == 0) return;
  need(p.kv_indptr, "kv_indptr", 4);
  auto address = [](const void* ptr) { return std::to_string(reinterpret_cast<uintptr_t>(ptr)); };
  if (p.num_kv_indices > 0) {
    need(p.kv_indices, "kv_indices", 4);
    if (p.kv_last_page_len && !aligned(p.kv_last_page_len, 4))
      bad("kv_last_page_len", address(p.kv_last_page_len), "must be 4-byte aligned");
  }
  if (plan_only) return;
  need(p.q, "q", 16);
  need(p.output, "output", 16);
  if (p.lse && !aligned(p.lse, 4)) bad("lse", address(p.lse), "must be 4-byte aligned");
  if (p.sinks && !aligned(p.sinks, 4)) bad("sinks", address(p.sinks), "must be 4-byte aligned");
  if (p.num_kv_indices > 0) {
    need(p.k_cache, "k_cache", 16);
    need(p.v_cache, "v_cache", 16);
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

// The cost model on this device: the chip rate from its memory clock and bus width, the rest the constants above.
CostModel device_cost(const DeviceLimits& device) {
  // Peak DRAM rate (double data rate x bus width) times the copy efficiency measured on the H200 (4.28 of 4.8 TB/s).
  const double peak_bytes_per_us = 2.0 * double(device.memory_clock_khz) * 1e-3 * double(device.bus_bits) / 8.0;
  return cost_model(peak_bytes_per_us > 0 ? 0.89 * peak_bytes_per_us : 3.0e6);
}

}  // namespace

CostModel cost_model(double chip_bytes_per_us) {
  CostModel c;
  c.chip_bytes_per_us = chip_bytes_per_us;
  c.cta_bytes_per_us = kCtaBytesPerUs;
  c.piece_us = kPieceUs;
  c.merge_us = kMergeUs;
  c.merge_us_per_segment = kMergeUsPerSegment;
  c.plan_us = kPlanUs;
  return c;
}

KernelKind kernel_kind(const kindex_paged_decode_params& p) {
  if (p.kv_format != KINDEX_KV_FORMAT_SAME_AS_Q) return KernelKind::fp8;
  const bool modified = p.v_scale != 1.0f || p.logits_soft_cap != 0 || p.window_left >= 0 || p.sinks ||
                        p.kv_layout != KINDEX_KV_LAYOUT_NHD || p.q_len_per_req != 1 ||
                        p.pos_encoding != KINDEX_POS_ENCODING_NONE;
  return modified ? KernelKind::modified : KernelKind::plain;
}

int64_t choose_segments(const CostModel& cost, int64_t kv_bytes, int64_t cta_bytes, int64_t batch, int64_t kv_heads,
                        int64_t max_segments, double plan_us) {
  int64_t best = 1;
  double best_us = 0;
  const double chip_us = double(kv_bytes) / cost.chip_bytes_per_us;
  for (int64_t s = 1; s <= std::max<int64_t>(1, max_segments); ++s) {
    const double ctas_us = double(cta_bytes) / (double(s * kv_heads) * cost.cta_bytes_per_us);
    const double stream_us = std::sqrt(std::sqrt(std::pow(chip_us, 4) + std::pow(ctas_us, 4)));
    const double split_us = cost.merge_us + cost.merge_us_per_segment * double(s) + plan_us;
    const double us = stream_us + cost.piece_us * double((batch + 2 * s - 2) / s) + (s > 1 ? split_us : 0.0);
    if (s == 1 || us < best_us * (1.0 - 1e-9)) {
      best = s;
      best_us = us;
    }
  }
  return best;
}

LaunchShape launch_shape(const kindex_paged_decode_params& p, Entry entry, const ShapeOverrides& overrides) {
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
  check_variant(p);
  // The kernel addresses K/V within a page in 32 bits (page ids times page bytes in 64).
  if (int64_t(p.page_size) * p.num_kv_heads * p.head_dim * kv_element_bytes(p) > INT32_MAX)
    bad("num_kv_heads", std::to_string(p.num_kv_heads),
        "makes a page of page_size x num_kv_heads x head_dim elements 2^31 bytes or more");
  // A request's query rows (its tokens x the group) fill one 16-row MMA tile; more would need a loop over tiles.
  if ((p.num_qo_heads / p.num_kv_heads) * p.q_len_per_req > kMaxGroup)
    not_yet("q_len_per_req", std::to_string(p.q_len_per_req) + " with group size " +
                                 std::to_string(p.num_qo_heads / p.num_kv_heads) +
                                 " (q_len_per_req x group > " + std::to_string(kMaxGroup) + ")");

  LaunchShape shape;
  if (p.batch_size == 0) return shape;
  const DeviceLimits device = device_limits();
  const size_t limit = overrides.smem_limit ? std::min(overrides.smem_limit, device.smem_optin) : device.smem_optin;
  shape.stages = detail::ring_stages(p.head_dim, limit);
  if (shape.stages == 0)
    throw capi::Failure(KINDEX_STATUS_NOT_SUPPORTED,
                        format_error(kWhere, "params.head_dim", std::to_string(p.head_dim),
                                     "needs " + std::to_string(detail::ring_smem_bytes(p.head_dim, 2)) +
                                         " bytes of shared memory per CTA; this device allows " +
                                         std::to_string(limit)));
  shape.kind = kernel_kind(p);
  const int64_t slots = resident_ctas(device, p.dtype, p.head_dim, shape.stages, shape.kind);
  // One wave: S segments x num_kv_heads CTAs all resident, so the merge can follow a grid-wide barrier.
  const int64_t max_segments = std::max<int64_t>(1, slots / p.num_kv_heads);
  const int64_t element_bytes = kv_element_bytes(p);
  const int64_t token_bytes = int64_t(p.head_dim) * 2 * element_bytes;  // K and V of one token and KV head
  // A window leaves each request at most window_left + q_len tokens, from the page holding the first of them (the
  // pages before it are not read): the split is for the bytes read, not the cache's.
  int64_t tokens = p.num_kv_indices * p.page_size;
  if (p.window_left >= 0)
    tokens = std::min(tokens, p.batch_size * (int64_t(p.window_left) + p.q_len_per_req + p.page_size - 1));
  const int64_t kv_bytes = tokens * p.num_kv_heads * token_bytes;
  // A CTA's rate counts 16-bit K/V bytes, an fp8 one's conversion included (kFp8CtaCost).
  const double cta_token_bytes = double(p.head_dim) * 2 * 2 * (element_bytes == 1 ? kFp8CtaCost : 1.0);
  const int64_t cta_bytes = int64_t(double(tokens * p.num_kv_heads) * cta_token_bytes);
  const CostModel cost = device_cost(device);
  if (p.num_kv_indices > 0)
    shape.num_segments = overrides.num_segments > 0
                             ? std::min(overrides.num_segments, max_segments)
                             : choose_segments(cost, kv_bytes, cta_bytes, p.batch_size, p.num_kv_heads, max_segments,
                                               entry == Entry::one_call ? cost.plan_us : 0.0);
  shape.piece_tokens = int(std::lround(cost.piece_us * cost.cta_bytes_per_us / cta_token_bytes));
  // Long streams go faster without the cache-policy operand, shorter ones with evict-first (kPlainCopiesL2Multiple).
  shape.plain_copies = kv_bytes >= kPlainCopiesL2Multiple * device.l2_bytes;
  if (p.validate) shape.validate_bytes = 256;
  shape.plan_bytes = detail::plan_bytes(shape.num_segments, p.batch_size);
  if (shape.num_segments > 1)
    shape.partial_bytes = size_t(shape.num_segments + p.batch_size) * size_t(p.num_qo_heads) *
                          size_t(p.q_len_per_req) * size_t(p.head_dim + 1) * sizeof(float);
  return shape;
}

size_t workspace_size(const kindex_paged_decode_params& p, const ShapeOverrides& overrides) {
  return std::max(launch_shape(p, Entry::one_call, overrides).workspace_bytes(),
                  launch_shape(p, Entry::plan_and_runs, overrides).workspace_bytes());
}

namespace {

// The checks plan and run share: sizes, pointers, workspace; then validation mode's device check of the index
// arrays. Returns the launch shape, or nothing to do (batch 0).
LaunchShape checked_shape(const kindex_paged_decode_params& p, Entry entry, void* workspace, size_t workspace_bytes,
                          cudaStream_t stream, const ShapeOverrides& overrides, bool plan_only = false) {
  const LaunchShape shape = launch_shape(p, entry, overrides);
  check_pointers(p, plan_only);
  if (workspace_bytes < shape.workspace_bytes() || (shape.workspace_bytes() > 0 && !workspace))
    throw capi::Failure(KINDEX_STATUS_WORKSPACE_TOO_SMALL,
                        format_error(kWhere, "workspace_bytes", std::to_string(workspace ? workspace_bytes : 0),
                                     "needs " + std::to_string(shape.workspace_bytes()) +
                                         " bytes (kindex_paged_decode_workspace_size)"));
  if (workspace && !aligned(workspace, 256))
    bad("workspace", std::to_string(reinterpret_cast<uintptr_t>(workspace)), "must be 256-byte aligned");
  if (p.batch_size > 0 && p.validate) {
    auto* first_bad = static_cast<unsigned long long*>(workspace);
    check_cuda(cudaError_t(detail::launch_validate(p, first_bad, stream)), "validation kernel launch");
    unsigned long long code = ~0ull;
    check_cuda(cudaMemcpyAsync(&code, first_bad, sizeof code, cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync");
    check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    if (code != ~0ull) throw capi::Failure(KINDEX_STATUS_INVALID_INPUT, describe_bad_entry(p, code, stream));
  }
  return shape;
}

}  // namespace

void plan(const kindex_paged_decode_params& p, void* workspace, size_t workspace_bytes, cudaStream_t stream,
          const ShapeOverrides& overrides) {
  const LaunchShape shape = checked_shape(p, Entry::plan_and_runs, workspace, workspace_bytes, stream, overrides, true);
  if (p.batch_size > 0)
    check_cuda(cudaError_t(detail::launch_plan(p, shape, workspace, stream)), "plan kernel launch");
}

void run(const kindex_paged_decode_params& p, void* workspace, size_t workspace_bytes, cudaStream_t stream,
         const ShapeOverrides& overrides) {
  const LaunchShape shape = checked_shape(p, Entry::plan_and_runs, workspace, workspace_bytes, stream, overrides);
  if (p.batch_size > 0) check_cuda(cudaError_t(detail::launch_run(p, shape, workspace, stream)), "kernel launch");
}

void paged_decode(const kindex_paged_decode_params& p, void* workspace, size_t workspace_bytes, cudaStream_t stream,
                  const ShapeOverrides& overrides) {
  const LaunchShape shape = checked_shape(p, Entry::one_call, workspace, workspace_bytes, stream, overrides);
  if (p.batch_size == 0) return;
  check_cuda(cudaError_t(detail::launch_plan(p, shape, workspace, stream)), "plan kernel launch");
  check_cuda(cudaError_t(detail::launch_run(p, shape, workspace, stream)), "kernel launch");
}

}  // namespace kindex::decode

namespace {
// One body for the three enqueueing entry points: struct check, then `call` under the C ABI's error guard.
using Enqueue = void (*)(const kindex_paged_decode_params&, void*, size_t, cudaStream_t,
                         const kindex::decode::ShapeOverrides&);
kindex_status enqueue(const char* where, const kindex_paged_decode_params* params, void* workspace,
                      size_t workspace_bytes, void* stream, Enqueue call) {
  if (kindex_status s = kindex::capi::check_params(where, params); s != KINDEX_STATUS_OK) return s;
  return kindex::capi::guarded(where, [&] {
    call(kindex::capi::upgraded(params), workspace, workspace_bytes, static_cast<cudaStream_t>(stream),
         kindex::decode::ShapeOverrides{});
  });
}
}  // namespace

extern "C" {

kindex_status kindex_paged_decode_workspace_size(const kindex_paged_decode_params* params, size_t* bytes) {
  if (kindex_status s = kindex::capi::check_params("kindex_paged_decode_workspace_size", params);
      s != KINDEX_STATUS_OK)
    return s;
  if (!bytes)
    return kindex::capi::fail(KINDEX_STATUS_INVALID_ARGUMENT, "kindex_paged_decode_workspace_size: bytes = NULL: required");
  return kindex::capi::guarded("kindex_paged_decode_workspace_size",
                               [&] { *bytes = kindex::decode::workspace_size(kindex::capi::upgraded(params)); });
}

kindex_status kindex_paged_decode_plan(const kindex_paged_decode_params* params, void* workspace,
                                       size_t workspace_bytes, void* stream) {
  return enqueue("kindex_paged_decode_plan", params, workspace, workspace_bytes, stream, kindex::decode::plan);
}

kindex_status kindex_paged_decode_run(const kindex_paged_decode_params* params, void* workspace,
                                      size_t workspace_bytes, void* stream) {
  return enqueue("kindex_paged_decode_run", params, workspace, workspace_bytes, stream, kindex::decode::run);
}

kindex_status kindex_paged_decode(const kindex_paged_decode_params* params, void* workspace, size_t workspace_bytes,
                                  void* stream) {
  return enqueue("kindex_paged_decode", params, workspace, workspace_bytes, stream, kindex::decode::paged_decode);
}

}  // extern "C"
