// Calibration for the runner: a kernel of known duration (to check the timing protocol against), the device's
// measured copy bandwidth and GEMM rate (kindex's tighter floor), and the versions baked into this build.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/capi.hpp"
#include "gpu_reference/gemm.cuh"
#include "gpu_reference/gpu_reference.hpp"

namespace kindex::gpu_reference {
namespace {

__device__ inline unsigned long long global_timer_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spin_kernel(unsigned long long ns, unsigned long long* observed) {
  const unsigned long long t0 = global_timer_ns();
  const long long c0 = clock64();
  unsigned long long t = t0;
  while (t - t0 < ns) t = global_timer_ns();
  if (observed) observed[0] = t - t0, observed[1] = (unsigned long long)(clock64() - c0);
}

// Deterministic pseudo-random bf16 in [-1, 1): a GEMM on zeros runs faster than on real data.
__global__ void fill_random(__nv_bfloat16* p, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t x = uint32_t(i) * 2654435761u ^ seed;
    x ^= x >> 16, x *= 0x7feb352du, x ^= x >> 15, x *= 0x846ca68bu, x ^= x >> 16;
    p[i] = __float2bfloat16(float(x >> 8) * (2.0f / 16777216.0f) - 1.0f);
  }
}

kindex_status cuda_fail(cudaError_t e, const char* what) {
  return capi::fail(KINDEX_STATUS_CUDA_ERROR, std::string(what) + ": " + cudaGetErrorString(e));
}

#define KX_TRY(expr)                                    \
  do {                                                  \
    cudaError_t e_ = (expr);                            \
    if (e_ != cudaSuccess) return cuda_fail(e_, #expr); \
  } while (0)

// Median of `reps` event-timed runs of `body` (after one warm-up run), in seconds.
template <class Body>
kindex_status median_seconds(int reps, cudaStream_t s, Body body, double* seconds) {
  cudaEvent_t a, b;
  KX_TRY(cudaEventCreate(&a));
  KX_TRY(cudaEventCreate(&b));
  std::vector<double> t;
  body();
  for (int i = 0; i < reps; ++i) {
    cudaEventRecord(a, s);
    body();
    cudaEventRecord(b, s);
    cudaError_t e = cudaEventSynchronize(b);
    if (e != cudaSuccess) return cuda_fail(e, "cudaEventSynchronize");
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    t.push_back(ms * 1e-3);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(t.begin(), t.end());
  *seconds = t[t.size() / 2];
  return KINDEX_STATUS_OK;
}

}  // namespace

kindex_status spin(uint64_t nanoseconds, unsigned long long* observed_device, void* stream) {
  spin_kernel<<<1, 1, 0, cudaStream_t(stream)>>>(nanoseconds, observed_device);
  KX_TRY(cudaGetLastError());
  return KINDEX_STATUS_OK;
}

kindex_status measure_rates(double* copy_bytes_per_s, double* gemm_flops_per_s) {
  cudaStream_t s;
  KX_TRY(cudaStreamCreate(&s));
  const size_t copy_bytes = size_t(1) << 30;
  const int64_t n = 8192;
  void *src = nullptr, *dst = nullptr, *a = nullptr, *b = nullptr, *c = nullptr, *ws = nullptr;
  kindex_status status = KINDEX_STATUS_OK;
  auto cleanup = [&] {
    for (void* p : {src, dst, a, b, c, ws}) cudaFree(p);
    cudaStreamDestroy(s);
  };
  if (cudaMalloc(&src, copy_bytes) != cudaSuccess || cudaMalloc(&dst, copy_bytes) != cudaSuccess ||
      cudaMalloc(&a, n * n * 2) != cudaSuccess || cudaMalloc(&b, n * n * 2) != cudaSuccess ||
      cudaMalloc(&c, n * n * 2) != cudaSuccess || cudaMalloc(&ws, kGemmWorkspaceBytes) != cudaSuccess) {
    cleanup();
    return capi::fail(KINDEX_STATUS_CUDA_ERROR, "measure_rates: cudaMalloc failed");
  }
  cudaMemsetAsync(src, 1, copy_bytes, s);
  fill_random<<<4096, 256, 0, s>>>(static_cast<__nv_bfloat16*>(a), n * n, 1);
  fill_random<<<4096, 256, 0, s>>>(static_cast<__nv_bfloat16*>(b), n * n, 2);
  double copy_s = 0, gemm_s = 0;
  status = median_seconds(
      10, s, [&] { cudaMemcpyAsync(dst, src, copy_bytes, cudaMemcpyDeviceToDevice, s); }, &copy_s);
  if (status == KINDEX_STATUS_OK) {
    try {
      Gemm gemm(ws, s);
      status = median_seconds(
          10, s, [&] { gemm(n, n, n, a, false, b, false, c); }, &gemm_s);
    } catch (const GemmError& e) {
      status = capi::fail(KINDEX_STATUS_CUDA_ERROR, std::string("measure_rates: ") + e.what());
    }
  }
  cleanup();
  if (status != KINDEX_STATUS_OK) return status;
  *copy_bytes_per_s = 2.0 * double(copy_bytes) / copy_s;
  *gemm_flops_per_s = 2.0 * double(n) * double(n) * double(n) / gemm_s;
  return KINDEX_STATUS_OK;
}

const char* nvcc_version() {
#define KX_STR2(x) #x
#define KX_STR(x) KX_STR2(x)
  return KX_STR(__CUDACC_VER_MAJOR__) "." KX_STR(__CUDACC_VER_MINOR__) "." KX_STR(__CUDACC_VER_BUILD__);
}

const char* cublaslt_version() {
  static const std::string v = [] {
    size_t x = cublasLtGetVersion();  // major * 10000 + minor * 100 + patch
    return std::to_string(x / 10000) + "." + std::to_string(x / 100 % 100) + "." + std::to_string(x % 100);
  }();
  return v.c_str();
}

}  // namespace kindex::gpu_reference
