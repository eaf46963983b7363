#pragma once
// GQA attention-layer backward with RoPE (SOL-ExecBench L2/003) on the GPU: the C++ API behind
// kindex_gqa_rope_backward. Device pointers, destination passing, one caller stream (work forks onto an
// internal side stream with events and joins back, so a CUDA graph can capture it); no device->host copies.
//
// Plan (docs/perf/layer_backward.md has the numbers; StreamPlan::v3, the default; the attention kernels' instructions,
// schedule and tiling follow the device, RunOptions below):
//   side stream: grad_o_weight = grad_output^T attn_output                                   (cuBLASLt)
//   caller stream: dO = grad_output o_weight                                [B*S, 4096] bf16 (cuBLASLt)
//                  [attn_weights padded to rows of 8 when seq_len is odd]
//                  row_sums pass: D = rowsum(round(dO V^T) * A)
//                  grad_q pass: dS (stored), dQ = dS K, RoPE                 -> dQKV[:, 0:4096]
//   side stream (after dO): dV = sum_group A^T dO                            -> dQKV[:, 5120:6144]
//   column stream (after grad_q, highest priority): dK = sum_group dS^T Q (RoPE) -> dQKV[:, 4096:5120]
//     (dK and dV: split over CTAs with fp32 partials + a reduce kernel on small grids, attention.hpp)
//   caller stream: grad_hidden = dQ Wq (after grad_q) + dK Wk + dV Wv        (3 cuBLASLt, beta = 1 chained)
//   side stream:   grad_q_weight after grad_q, grad_{k,v}_weight after dK and dV = dQKV^T hidden_states
// The first call for a given (batch_size, seq_len) times cuBLASLt's candidate algorithms per GEMM shape
// (gemm.hpp, tune_gemms); it synchronises the caller's stream once and takes a few ms more. A graph captured
// before any direct call keeps cuBLASLt's heuristic choice.
// where dS = round(round(A * (round(dP) - D)) * scaling) exactly as the reference rounds it.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "kernels/layer_backward/attention.hpp"
#include "kindex/kindex.h"

namespace kindex::kernels::backward {

constexpr int64_t kHidden = 5120, kHeads = 32, kKvHeads = 8, kHeadDim = 128;
constexpr int64_t kQProj = kHeads * kHeadDim, kKvProj = kKvHeads * kHeadDim;
constexpr int64_t kQkvProj = kQProj + 2 * kKvProj;  // 6144: dQ | dK | dV side by side

// Which stages run: everything, or (for the benchmark's time split) only the GEMMs or only the attention
// kernels. The partial modes compute garbage-in/garbage-out values and exist for timing alone.
enum class Parts { all, gemms, attention };

// Where dV and the row passes run (docs/perf/layer_backward.md, v4): v3 queues dV on the side stream behind
// grad_o_weight and runs the row passes on the caller's stream; value_stream gives dV a stream of its own (default
// priority); value_high puts dV on the highest-priority column stream ahead of dK; rows_high gives dV its own stream
// and runs the row passes on the highest-priority column stream ahead of dK (the critical path first, dV and
// grad_o_weight fill the gaps).
enum class StreamPlan { v3, value_stream, value_high, rows_high };
constexpr StreamPlan kDefaultStreamPlan = StreamPlan::v3;  // the others measured no better (v4 log)

// Knobs of run() (the C ABI uses the defaults; the benchmark and the tests vary them). An unset field takes the
// device's default plan (attention.hpp): kernels = default_kernels() (wgmma on compute capability 9.0, mma_sync
// elsewhere), then schedule and tiling = default_plan(kernels).
struct RunOptions {
  std::optional<AttentionSchedule> schedule;
  AttentionTiling tiling{};  // {0, 0}: unset
  StreamPlan streams = kDefaultStreamPlan;
  int max_column_splits = int(kMaxColumnSplits);  // caps attention.hpp's column_splits; 1: no split (v3)
  std::optional<AttentionKernels> kernels;
};

// `options` with every unset field filled in from the current device's default plan (what run() executes).
RunOptions resolve(const RunOptions& options);

// Bytes of workspace for these sizes (dO, dQKV, the row sums D, a padded copy of attn_weights when seq_len % 8 != 0,
// dS [B, 32, S64, S64] bf16 with S64 = seq_len rounded up to 64, two cuBLASLt workspaces).
size_t workspace_bytes(int64_t batch_size, int64_t seq_len);

// Checks batch_size and seq_len (all the workspace size depends on). Throws kindex::Error naming the field and value.
void validate_sizes(const kindex_gqa_rope_backward_params& p);

// Checks the params and the workspace. Throws kindex::Error naming the field and value, or capi::Failure
// (kernels/capi.hpp) with KINDEX_STATUS_WORKSPACE_TOO_SMALL.
void validate(const kindex_gqa_rope_backward_params& p, const void* workspace, size_t workspace_bytes);

// Enqueues the backward on `stream` (cudaStream_t). Assumes validate() passed. Throws capi::Failure with
// KINDEX_STATUS_CUDA_ERROR or NOT_SUPPORTED (cuBLASLt refused a GEMM).
void run(const kindex_gqa_rope_backward_params& p, void* workspace, size_t workspace_bytes, void* stream, Parts parts,
         const RunOptions& options = {});

}  // namespace kindex::kernels::backward
