#pragma once
// The attention part of the L2/003 backward: two tensor-core kernels over the given attn_weights A.
//   row kernel, one CTA per (64 query rows, head, batch): pass 1 over the key blocks accumulates
//     D_i = sum_j round(dP_ij) A_ij with dP = dO V^T; pass 2 recomputes dP, forms
//     dS = round(round(A (round(dP) - D)) * scaling) and accumulates dQ = dS K; the epilogue rounds dQ, applies
//     the RoPE backward and writes dQKV[:, h*128 ...]. It also stores D for the column kernel.
//   column kernel, one CTA per (64 key rows, KV group, batch): over the 4 heads of the group and all query
//     blocks it recomputes dP^T and dS^T and accumulates dV = A^T dO and dK = dS^T Q in fp32 (the GQA sum is
//     the accumulation itself); the epilogue rounds, applies the RoPE backward to dK and writes
//     dQKV[:, 4096 + g*128 ...] and dQKV[:, 5120 + g*128 ...].
// Every read of attn_weights is a 64x64 tile of 16-byte cp.async loads; when seq_len % 8 != 0 the rows are not
// 16-byte aligned, so A is first copied once into attn_scratch with rows padded to a multiple of 8.
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

namespace kindex::kernels::backward {

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
  int64_t attn_row_stride;       // set by launch_attention
  void* grad_qkv;                // dQKV [B*S, 6144] bf16 out
  int batch_size;
  int seq_len;
  float scaling;
};

// Rows of the D scratch per (batch, head): seq_len rounded up to the 64-row block.
int64_t padded_seq_len(int64_t seq_len);

// Bytes of attn_scratch: B*32*S rows of S rounded up to 8 (0 when S % 8 == 0).
size_t padded_attn_bytes(int64_t batch_size, int64_t seq_len);

cudaError_t launch_attention(const AttentionArgs& args, cudaStream_t stream);

}  // namespace kindex::kernels::backward
