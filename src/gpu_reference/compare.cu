// The runner's comparator on the device: both correctness rules' per-element tally (compare/element_rule.hpp, the
// host comparator's very code) over two device tensors, so outputs that live on the device are judged there and
// never copied to the host. Each thread tallies a grid-stride range in increasing index order, a block merges its
// threads' tallies, and the host merges the blocks' (at most kMaxBlocks), as compare.cpp merges its chunks.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "compare/element_rule.hpp"
#include "gpu_reference/gpu_reference.hpp"
#include "kernels/capi.hpp"

namespace kindex::gpu_reference {

namespace {

using compare::Tally;

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 1024;

// Element i as fp32, as the host's loaders give it (`tensor.to(torch.float32)`): exact for bf16 and fp16.
__device__ float load(const __nv_bfloat16* p, int64_t i) { return __bfloat162float(p[i]); }
__device__ float load(const __half* p, int64_t i) { return __half2float(p[i]); }
__device__ float load(const float* p, int64_t i) { return p[i]; }

template <class T, bool Fib>
__global__ void __launch_bounds__(kThreads)
    tally_kernel(const T* actual, const T* expected, int64_t numel, float atol, float rtol, Tally* partials) {
  __shared__ Tally block[kThreads];
  Tally t = compare::empty_tally();
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < numel; i += stride) {
    const float x = load(actual, i), y = load(expected, i);
    if constexpr (Fib)
      compare::fib_element(t, x, y, i, atol, rtol);
    else
      compare::sol_element(t, x, y, i, atol, rtol);
  }
  block[threadIdx.x] = t;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (int(threadIdx.x) < half) compare::merge(block[threadIdx.x], block[threadIdx.x + half]);
    __syncthreads();
  }
  if (threadIdx.x == 0) partials[blockIdx.x] = block[0];
}

template <class T>
void launch(kindex_compare_rule rule, const void* actual, const void* expected, int64_t numel, float atol,
            float rtol, Tally* partials, int blocks, cudaStream_t s) {
  auto a = static_cast<const T*>(actual), e = static_cast<const T*>(expected);
  if (rule == KINDEX_COMPARE_FLASHINFER_BENCH)
    tally_kernel<T, true><<<blocks, kThreads, 0, s>>>(a, e, numel, atol, rtol, partials);
  else
    tally_kernel<T, false><<<blocks, kThreads, 0, s>>>(a, e, numel, atol, rtol, partials);
}

}  // namespace

kindex_status compare_tally(kindex_compare_rule rule, kindex_dtype dtype, const void* actual, const void* expected,
                            int64_t numel, float atol, float rtol, kindex_compare_tally* out, void* stream) {
  using capi::fail;
  const std::string where = "kindex_gpu_reference_compare: ";
  if (!out) return fail(KINDEX_STATUS_INVALID_ARGUMENT, where + "tally = NULL");
  if (rule != KINDEX_COMPARE_FLASHINFER_BENCH && rule != KINDEX_COMPARE_SOL_EXECBENCH)
    return fail(KINDEX_STATUS_INVALID_ARGUMENT, where + "rule = " + std::to_string(int(rule)) + ": unknown");
  if (dtype != KINDEX_DTYPE_BF16 && dtype != KINDEX_DTYPE_FP16 && dtype != KINDEX_DTYPE_FP32)
    return fail(KINDEX_STATUS_NOT_SUPPORTED, where + "dtype = " + std::to_string(int(dtype)) + ": not a float");
  if (numel < 0) return fail(KINDEX_STATUS_INVALID_ARGUMENT, where + "numel = " + std::to_string(numel) + " < 0");
  *out = compare::empty_tally();
  if (numel == 0) return KINDEX_STATUS_OK;
  if (!actual || !expected) return fail(KINDEX_STATUS_INVALID_ARGUMENT, where + "actual and expected are required");
  const int64_t wanted = (numel + kThreads - 1) / kThreads;
  const int blocks = int(wanted < kMaxBlocks ? wanted : kMaxBlocks);
  auto s = cudaStream_t(stream);
  Tally* partials = nullptr;
  if (cudaError_t e = cudaMallocAsync(reinterpret_cast<void**>(&partials), sizeof(Tally) * size_t(blocks), s);
      e != cudaSuccess)
    return fail(KINDEX_STATUS_CUDA_ERROR, where + "cudaMallocAsync: " + cudaGetErrorString(e));
  if (dtype == KINDEX_DTYPE_BF16)
    launch<__nv_bfloat16>(rule, actual, expected, numel, atol, rtol, partials, blocks, s);
  else if (dtype == KINDEX_DTYPE_FP16)
    launch<__half>(rule, actual, expected, numel, atol, rtol, partials, blocks, s);
  else
    launch<float>(rule, actual, expected, numel, atol, rtol, partials, blocks, s);
  std::vector<Tally> host(static_cast<size_t>(blocks));
  cudaMemcpyAsync(host.data(), partials, sizeof(Tally) * host.size(), cudaMemcpyDeviceToHost, s);
  cudaFreeAsync(partials, s);
  cudaError_t e = cudaStreamSynchronize(s);
  if (e == cudaSuccess) e = cudaGetLastError();
  if (e != cudaSuccess)
    return fail(KINDEX_STATUS_CUDA_ERROR, where + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
  for (const Tally& t : host) compare::merge(*out, t);
  return KINDEX_STATUS_OK;
}

}  // namespace kindex::gpu_reference
