// grad_hidden's branch sum (gemm.hpp sum_branches_bf16): 8 bf16 per thread in 16-byte vectors, fp32 adds rounded to
// bf16 after each, as torch adds bf16 tensors. (Experiment, reverted: see README.md; was src/kernels/layer_backward/.)
#include <cuda_bf16.h>

#include "kernels/layer_backward/gemm.hpp"

namespace kindex::kernels::backward {
namespace {

__global__ void sum_branches_kernel(uint4* out, const uint4* k, const uint4* v, int64_t vectors) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < vectors; i += int64_t(gridDim.x) * blockDim.x) {
    uint4 o = out[i];
    const uint4 a = k[i], b = v[i];
    auto* op = reinterpret_cast<__nv_bfloat162*>(&o);
    const auto* ap = reinterpret_cast<const __nv_bfloat162*>(&a);
    const auto* bp = reinterpret_cast<const __nv_bfloat162*>(&b);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 q = __bfloat1622float2(op[j]), x = __bfloat1622float2(ap[j]), y = __bfloat1622float2(bp[j]);
      const float2 qk = __bfloat1622float2(__floats2bfloat162_rn(q.x + x.x, q.y + x.y));
      op[j] = __floats2bfloat162_rn(qk.x + y.x, qk.y + y.y);
    }
    out[i] = o;
  }
}

}  // namespace

cudaError_t sum_branches_bf16(void* out, const void* k, const void* v, int64_t count, cudaStream_t stream) {
  const int64_t vectors = count / 8;  // grad_hidden has 5120 columns: count is always a multiple of 8
  if (vectors == 0) return cudaSuccess;
  const int threads = 256;
  const int64_t blocks = (vectors + threads - 1) / threads;
  sum_branches_kernel<<<unsigned(blocks < 65535 ? blocks : 65535), threads, 0, stream>>>(
      static_cast<uint4*>(out), static_cast<const uint4*>(k), static_cast<const uint4*>(v), vectors);
  return cudaGetLastError();
}

}  // namespace kindex::kernels::backward
