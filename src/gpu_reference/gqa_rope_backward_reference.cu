// The GPU reference for SOL-ExecBench L2/003, the definition's ops one by one with its rounding points:
// every matmul is a cuBLASLt bf16 GEMM with fp32 accumulation and a bf16 result; the elementwise steps round
// to bf16 exactly where the PyTorch reference does (softmax backward in fp32 -> bf16, * scaling -> bf16, the
// GQA sum over 4 heads -> bf16, g*cos -> bf16, g*sin -> bf16, their sum -> bf16, the three hidden-state
// branches summed left to right with a rounding after each addition).
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <mutex>
#include <string>

#include "kernels/capi.hpp"
#include "gpu_reference/gemm.cuh"
#include "gpu_reference/gpu_reference.hpp"

namespace kindex::gpu_reference {
namespace {

using bf16 = __nv_bfloat16;
constexpr int64_t kHidden = 5120, kHeads = 32, kKvHeads = 8, kHeadDim = 128, kGroup = kHeads / kKvHeads;
constexpr int64_t kQProj = kHeads * kHeadDim, kKvProj = kKvHeads * kHeadDim;

__device__ inline float f(bf16 x) { return __bfloat162float(x); }
__device__ inline bf16 r(float x) { return __float2bfloat16_rn(x); }

// [B, S, H, D] -> [B, H, S, D] (exact copy).
__global__ void split_heads(const bf16* in, bf16* out, int64_t B, int64_t S, int64_t H, int64_t D) {
  int64_t n = B * S * H * D;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t d = i % D, h = (i / D) % H, s = (i / (D * H)) % S, b = i / (D * H * S);
    out[((b * H + h) * S + s) * D + d] = in[i];
  }
}

// Softmax backward, one block per row of S: sum = sum_j gaw*A in fp32; g = bf16(A * (gaw - sum)); then
// bf16(g * scaling). In place over gaw.
__global__ void softmax_backward(bf16* gaw, const bf16* attn, int64_t S, float scaling) {
  const int64_t row = blockIdx.x;
  bf16* g = gaw + row * S;
  const bf16* a = attn + row * S;
  float partial = 0.f;
  for (int64_t j = threadIdx.x; j < S; j += blockDim.x) partial += f(g[j]) * f(a[j]);
  __shared__ float warp_sums[32];
  for (int o = 16; o > 0; o >>= 1) partial += __shfl_xor_sync(0xffffffffu, partial, o);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = partial;
  __syncthreads();
  float sum = 0.f;
  for (int w = 0; w < int(blockDim.x / 32); ++w) sum += warp_sums[w];
  for (int64_t j = threadIdx.x; j < S; j += blockDim.x) {
    bf16 scores = r(f(a[j]) * (f(g[j]) - sum));
    g[j] = r(f(scores) * scaling);
  }
}

// grad of repeat_kv: out[b, kvh, s, d] = bf16(sum over the 4 heads kvh*4 + g of in[b, h, s, d]).
__global__ void gqa_sum(const bf16* in, bf16* out, int64_t B, int64_t S) {
  int64_t n = B * kKvHeads * S * kHeadDim;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t sd = i % (S * kHeadDim), kvh = (i / (S * kHeadDim)) % kKvHeads, b = i / (S * kHeadDim * kKvHeads);
    float acc = 0.f;
    for (int64_t g = 0; g < kGroup; ++g) acc += f(in[((b * kHeads + kvh * kGroup + g) * S) * kHeadDim + sd]);
    out[i] = r(acc);
  }
}

// RoPE backward of grad [B, H, S, D] with cos/sin [B, S, D], written transposed to [B, S, H*D]:
// bf16(bf16(g*cos) + rotated) with rotated = cat(bf16(g*sin)[64:], -bf16(g*sin)[:64]). rope = false only
// transposes (the value branch).
__global__ void rope_backward_transpose(const bf16* grad, const bf16* cos, const bf16* sin, bf16* out, int64_t B,
                                        int64_t H, int64_t S, bool rope) {
  const int64_t D = kHeadDim, half = D / 2;
  int64_t n = B * H * S * D;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t d = i % D, s = (i / D) % S, h = (i / (D * S)) % H, b = i / (D * S * H);
    bf16 value = grad[i];
    if (rope) {
      const int64_t cs = (b * S + s) * D;
      float g_cos = f(r(f(grad[i]) * f(cos[cs + d])));
      int64_t partner = d < half ? d + half : d - half;
      float g_sin = f(r(f(grad[i - d + partner]) * f(sin[cs + partner])));
      value = r(g_cos + (d < half ? g_sin : -g_sin));
    }
    out[((b * S + s) * H + h) * D + d] = value;
  }
}

// grad_hidden = bf16(bf16(q + k) + v).
__global__ void sum3(const bf16* q, const bf16* k, const bf16* v, bf16* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = r(f(r(f(q[i]) + f(k[i]))) + f(v[i]));
}

unsigned grid_for(int64_t n) { return unsigned(std::min<int64_t>((n + 255) / 256, 132 * 32)); }

// Carves 256-byte aligned pieces out of the workspace.
struct Carver {
  char* base;
  size_t used = 0;
  bf16* take(int64_t elements) {
    bf16* p = base ? reinterpret_cast<bf16*>(base + used) : nullptr;
    used += (size_t(elements) * sizeof(bf16) + 255) / 256 * 256;
    return p;
  }
};

struct Scratch {
  bf16 *gao, *gao_t, *gaw, *gvs, *gqs, *gks, *gk_sum, *gv_sum, *gq_proj, *gk_proj, *gv_proj, *ghs_q, *ghs_k, *ghs_v;
  void* gemm_workspace;
};
Scratch carve(Carver& c, int64_t B, int64_t S) {
  Scratch s;
  const int64_t tokens = B * S;
  s.gao = c.take(tokens * kQProj);
  s.gao_t = c.take(tokens * kQProj);
  s.gaw = c.take(B * kHeads * S * S);
  s.gvs = c.take(B * kHeads * S * kHeadDim);
  s.gqs = c.take(B * kHeads * S * kHeadDim);
  s.gks = c.take(B * kHeads * S * kHeadDim);
  s.gk_sum = c.take(B * kKvHeads * S * kHeadDim);
  s.gv_sum = c.take(B * kKvHeads * S * kHeadDim);
  s.gq_proj = c.take(tokens * kQProj);
  s.gk_proj = c.take(tokens * kKvProj);
  s.gv_proj = c.take(tokens * kKvProj);
  s.ghs_q = c.take(tokens * kHidden);
  s.ghs_k = c.take(tokens * kHidden);
  s.ghs_v = c.take(tokens * kHidden);
  s.gemm_workspace = c.take(kGemmWorkspaceBytes / sizeof(bf16));
  return s;
}

}  // namespace

size_t gqa_rope_backward_workspace_bytes(int64_t batch_size, int64_t seq_len) {
  Carver c{nullptr};
  carve(c, batch_size, seq_len);
  return c.used;
}

kindex_status gqa_rope_backward(const kindex_gqa_rope_backward_params& p, void* workspace, size_t workspace_bytes,
                                void* stream) {
  using capi::fail;
  const int64_t B = p.batch_size, S = p.seq_len, T = B * S;
  if (B <= 0 || S <= 0)
    return fail(KINDEX_STATUS_INVALID_ARGUMENT, "gpu_reference: batch_size = " + std::to_string(B) +
                                                    ", seq_len = " + std::to_string(S) + ": must be positive");
  const size_t need = gqa_rope_backward_workspace_bytes(B, S);
  if (workspace_bytes < need)
    return fail(
        KINDEX_STATUS_WORKSPACE_TOO_SMALL,
        "gpu_reference: workspace_bytes = " + std::to_string(workspace_bytes) + ": needs " + std::to_string(need));
  Carver c{static_cast<char*>(workspace)};
  Scratch w = carve(c, B, S);
  auto s = cudaStream_t(stream);
  auto in = [](const void* ptr) { return static_cast<const bf16*>(ptr); };
  auto out = [](void* ptr) { return static_cast<bf16*>(ptr); };
  Gemm gemm(w.gemm_workspace, s);
  try {
    // 1-2. Output projection: gao = go @ Wo; grad_o_weight = go^T @ attn_output.
    gemm(T, kQProj, kHidden, in(p.grad_output), false, in(p.o_weight), false, w.gao);
    gemm(kHidden, kQProj, T, in(p.grad_output), true, in(p.attn_output), false, out(p.grad_o_weight));
    // 3. [B, S, 32, 128] -> [B, 32, S, 128].
    split_heads<<<grid_for(T * kQProj), 256, 0, s>>>(w.gao, w.gao_t, B, S, kHeads, kHeadDim);
    // 4-5. gaw = gao_t @ V^T; gvs = A^T @ gao_t (batched over B*32 heads).
    const int64_t bh = B * kHeads, sd = S * kHeadDim, ss = S * S;
    gemm(S, S, kHeadDim, w.gao_t, false, in(p.value_states), true, w.gaw, bh, sd, sd, ss);
    gemm(S, kHeadDim, S, in(p.attn_weights), true, w.gao_t, false, w.gvs, bh, ss, sd, sd);
    // 6. Softmax backward and scaling, in place.
    softmax_backward<<<unsigned(bh * S), 256, 0, s>>>(w.gaw, in(p.attn_weights), S, p.scaling);
    // 7-8. gqs = gas @ K; gks = gas^T @ Q.
    gemm(S, kHeadDim, S, w.gaw, false, in(p.key_states), false, w.gqs, bh, ss, sd, sd);
    gemm(S, kHeadDim, S, w.gaw, true, in(p.query_states), false, w.gks, bh, ss, sd, sd);
    // 9. GQA sums over the 4 query heads of each KV head.
    gqa_sum<<<grid_for(B * kKvHeads * sd), 256, 0, s>>>(w.gks, w.gk_sum, B, S);
    gqa_sum<<<grid_for(B * kKvHeads * sd), 256, 0, s>>>(w.gvs, w.gv_sum, B, S);
    // 10. RoPE backward for Q and K, and every branch back to [B, S, heads * 128].
    auto cos = in(p.cos), sin = in(p.sin);
    rope_backward_transpose<<<grid_for(T * kQProj), 256, 0, s>>>(w.gqs, cos, sin, w.gq_proj, B, kHeads, S, true);
    rope_backward_transpose<<<grid_for(T * kKvProj), 256, 0, s>>>(w.gk_sum, cos, sin, w.gk_proj, B, kKvHeads, S, true);
    rope_backward_transpose<<<grid_for(T * kKvProj), 256, 0, s>>>(w.gv_sum, cos, sin, w.gv_proj, B, kKvHeads, S, false);
    // 11-12. Projections: grad_hidden per branch, and the weight gradients.
    gemm(T, kHidden, kQProj, w.gq_proj, false, in(p.q_weight), false, w.ghs_q);
    gemm(T, kHidden, kKvProj, w.gk_proj, false, in(p.k_weight), false, w.ghs_k);
    gemm(T, kHidden, kKvProj, w.gv_proj, false, in(p.v_weight), false, w.ghs_v);
    gemm(kQProj, kHidden, T, w.gq_proj, true, in(p.hidden_states), false, out(p.grad_q_weight));
    gemm(kKvProj, kHidden, T, w.gk_proj, true, in(p.hidden_states), false, out(p.grad_k_weight));
    gemm(kKvProj, kHidden, T, w.gv_proj, true, in(p.hidden_states), false, out(p.grad_v_weight));
    // 13. grad_hidden_states = (q + k) + v, rounded after each addition.
    sum3<<<grid_for(T * kHidden), 256, 0, s>>>(w.ghs_q, w.ghs_k, w.ghs_v, out(p.grad_hidden_states), T * kHidden);
  } catch (const GemmError& e) {
    return fail(KINDEX_STATUS_CUDA_ERROR, std::string("gpu_reference gqa_rope_backward: ") + e.what());
  }
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    return fail(KINDEX_STATUS_CUDA_ERROR,
                std::string("gpu_reference gqa_rope_backward launch: ") + cudaGetErrorString(err));
  return KINDEX_STATUS_OK;
}

}  // namespace kindex::gpu_reference
