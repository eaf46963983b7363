#pragma once
// The attention part of the L2/003 backward: tensor-core kernels over the given attn_weights A.
//   row kernel, one CTA per (64 query rows, head, batch), in two launches: the row_sums pass over the key blocks
//     accumulates D_i = sum_j round(dP_ij) A_ij with dP = dO V^T and stores D; the grad_q pass recomputes dP, forms
//     dS = round(round(A (round(dP) - D)) * scaling), stores it (bf16, exactly what the reference rounds) and
//     accumulates dQ = dS K; its epilogue rounds dQ, applies the RoPE backward and writes dQKV[:, h*128 ...].
//   column kernels, one CTA per (64 key rows, KV group, batch): over the 4 heads of the group and all query
//     blocks one accumulates dV = A^T dO, the other dK = dS^T Q, in fp32 (the GQA sum is the accumulation itself);
//     the epilogue rounds (and applies the RoPE backward to dK) and writes dQKV[:, 5120 + g*128 ...] or
//     dQKV[:, 4096 + g*128 ...]. dV needs no dS, so it runs beside the row passes. On small grids (column_splits)
//     the sum over heads and query blocks is split over several CTAs with fp32 partials and a reduce kernel.
// 4 or 5 matmul-equivalents per tile (AttentionSchedule) instead of v2's 6 (docs/perf/layer_backward.md, v3). The
// dK kernel runs on a high-priority stream, so the GEMMs that need only dQ (grad_hidden's dQ branch,
// grad_q_weight) run beside it.
// Every read of attn_weights is a 64x64 tile of 16-byte cp.async loads; when seq_len % 8 != 0 the rows are not
// 16-byte aligned, so A is first copied once into attn_scratch with rows padded to a multiple of 8.
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

namespace kindex::kernels::backward {

// How the row kernel gets dP in its second pass (results are bit-identical; only the speed differs):
//   recompute_dp: the grad_q pass recomputes dP = dO V^T (5 matmul-equivalents per tile in all).
//   store_dp: the row_sums pass stores round(dP) in the dS buffer and the grad_q pass reads it back (4 matmuls,
//     the minimum, for two more passes over a dS-sized buffer).
enum class AttentionSchedule { recompute_dp, store_dp };

// Which tensor-core instructions the four attention kernels use (docs/perf/layer_backward.md, v5):
//   mma_sync: m16n8k16 per warp, both operands through ldmatrix from padded shared memory (sm_80 on).
//   wgmma: Hopper warpgroup MMA (common/wgmma.cuh), one warpgroup (4 warps) per 64 rows, so a tiling of 8 warps
//     is two warpgroups sharing the other operand's tile: dP = dO V^T with dO from registers and V from shared
//     memory, dQ = dS K with dS from registers, dV = A^T dO and dK = dS^T Q with both operands from shared memory
//     (128-byte-swizzle tiles, a 3-stage cp.async pipeline in the dV/dK kernels). Needs a device of compute
//     capability 9.0 (wgmma_supported). Same rounding points as mma_sync; fp32 sums in another order, so not
//     bit-identical to it (checked against the CPU reference), but bit-identical across its own tilings.
enum class AttentionKernels { mma_sync, wgmma };
// The current device runs the wgmma kernels: compute capability 9.0 and this build holds their sm_90a code (an H200
// running a build without 90a JIT-compiles the sm_80 PTX, whose wgmma kernels are traps).
bool wgmma_supported();
// The kernels the C ABI uses on the current device: wgmma where wgmma_supported() (v5 log: faster on all 16
// workloads' geomean), else mma_sync (sm_80, sm_100, PTX JIT). Decided per call from the device, never a refusal.
AttentionKernels default_kernels();

// Warps per CTA (4 or 8, each warp owns 16 rows) of the row passes (query rows) and of the dV/dK kernels (key rows).
// Bit-identical results for every choice of the same kernels. {0, 0} = default_plan(kernels).tiling.
struct AttentionTiling {
  int row_warps = 0, col_warps = 0;
  bool operator==(const AttentionTiling&) const = default;
};

// The schedule and tiling measured fastest for each kernel family (docs/perf/layer_backward.md):
//   mma_sync: store_dp, {4, 4} (v3/v4 logs: 8 warps measured no faster alone and slower beside the GEMMs).
//   wgmma: recompute_dp, {8, 8} (v5 log: geomean whole call 0.4575 ms vs 0.4757 for store_dp {4, 4}; the two
//     warpgroups of a CTA share the other operand's tile, and recomputing dP beats two passes over the dS buffer).
struct AttentionPlan {
  AttentionKernels kernels;
  AttentionSchedule schedule;
  AttentionTiling tiling;
};
AttentionPlan default_plan(AttentionKernels kernels);

// The dK/dV kernels' sum over the 4 heads x query blocks of a KV group is split over column_splits(B, S) CTAs per
// (key block, group) when one CTA per pair would leave the GPU under-occupied: each part writes fp32 partials, a
// reduce kernel sums them in a fixed order (deterministic) and does the rounding/RoPE epilogue. Only grids of fewer
// than kColumnSplitBelowCtas unsplit CTAs are split (the 9 workloads of <= 1024 tokens; on the larger grids the
// v4 benchmark measured the split neutral to 10-20% slower in the attention part: the fp32 partials cost more than
// the extra CTAs give). Aim: about kColumnTargetCtas CTAs (two waves of 3 per SM on 132 SMs), at most
// kMaxColumnSplits parts, >= 2 iterations per part.
constexpr int64_t kColumnSplitBelowCtas = 256, kColumnTargetCtas = 800, kMaxColumnSplits = 8;
int column_splits(int64_t batch_size, int64_t seq_len);
// Bytes of the fp32 partials of dK and dV (0 when column_splits is 1).
size_t column_partials_bytes(int64_t batch_size, int64_t seq_len);

struct AttentionArgs {
  const void* grad_attn_output;  // dO  [B*S, 4096] bf16 (token-major, heads side by side)
  const void* query_states;      // [B, 32, S, 128] bf16
  const void* key_states;        // [B, 32, S, 128] bf16
  const void* value_states;      // [B, 32, S, 128] bf16
  const void* attn_weights;      // [B, 32, S, S] bf16
  const void* cos;               // [B, S, 128] bf16
  const void* sin;               // [B, S, 128] bf16
  float* row_sums;               // D [B*32, padded_seq_len(S)] fp32 scratch
  void* attn_scratch;            // padded_attn_bytes(B, S) bytes (unused when seq_len % 8 == 0)
  void* grad_scores;             // dS [B*32, padded_seq_len(S), padded_seq_len(S)] bf16 scratch
  int64_t attn_row_stride;       // set by launch_attention
  void* grad_qkv;                // dQKV [B*S, 6144] bf16 out
  int batch_size;
  int seq_len;
  float scaling;
  AttentionSchedule schedule;
  AttentionTiling tiling;        // {0, 0}: default_plan(kernels).tiling
  float* column_partials;        // column_partials_bytes(B, S) bytes (unused when column_splits(B, S) == 1)
  int max_column_splits;         // caps column_splits(B, S); 1: one CTA per (key block, group) as in v3
  int column_splits;             // set by launch_attention
  AttentionKernels kernels = AttentionKernels::mma_sync;
};

// Rows of the D scratch per (batch, head): seq_len rounded up to the 64-row block.
int64_t padded_seq_len(int64_t seq_len);

// Bytes of the dS scratch.
size_t grad_scores_bytes(int64_t batch_size, int64_t seq_len);

// Bytes of attn_scratch: B*32*S rows of S rounded up to 8 (0 when S % 8 == 0).
size_t padded_attn_bytes(int64_t batch_size, int64_t seq_len);

// `main` runs the padding copy and records inputs_ready; `rows` (main itself, or another stream that then waits for
// inputs_ready) runs the row_sums and grad_q passes and records grad_q_ready (dQ and dS ready); the caller must make
// `main` wait for grad_q_ready before it uses dQ. `value` waits for inputs_ready, runs the dV kernel and records
// grad_v_ready. `column` waits
// for grad_q_ready, runs the dK kernel, waits for grad_v_ready and records grad_kv_ready (dK, dV ready). The caller
// must make `main` wait for grad_kv_ready before it finishes (a CUDA graph needs the join); `value` may go on with
// other work after grad_v_ready.
struct AttentionStreams {
  cudaStream_t main, rows, column, value;
  cudaEvent_t inputs_ready, grad_q_ready, grad_v_ready, grad_kv_ready;
};

// cudaErrorNotSupported when args.kernels is wgmma and the device cannot run it; cudaErrorInvalidValue for a tiling
// other than {4, 4}, {4, 8}, {8, 4}, {8, 8}.
cudaError_t launch_attention(const AttentionArgs& args, const AttentionStreams& streams);

}  // namespace kindex::kernels::backward
