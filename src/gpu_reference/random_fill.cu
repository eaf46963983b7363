// The runner's input generator on the device: each kind of catalog::RandomFill, computed with the host's arithmetic
// (core/random_math.hpp), so a tensor drawn here has the bits the host generator gives it. The float steps of the
// softmax (subtract the max, sequential sum, divide) are explicit round-to-nearest intrinsics, as the host's -ffp-
// contract=off float code does them.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <string>

#include "core/random_math.hpp"
#include "gpu_reference/gpu_reference.hpp"
#include "kernels/capi.hpp"

namespace kindex::gpu_reference {

namespace {

namespace rm = random_math;

// A double rounded to float, then to the element type (TensorView::set's path on the host).
template <class T>
__device__ void store(T* out, int64_t i, double v) {
  const float f = __double2float_rn(v);
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    out[i] = __float2bfloat16_rn(f);
  else if constexpr (std::is_same_v<T, __half>)
    out[i] = __float2half_rn(f);
  else
    out[i] = f;
}

// One thread per Box-Muller pair; elements of an unused page are zeros.
template <class T>
__global__ void normal_kernel(T* out, int64_t numel, uint64_t key, double scale, const uint8_t* pages_used,
                              int64_t page_elems) {
  const int64_t pairs = (numel + 1) / 2;
  for (int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; p < pairs; p += int64_t(gridDim.x) * blockDim.x) {
    double even, odd;
    rm::normal_pair(key, uint64_t(p), even, odd);
    for (int half = 0; half < 2; ++half) {
      const int64_t i = 2 * p + half;
      if (i >= numel) break;
      const bool used = !pages_used || pages_used[i / page_elems];
      store(out, i, used ? rm::mul(scale, half ? odd : even) : 0.0);
    }
  }
}

template <class T>
__global__ void trig_kernel(T* out, int64_t numel, uint64_t key, bool cosine) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < numel; i += int64_t(gridDim.x) * blockDim.x)
    store(out, i, rm::trig_of_angle(rm::clamped_angle(rm::normal(key, uint64_t(i))), cosine));
}

// One thread per row, in the host's order: the max, the sequential fp32 sum of the exponentials, each over the sum.
template <class T>
__global__ void softmax_rows_kernel(T* out, int64_t rows, int64_t cols, uint64_t key) {
  for (int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; r < rows; r += int64_t(gridDim.x) * blockDim.x) {
    const uint64_t first = uint64_t(r * cols);
    auto x = [&](int64_t c) { return __double2float_rn(rm::normal(key, first + uint64_t(c))); };
    auto e = [&](float xc, float m) { return __double2float_rn(rm::exp_nonpositive(double(__fsub_rn(xc, m)))); };
    float m = -INFINITY;
    for (int64_t c = 0; c < cols; ++c) m = fmaxf(m, x(c));
    float sum = 0.f;
    for (int64_t c = 0; c < cols; ++c) sum = __fadd_rn(sum, e(x(c), m));
    for (int64_t c = 0; c < cols; ++c) store(out, r * cols + c, double(__fdiv_rn(e(x(c), m), sum)));
  }
}

unsigned blocks_for(int64_t threads) {
  const int64_t blocks = (threads + 255) / 256;
  return unsigned(blocks < 1 ? 1 : (blocks > 65535 * 8 ? 65535 * 8 : blocks));
}

template <class T>
kindex_status launch(const kindex_random_fill& f, T* out, const uint8_t* pages_used, cudaStream_t s) {
  const uint64_t key = rm::stream_key(f.seed, f.stream);
  switch (f.kind) {
    case KINDEX_RANDOM_NORMAL:
      normal_kernel<<<blocks_for((f.numel + 1) / 2), 256, 0, s>>>(out, f.numel, key, f.scale, pages_used,
                                                                   f.page_elems);
      break;
    case KINDEX_RANDOM_COS_OF_ANGLE:
    case KINDEX_RANDOM_SIN_OF_ANGLE:
      trig_kernel<<<blocks_for(f.numel), 256, 0, s>>>(out, f.numel, key, f.kind == KINDEX_RANDOM_COS_OF_ANGLE);
      break;
    case KINDEX_RANDOM_SOFTMAX_ROWS:
      softmax_rows_kernel<<<blocks_for(f.numel / f.row), 128, 0, s>>>(out, f.numel / f.row, f.row, key);
      break;
  }
  return KINDEX_STATUS_OK;
}

}  // namespace

kindex_status fill_random(const kindex_random_fill& f, void* out, void* stream) {
  using capi::fail;
  const std::string where = "kindex_gpu_reference_fill_random: ";
  if (f.numel < 0) return fail(KINDEX_STATUS_INVALID_ARGUMENT, where + "numel = " + std::to_string(f.numel) + " < 0");
  if (f.numel == 0) return KINDEX_STATUS_OK;
  if (!out) return fail(KINDEX_STATUS_INVALID_ARGUMENT, where + "out = NULL");
  if (f.kind < KINDEX_RANDOM_NORMAL || f.kind > KINDEX_RANDOM_SOFTMAX_ROWS)
    return fail(KINDEX_STATUS_INVALID_ARGUMENT, where + "kind = " + std::to_string(int(f.kind)) + ": unknown");
  if (f.kind == KINDEX_RANDOM_SOFTMAX_ROWS && (f.row <= 0 || f.numel % f.row != 0))
    return fail(KINDEX_STATUS_INVALID_ARGUMENT,
                where + "row = " + std::to_string(f.row) + ": must be positive and divide numel");
  if (f.pages_used && (f.page_elems <= 0 || f.num_pages * f.page_elems != f.numel))
    return fail(KINDEX_STATUS_INVALID_ARGUMENT,
                where + "num_pages * page_elems = " + std::to_string(f.num_pages * f.page_elems) +
                    ": must equal numel = " + std::to_string(f.numel));
  auto s = cudaStream_t(stream);
  uint8_t* pages = nullptr;
  if (f.pages_used) {
    if (cudaError_t e = cudaMallocAsync(reinterpret_cast<void**>(&pages), size_t(f.num_pages), s); e != cudaSuccess)
      return fail(KINDEX_STATUS_CUDA_ERROR, where + "cudaMallocAsync: " + cudaGetErrorString(e));
    cudaMemcpyAsync(pages, f.pages_used, size_t(f.num_pages), cudaMemcpyHostToDevice, s);
  }
  kindex_status status = KINDEX_STATUS_OK;
  if (f.dtype == KINDEX_DTYPE_BF16)
    status = launch(f, static_cast<__nv_bfloat16*>(out), pages, s);
  else if (f.dtype == KINDEX_DTYPE_FP16)
    status = launch(f, static_cast<__half*>(out), pages, s);
  else if (f.dtype == KINDEX_DTYPE_FP32)
    status = launch(f, static_cast<float*>(out), pages, s);
  else
    status = fail(KINDEX_STATUS_NOT_SUPPORTED, where + "dtype = " + std::to_string(int(f.dtype)) + ": not a float");
  if (pages) cudaFreeAsync(pages, s);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess)
    return fail(KINDEX_STATUS_CUDA_ERROR, where + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
  return status;
}

}  // namespace kindex::gpu_reference
