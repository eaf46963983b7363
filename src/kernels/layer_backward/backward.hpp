#pragma once
// GQA attention-layer backward with RoPE (SOL-ExecBench L2/003) on the GPU: the C++ API behind
// kindex_gqa_rope_backward. Device pointers, destination passing, one caller stream (work forks onto an
// internal side stream with events and joins back, so a CUDA graph can capture it); no device->host copies.
//
// Plan (docs/perf/layer_backward.md has the numbers):
//   side stream: grad_o_weight = grad_output^T attn_output                                   (cuBLASLt)
//   caller stream: dO = grad_output o_weight                                [B*S, 4096] bf16 (cuBLASLt)
//                  row kernel: D = rowsum(round(dO V^T) * A), dQ = dS K, RoPE  -> dQKV[:, 0:4096]
//                  column kernel: dK = sum_group dS^T Q (RoPE), dV = sum_group A^T dO -> dQKV[:, 4096:6144]
//                  grad_hidden = dQ Wq + dK Wk + dV Wv                       (3 cuBLASLt, beta = 1 chained)
//   side stream:   grad_{q,k,v}_weight = dQKV^T hidden_states                (3 cuBLASLt)
// where dS = round(round(A * (round(dP) - D)) * scaling) exactly as the reference rounds it.
#include <cstddef>
#include <cstdint>
#include <string>

#include "kindex/kindex.h"

namespace kindex::kernels::backward {

constexpr int64_t kHidden = 5120, kHeads = 32, kKvHeads = 8, kHeadDim = 128;
constexpr int64_t kQProj = kHeads * kHeadDim, kKvProj = kKvHeads * kHeadDim;
constexpr int64_t kQkvProj = kQProj + 2 * kKvProj;  // 6144: dQ | dK | dV side by side

// Which stages run: everything, or (for the benchmark's time split) only the GEMMs or only the attention
// kernels. The partial modes compute garbage-in/garbage-out values and exist for timing alone.
enum class Parts { all, gemms, attention };

// Bytes of workspace for these sizes (dO, dQKV, the row sums D, a padded copy of attn_weights when seq_len % 8 != 0,
// two cuBLASLt workspaces).
size_t workspace_bytes(int64_t batch_size, int64_t seq_len);

// Checks batch_size and seq_len (all the workspace size depends on).
kindex_status validate_sizes(const kindex_gqa_rope_backward_params* p, std::string& message);

// Checks the params (names the field and value in the message on failure) and the workspace; returns
// KINDEX_STATUS_OK or the status to report, with `message` set.
kindex_status validate(const kindex_gqa_rope_backward_params* p, const void* workspace, size_t workspace_bytes,
                       std::string& message);

// Enqueues the backward on `stream` (cudaStream_t). Assumes validate() passed. Returns OK, or
// KINDEX_STATUS_CUDA_ERROR / NOT_SUPPORTED with `message` set.
kindex_status run(const kindex_gqa_rope_backward_params& p, void* workspace, size_t workspace_bytes, void* stream,
                  Parts parts, std::string& message);

}  // namespace kindex::kernels::backward
