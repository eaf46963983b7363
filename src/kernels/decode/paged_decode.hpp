#pragma once
// Batched GQA paged decode on the GPU (FlashInfer-Bench gqa_paged_decode_*): the C++ API behind the C ABI
// kindex_paged_decode_plan / _run / kindex_paged_decode. Nothing here copies to the host (validation mode aside), so
// plan and run can be captured in a CUDA graph, and every reduction runs in a fixed order, so results are
// bit-identical run to run.
//
// Split-KV by cost, planned on the device. The host fixes the launch shape from what it knows (num_kv_indices,
// batch, heads, the device): S segments x num_kv_heads CTAs, one wave (launch_shape). The plan kernel then reads the
// page table and cuts the concatenated sequences into S segments of equal cost, a sequence costing its tokens plus a
// fixed per-piece cost (CostModel), at page boundaries; it also lists the sequences cut over several segments and
// deals their merge to the CTAs. The run kernel (cooperative launch) streams each segment's pieces, writes whole
// sequences directly and cut ones as partials (o, lse) into the workspace, then merges those after a grid-wide
// barrier. A plan depends only on the page table and the sizes: made once per batch step, it serves every layer.
#include <cstddef>
#include <cstdint>

#include "kindex/kindex.h"

typedef struct CUstream_st* cudaStream_t;

namespace kindex::decode {

constexpr int kMaxGroup = 16;  // query heads per KV head: the MMA's 16 rows

// What a launch costs, in microseconds, on the device it runs on: the numbers the launch shape and the plan trade
// against each other. A device's copy rate comes from its memory clock and bus width; the per-CTA rate and the
// piece and merge costs are constants in paged_decode.cpp, fitted to a measured segment sweep.
struct CostModel {
  double chip_bytes_per_us = 0;  // KV bytes per microsecond the whole chip streams (the copy rate)
  double cta_bytes_per_us = 0;   // ... that one CTA streams alone, when the chip is far from saturated
  double piece_us = 0;           // fixed cost of a sequence piece in a CTA (its table entry, Q tile, warp merge)
  double merge_us = 0;           // grid barrier and merge of the sequences cut over several segments, once ...
  double merge_us_per_segment = 0;  // ... plus this per segment (a cut row sums one partial per segment it spans)
  double plan_us = 0;            // the plan kernel, paid by a call that plans too (Entry::one_call) when S > 1
};

// Which entry point a launch shape is for. A plan made once per batch step serves every layer's run, so its cost is
// not the run's to weigh; the one-call entry point plans in every call, and splits only where that pays too. plan()
// and run() use the same shape (their S must match); the workspace fits both.
enum class Entry { one_call, plan_and_runs };

// The run kernel's three instantiation families (kernel_kind).
enum class KernelKind { plain, modified, fp8 };

// The launch shape and workspace layout of one problem size on the current device, computed on the host.
struct LaunchShape {
  int64_t num_segments = 1;  // S: CTAs per KV head
  int stages = 0;            // the cp.async ring depth the device's shared memory allows (detail::ring_stages)
  bool plain_copies = false;  // K/V copies without a cache-policy operand (long streams, kPlainCopiesL2Multiple)
  KernelKind kind = KernelKind::plain;  // which run kernel (kernel_kind)
  int piece_tokens = 0;       // a piece's fixed cost in tokens, for the device plan
  // Workspace, in this order: the validation slot, the plan, the partial outputs and lse.
  size_t validate_bytes = 0;  // validation mode's first-bad-entry slot
  size_t plan_bytes = 0;      // the device plan (detail::plan_bytes)
  size_t partial_bytes = 0;   // (num_segments + batch_size) * q_len * num_qo_heads * (head_dim + 1) floats, when S > 1
  size_t workspace_bytes() const { return validate_bytes + plan_bytes + partial_bytes; }
};

// For tests and benchmarks only (the C ABI never sets them): run the shipped kernels at another shape.
struct ShapeOverrides {
  int64_t num_segments = 0;  // > 0: this many segments (capped to one wave) instead of the cost model's choice
  size_t smem_limit = 0;     // > 0: plan for this much shared memory per CTA (tests run the A100's 2-stage ring)
};

// Measured on the H200 (2026-12-03, docs/perf/decode.md): plain copies are 1-4% faster from 416 MB of K/V up, the
// hinted ones 2-11% faster up to 284 MB; the crossover lies between 4.7 and 6.9 L2 sizes (60 MB).
constexpr int64_t kPlainCopiesL2Multiple = 6;

// The run kernel a call needs: fp8 K/V (kv_format) the fp8 one; v_scale, soft-cap, window, sinks, HND, several
// query tokens per request or RoPE the modified one; else the plain one (k_scale alone folds into sm_scale), whose code is
// the same as before the variants existed.
KernelKind kernel_kind(const kindex_paged_decode_params& p);

// t / d for 0 <= t < 2^31 and a page size 1 <= d <= 128 as one wide multiply and a shift (the run kernel's token ->
// page step): magic = ceil(2^(31+k) / d), 2^(k-1) < d <= 2^k, fits 32 bits; its excess over 2^(31+k) / d adds less
// than t / 2^(31+k) < 2^-k <= 1/d to t / d, whose fraction is at most 1 - 1/d: the quotient never carries.
struct PageDivider {
  uint32_t magic = 1u << 31;
  int shift = 31;
  static constexpr PageDivider of(int d) {
    int k = 0;
    while ((1 << k) < d) ++k;
    return {uint32_t(((uint64_t(1) << (31 + k)) + uint64_t(d) - 1) / uint64_t(d)), 31 + k};
  }
  constexpr uint32_t quotient(uint32_t t) const { return uint32_t((uint64_t(t) * magic) >> shift); }
};

// Bytes of one K (or V) element in the cache: 1 for fp8, else 2 (q's dtype).
inline int kv_element_bytes(const kindex_paged_decode_params& p) {
  return p.kv_format == KINDEX_KV_FORMAT_SAME_AS_Q ? 2 : 1;
}

// Checks every host-side field (throws kindex::Error naming the field and value) and sizes the launch.
LaunchShape launch_shape(const kindex_paged_decode_params& p, Entry entry, const ShapeOverrides& overrides = {});

// Bytes of workspace either entry needs for these sizes (the larger of their shapes').
size_t workspace_size(const kindex_paged_decode_params& p, const ShapeOverrides& overrides = {});

// Enqueue the device plan (reads kv_indptr and kv_last_page_len), the run (reads the plan), or both. Throw
// kindex::Error for bad arguments and capi::Failure (kernels/capi.hpp) for a too-small workspace, a CUDA error, or
// (validation mode) a bad index array entry. A run whose workspace holds no plan of the same sizes writes NaN.
void plan(const kindex_paged_decode_params& p, void* workspace, size_t workspace_bytes, cudaStream_t stream,
          const ShapeOverrides& overrides = {});
void run(const kindex_paged_decode_params& p, void* workspace, size_t workspace_bytes, cudaStream_t stream,
         const ShapeOverrides& overrides = {});
void paged_decode(const kindex_paged_decode_params& p, void* workspace, size_t workspace_bytes, cudaStream_t stream,
                  const ShapeOverrides& overrides = {});

// The segment count the cost model picks: the S in [1, max_segments] that minimises
//   ((kv_bytes / chip rate)^4 + (cta_bytes / (S * kv_heads * CTA rate))^4)^(1/4) + piece_us * ceil((batch + S - 1) / S)
//     + (merge_us + merge_us_per_segment * S + plan_us) * [S > 1]
// (the stream at the rate S segments reach: a smooth minimum of the chip's and the CTAs' rates, since CTAs keep
// adding a little until every SM streams; the pieces of the busiest CTA; the merge, and the plan when the call makes
// it: plan_us, 0 for a layer's run of a plan made once). kv_bytes are the bytes read; cta_bytes the same work as a
// CTA's rate counts it (16-bit K/V bytes, times the fp8 kernel's conversion cost). Host-only arithmetic.
int64_t choose_segments(const CostModel& cost, int64_t kv_bytes, int64_t cta_bytes, int64_t batch, int64_t kv_heads,
                        int64_t max_segments, double plan_us);
// The cost model with this code's constants on a device streaming chip_bytes_per_us (launch_shape takes it from
// the device's memory clock and bus width).
CostModel cost_model(double chip_bytes_per_us);

// ---- implemented in paged_decode.cu ----
namespace detail {
// The ring depth of the run kernel on a device whose CTAs may use `smem_limit` bytes of shared memory: the
// shipped depth where it fits (sm_90, sm_100), else 2 (sm_80's 163 KB); 0 if not even that fits.
int ring_stages(int head_dim, size_t smem_limit);
size_t ring_smem_bytes(int head_dim, int stages);  // shared memory per CTA of that configuration (its largest kind)
// Resident CTAs per SM of the run kernel of this kind and configuration (its shared memory decides).
int ctas_per_sm(kindex_dtype dtype, int head_dim, int stages, KernelKind kind);
// Bytes of the device plan for S segments and `batch` sequences.
size_t plan_bytes(int64_t num_segments, int64_t batch);
// Enqueues the validation kernel; first_bad receives (kind << 40 | index) of the first bad entry, or ~0.
int launch_validate(const kindex_paged_decode_params& p, unsigned long long* first_bad, cudaStream_t stream);
// Enqueue the plan kernel and the run kernel (cooperative when S > 1). Return a cudaError_t.
int launch_plan(const kindex_paged_decode_params& p, const LaunchShape& shape, void* workspace, cudaStream_t stream);
int launch_run(const kindex_paged_decode_params& p, const LaunchShape& shape, void* workspace, cudaStream_t stream);
}  // namespace detail

}  // namespace kindex::decode
