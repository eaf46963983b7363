// The GPU reference for gqa_paged_decode_*: one block per (sequence, query head). Each warp walks a contiguous
// share of the sequence's tokens with an online softmax in fp32 (log2 domain), four tokens per step so their loads
// are in flight together, following its place in the page table by counting (no division per token); the warps'
// partial results are merged in shared memory at the end.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <string>
#include <type_traits>

#include "kernels/capi.hpp"
#include "gpu_reference/gpu_reference.hpp"

namespace kindex::gpu_reference {
namespace {

constexpr int kWarps = 8;
constexpr int kMaxPerLane = 8;  // head_dim <= 256
constexpr int kTokensPerStep = 4;

__device__ inline float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ inline float to_float(__half x) { return __half2float(x); }
template <class T>
__device__ inline T from_float(float x);
template <>
__device__ inline __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ inline __half from_float<__half>(float x) {
  return __float2half_rn(x);
}

__device__ inline float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <class T, int per_lane>  // head_dim / 32 elements per lane
__global__ void __launch_bounds__(kWarps * 32)
    decode_kernel(const T* __restrict__ q, const T* __restrict__ k_cache, const T* __restrict__ v_cache,
                  const int32_t* __restrict__ kv_indptr, const int32_t* __restrict__ kv_indices,
                  const int32_t* __restrict__ kv_last_page_len, T* __restrict__ output, float* __restrict__ lse,
                  int num_qo_heads, int num_kv_heads, int head_dim, int page_size, float sm_scale) {
  const int b = blockIdx.x / num_qo_heads;
  const int h = blockIdx.x % num_qo_heads;
  const int kvh = h / (num_qo_heads / num_kv_heads);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  const int page_begin = kv_indptr[b], page_end = kv_indptr[b + 1];
  const int pages = page_end - page_begin;
  const int last = pages > 0 ? (kv_last_page_len ? kv_last_page_len[b] : page_size) : 0;
  const int64_t tokens = pages > 0 ? int64_t(pages - 1) * page_size + last : 0;
  T* out = output + (int64_t(b) * num_qo_heads + h) * head_dim;
  if (tokens == 0) {
    for (int d = threadIdx.x; d < head_dim; d += blockDim.x) out[d] = from_float<T>(0.f);
    if (lse && threadIdx.x == 0) lse[int64_t(b) * num_qo_heads + h] = -INFINITY;
    return;
  }

  // q scaled into the log2 domain once: s2 = sm_scale * log2(e) * q.k
  const float scale2 = sm_scale * 1.4426950408889634f;
  float qv[per_lane];
  const T* qrow = q + (int64_t(b) * num_qo_heads + h) * head_dim + lane * per_lane;
#pragma unroll
  for (int j = 0; j < per_lane; ++j) qv[j] = to_float(qrow[j]) * scale2;

  float m = -INFINITY, l = 0.f, acc[per_lane];
  for (int j = 0; j < per_lane; ++j) acc[j] = 0.f;
  const int64_t row_stride = int64_t(num_kv_heads) * head_dim;  // elements between tokens of one page
  const int64_t head_offset = int64_t(kvh) * head_dim + lane * per_lane;

  // This warp's tokens [t, end), and where t is in the page table: page `slot` of the sequence, row `row` of it.
  const int64_t share = (tokens + kWarps - 1) / kWarps;
  int64_t t = int64_t(warp) * share;
  const int64_t end = t + share < tokens ? t + share : tokens;
  int64_t slot = t / page_size;
  int row = int(t % page_size);
  for (; t < end; t += kTokensPerStep) {
    // Tokens past the end of the share get logit -inf and weight 0, so every loop has a fixed trip count.
    const int n = end - t < kTokensPerStep ? int(end - t) : kTokensPerStep;
    float kv[kTokensPerStep][per_lane], vv[kTokensPerStep][per_lane];
#pragma unroll
    for (int i = 0; i < kTokensPerStep; ++i) {
      int64_t off = 0;
      if (i < n) {
        off = (int64_t(kv_indices[page_begin + slot]) * page_size + row) * row_stride + head_offset;
        if (++row == page_size) row = 0, ++slot;
      }
#pragma unroll
      for (int j = 0; j < per_lane; ++j) {
        kv[i][j] = i < n ? to_float(k_cache[off + j]) : 0.f;
        vv[i][j] = i < n ? to_float(v_cache[off + j]) : 0.f;
      }
    }
    float s[kTokensPerStep];
    float m_new = m;
#pragma unroll
    for (int i = 0; i < kTokensPerStep; ++i) {
      float partial = 0.f;
#pragma unroll
      for (int j = 0; j < per_lane; ++j) partial += qv[j] * kv[i][j];
      s[i] = i < n ? warp_sum(partial) : -INFINITY;
      m_new = fmaxf(m_new, s[i]);
    }
    const float correction = exp2f(m - m_new);  // 0 on the first step (m = -inf)
    l *= correction;
#pragma unroll
    for (int j = 0; j < per_lane; ++j) acc[j] *= correction;
#pragma unroll
    for (int i = 0; i < kTokensPerStep; ++i) {
      const float p = exp2f(s[i] - m_new);  // 0 for the padding tokens
      l += p;
#pragma unroll
      for (int j = 0; j < per_lane; ++j) acc[j] += p * vv[i][j];
    }
    m = m_new;
  }

  // Merge the warps: M = max m_w, L = sum l_w 2^(m_w - M), out = sum acc_w 2^(m_w - M) / L.
  __shared__ float sm_m[kWarps], sm_l[kWarps];
  __shared__ float sm_acc[kWarps][kMaxPerLane * 32];
  if (lane == 0) sm_m[warp] = m, sm_l[warp] = l;
  for (int j = 0; j < per_lane; ++j) sm_acc[warp][lane * per_lane + j] = acc[j];
  __syncthreads();
  float big_m = -INFINITY;
  for (int w = 0; w < kWarps; ++w) big_m = fmaxf(big_m, sm_m[w]);
  float big_l = 0.f;
  for (int w = 0; w < kWarps; ++w)
    if (sm_l[w] > 0.f) big_l += sm_l[w] * exp2f(sm_m[w] - big_m);
  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float o = 0.f;
    for (int w = 0; w < kWarps; ++w)
      if (sm_l[w] > 0.f) o += sm_acc[w][d] * exp2f(sm_m[w] - big_m);
    out[d] = from_float<T>(o / big_l);
  }
  if (lse && threadIdx.x == 0) lse[int64_t(b) * num_qo_heads + h] = big_m + log2f(big_l);
}

}  // namespace

kindex_status paged_decode(const kindex_paged_decode_params& p, void* stream) {
  using capi::fail;
  if (p.batch_size < 0)
    return fail(KINDEX_STATUS_INVALID_ARGUMENT,
                "gpu_reference: batch_size = " + std::to_string(p.batch_size) + ": must be >= 0");
  if (p.num_kv_heads <= 0 || p.num_qo_heads <= 0 || p.num_qo_heads % p.num_kv_heads != 0)
    return fail(KINDEX_STATUS_INVALID_ARGUMENT,
                "gpu_reference: num_qo_heads = " + std::to_string(p.num_qo_heads) +
                    ": must be a positive multiple of num_kv_heads = " + std::to_string(p.num_kv_heads));
  if (p.head_dim != 64 && p.head_dim != 128 && p.head_dim != 256)
    return fail(KINDEX_STATUS_NOT_SUPPORTED,
                "gpu_reference: head_dim = " + std::to_string(p.head_dim) + ": must be 64, 128 or 256");
  if (p.page_size <= 0)
    return fail(KINDEX_STATUS_INVALID_ARGUMENT,
                "gpu_reference: page_size = " + std::to_string(p.page_size) + ": must be positive");
  if (p.batch_size == 0) return KINDEX_STATUS_OK;
  const dim3 grid(unsigned(int64_t(p.batch_size) * p.num_qo_heads)), block(kWarps * 32);
  auto s = cudaStream_t(stream);
  auto launch = [&](auto element, auto per_lane_constant) {
    using T = decltype(element);
    constexpr int kPerLane = decltype(per_lane_constant)::value;
    decode_kernel<T, kPerLane><<<grid, block, 0, s>>>(
        static_cast<const T*>(p.q), static_cast<const T*>(p.k_cache), static_cast<const T*>(p.v_cache), p.kv_indptr,
        p.kv_indices, p.kv_last_page_len, static_cast<T*>(p.output), p.lse, p.num_qo_heads, p.num_kv_heads, p.head_dim,
        p.page_size, p.sm_scale);
  };
  auto by_dim = [&](auto element) {
    if (p.head_dim == 64)
      launch(element, std::integral_constant<int, 2>{});
    else if (p.head_dim == 128)
      launch(element, std::integral_constant<int, 4>{});
    else
      launch(element, std::integral_constant<int, 8>{});
  };
  if (p.dtype == KINDEX_DTYPE_BF16)
    by_dim(__nv_bfloat16{});
  else if (p.dtype == KINDEX_DTYPE_FP16)
    by_dim(__half{});
  else
    return fail(KINDEX_STATUS_NOT_SUPPORTED,
                "gpu_reference: dtype = " + std::to_string(int(p.dtype)) + ": bf16 or fp16 only");
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    return fail(KINDEX_STATUS_CUDA_ERROR, std::string("gpu_reference paged_decode launch: ") + cudaGetErrorString(err));
  return KINDEX_STATUS_OK;
}

}  // namespace kindex::gpu_reference
