// GPU tests of the Hopper wgmma building blocks (src/kernels/common/wgmma.cuh) on their own: one warpgroup stores
// its operands in the 128-byte-swizzle layout (sw128_offset), builds the descriptors the attention kernels build
// and runs one 64 x N tile through every operand form those kernels use; the result, read out through the
// documented accumulator layout, must equal a plain CPU product exactly (the operands are small multiples of 1/4,
// so every product and partial sum is exact in fp32 whatever the summation order). One layout, descriptor or
// fragment mapping wrong anywhere shows up as a mismatch here before it shows up as a wrong gradient.
//   dP = dO V^T:  A and B K-major from shared memory, N = 64, K = 128 (two 64-column blocks of each operand);
//                 and A from registers (mma.sync A fragments) with B K-major
//   dQ = dS K:    A from registers (mma.sync A fragments), B MN-major, N = 128, K = 64
//   dV = A^T dO:  A and B MN-major from shared memory, N = 128, K = 64, A taken from the second 64-column block of
//                 a 128-column tile (the descriptor's block offset)
// And the TMA path the next kernels will load through (common/tma.cuh, tensor_map.hpp): two 64-column boxes of each
// of two matrices into shared memory, completing one mbarrier, must land byte for byte in that same layout, rows past
// the matrix as zeros, and feed the dV-form product exactly.
// Skips without a device of compute capability 9.0 (the only one wgmma exists on).
#include <gtest/gtest.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/common/tensor_map.hpp"
#include "kernels/common/tma.cuh"
#include "kernels/common/wgmma.cuh"

namespace {

using bf16 = __nv_bfloat16;
using namespace kindex::ptx;

enum class Form { ss_kmajor_n64, rs_kmajor_n64, rs_mnmajor_n128, ss_mnmajor_n128 };
__host__ __device__ constexpr bool register_a(Form f) { return f == Form::rs_kmajor_n64 || f == Form::rs_mnmajor_n128; }

struct FormShape {
  int n, k;             // product 64 x n over k
  int a_rows, a_cols;   // the A operand as stored in global memory (row-major)
  int b_rows, b_cols;   // the B operand as stored in global memory (row-major)
};
// dP: A = dO [64][128], B = V [64][128] (C = A B^T). dQ: A = dS [64][64], B = K [64][128] (C = A B).
// dV: A = X [64][128] used as X[:, 64:128]^T, B = dO [64][128] (C = X[:, 64:]^T B).
__host__ __device__ constexpr FormShape shape_of(Form f) {
  switch (f) {
    case Form::ss_kmajor_n64:
    case Form::rs_kmajor_n64: return {64, 128, 64, 128, 64, 128};
    case Form::rs_mnmajor_n128: return {128, 64, 64, 64, 64, 128};
    case Form::ss_mnmajor_n128: return {128, 64, 64, 128, 64, 128};
  }
  return {};
}

// Copies a row-major [rows][cols] matrix into the swizzled tile, element by element (generic-proxy stores).
__device__ void store_tile(uint8_t* tile, const bf16* src, int rows, int cols) {
  for (int i = threadIdx.x; i < rows * cols; i += blockDim.x) {
    const int r = i / cols, c = i % cols;
    *reinterpret_cast<bf16*>(tile + sw128_offset(rows, r, c)) = src[i];
  }
}

template <Form kForm>
__global__ void wgmma_tile_kernel(const bf16* a, const bf16* b, float* c) {
  constexpr FormShape s = shape_of(kForm);
  __shared__ uint8_t raw[2 * 64 * 128 * 2 + 1024];
  // Tiles start 1024-aligned (the swizzle's requirement), whatever alignment the compiler gives the array.
  uint8_t* smem = raw + ((1024 - uint32_t(__cvta_generic_to_shared(raw)) % 1024) % 1024);
  uint8_t* tile_a = smem;
  uint8_t* tile_b = smem + 64 * 128 * 2;
  if (!register_a(kForm)) store_tile(tile_a, a, s.a_rows, s.a_cols);
  store_tile(tile_b, b, s.b_rows, s.b_cols);
  fence_proxy_async_shared();
  __syncthreads();
  const uint32_t sa = uint32_t(__cvta_generic_to_shared(tile_a)), sb = uint32_t(__cvta_generic_to_shared(tile_b));
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;

  float d[s.n / 2];
#pragma unroll
  for (int i = 0; i < s.n / 2; ++i) d[i] = -1.f;  // overwritten: the first k-step does not accumulate
  // A fragments for the register form, straight from global memory (rows 16 warp + g, + 8).
  uint32_t frag[s.k / 16][4];
  if constexpr (register_a(kForm)) {
    const int r0 = warp * 16 + g;
    auto pair = [&](int r, int col) {
      __nv_bfloat162 v{a[r * s.a_cols + col], a[r * s.a_cols + col + 1]};
      return *reinterpret_cast<uint32_t*>(&v);
    };
#pragma unroll
    for (int kc = 0; kc < s.k / 16; ++kc) {
      frag[kc][0] = pair(r0, kc * 16 + 2 * t);
      frag[kc][1] = pair(r0 + 8, kc * 16 + 2 * t);
      frag[kc][2] = pair(r0, kc * 16 + 2 * t + 8);
      frag[kc][3] = pair(r0 + 8, kc * 16 + 2 * t + 8);
    }
  }
  wgmma_fence_operands(d);
  wgmma_fence();
#pragma unroll
  for (int kc = 0; kc < s.k / 16; ++kc) {
    const int k0 = kc * 16;
    if constexpr (kForm == Form::ss_kmajor_n64) {
      Wgmma<64>::ss<kKMajor, kKMajor>(d, kmajor_descriptor(sa, 64, k0), kmajor_descriptor(sb, 64, k0), kc > 0);
    } else if constexpr (kForm == Form::rs_kmajor_n64) {
      Wgmma<64>::rs<kKMajor>(d, frag[kc], kmajor_descriptor(sb, 64, k0), kc > 0);
    } else if constexpr (kForm == Form::rs_mnmajor_n128) {
      Wgmma<128>::rs<kMnMajor>(d, frag[kc], mnmajor_descriptor(sb, 64, k0, 0), kc > 0);
    } else {
      Wgmma<128>::ss<kMnMajor, kMnMajor>(d, mnmajor_descriptor(sa, 64, k0, 64), mnmajor_descriptor(sb, 64, k0, 0),
                                         kc > 0);
    }
  }
  wgmma_commit();
  wgmma_wait<0>();
  wgmma_fence_operands(d);
  // The accumulator layout of wgmma.cuh: d[4i + e] is row 16 warp + g (+ 8 for e >= 2), column 8i + 2t + (e & 1).
#pragma unroll
  for (int i = 0; i < s.n / 8; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = warp * 16 + g + (e >> 1) * 8, col = i * 8 + 2 * t + (e & 1);
      c[row * s.n + col] = d[4 * i + e];
    }
}

// Rows row0 .. row0 + 63 of X and Y (both [rows][128]) by TMA, two 64-column boxes each, into swizzled tiles; the X
// tile's bytes go to `raw`, and c = X_tile[:, 64:128]^T Y_tile (the dV form) to `c`.
__global__ void tma_tile_kernel(const __grid_constant__ CUtensorMap map_x, const __grid_constant__ CUtensorMap map_y,
                                int row0, bf16* raw, float* c) {
  __shared__ uint8_t buffer[2 * 64 * 128 * 2 + 1024];
  __shared__ uint64_t barrier;
  uint8_t* smem = buffer + ((1024 - uint32_t(__cvta_generic_to_shared(buffer)) % 1024) % 1024);
  const uint32_t sx = uint32_t(__cvta_generic_to_shared(smem)), sy = sx + 64 * 128 * 2;
  const uint32_t bar = uint32_t(__cvta_generic_to_shared(&barrier));
  if (threadIdx.x == 0) {
    mbarrier_init(bar, 1);
    mbarrier_init_fence();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    mbarrier_arrive_expect_tx(bar, 4 * 64 * 64 * 2);
    for (int block = 0; block < 2; ++block) {
      tma_load_2d(sx + block * 64 * 128, &map_x, bar, block * 64, row0);
      tma_load_2d(sy + block * 64 * 128, &map_y, bar, block * 64, row0);
    }
  }
  mbarrier_wait(bar, 0);
  for (int i = threadIdx.x; i < 64 * 128; i += blockDim.x) raw[i] = reinterpret_cast<const bf16*>(smem)[i];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  float d[64];
  wgmma_fence_operands(d);
  wgmma_fence();
#pragma unroll
  for (int kc = 0; kc < 4; ++kc)
    Wgmma<128>::ss<kMnMajor, kMnMajor>(d, mnmajor_descriptor(sx, 64, kc * 16, 64),
                                       mnmajor_descriptor(sy, 64, kc * 16, 0), kc > 0);
  wgmma_commit();
  wgmma_wait<0>();
  wgmma_fence_operands(d);
#pragma unroll
  for (int i = 0; i < 16; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) c[(warp * 16 + g + (e >> 1) * 8) * 128 + i * 8 + 2 * t + (e & 1)] = d[4 * i + e];
}

bool have_sm90() {
  int n = 0, major = 0, minor = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) return false;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0);
  return major == 9 && minor == 0;
}

#define CUDA_OK(expr)                                                          \
  do {                                                                         \
    cudaError_t err_ = (expr);                                                 \
    ASSERT_EQ(err_, cudaSuccess) << #expr << ": " << cudaGetErrorString(err_); \
  } while (0)

// Multiples of 1/4 in [-2, 2]: exact in bf16, and 128-term sums of their products exact in fp32.
std::vector<float> small_values(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> dist(-8, 8);
  std::vector<float> v(n);
  for (auto& x : v) x = float(dist(gen)) / 4.f;
  return v;
}

template <Form kForm>
void check_form() {
  if (!have_sm90()) GTEST_SKIP() << "needs a device of compute capability 9.0 (wgmma)";
  constexpr FormShape s = shape_of(kForm);
  const std::vector<float> a = small_values(size_t(s.a_rows) * s.a_cols, 11);
  const std::vector<float> b = small_values(size_t(s.b_rows) * s.b_cols, 12);
  std::vector<bf16> a16(a.begin(), a.end()), b16(b.begin(), b.end());
  // The plain product in the form's own terms.
  std::vector<double> want(size_t(64) * s.n, 0.0);
  for (int m = 0; m < 64; ++m)
    for (int n = 0; n < s.n; ++n) {
      double sum = 0;
      for (int k = 0; k < s.k; ++k) {
        double x = 0, y = 0;
        switch (kForm) {
          case Form::ss_kmajor_n64:
          case Form::rs_kmajor_n64: x = a[m * s.a_cols + k], y = b[n * s.b_cols + k]; break;
          case Form::rs_mnmajor_n128: x = a[m * s.a_cols + k], y = b[k * s.b_cols + n]; break;
          case Form::ss_mnmajor_n128: x = a[k * s.a_cols + 64 + m], y = b[k * s.b_cols + n]; break;
        }
        sum += x * y;
      }
      want[m * s.n + n] = sum;
    }

  bf16 *da = nullptr, *db = nullptr;
  float* dc = nullptr;
  CUDA_OK(cudaMalloc(&da, a16.size() * sizeof(bf16)));
  CUDA_OK(cudaMalloc(&db, b16.size() * sizeof(bf16)));
  CUDA_OK(cudaMalloc(&dc, want.size() * sizeof(float)));
  CUDA_OK(cudaMemcpy(da, a16.data(), a16.size() * sizeof(bf16), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(db, b16.data(), b16.size() * sizeof(bf16), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(dc, 0xff, want.size() * sizeof(float)));  // NaN until written
  wgmma_tile_kernel<kForm><<<1, 128>>>(da, db, dc);
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<float> got(want.size());
  CUDA_OK(cudaMemcpy(got.data(), dc, got.size() * sizeof(float), cudaMemcpyDeviceToHost));
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);

  int mismatches = 0;
  std::string first;
  for (int m = 0; m < 64; ++m)
    for (int n = 0; n < s.n; ++n)
      if (double(got[m * s.n + n]) != want[m * s.n + n] && mismatches++ == 0)
        first = "(" + std::to_string(m) + ", " + std::to_string(n) + "): got " + std::to_string(got[m * s.n + n]) +
                ", want " + std::to_string(want[m * s.n + n]);
  EXPECT_EQ(mismatches, 0) << "of " << want.size() << " elements; first " << first;
}

TEST(Wgmma, TmaLoadsTheSwizzledLayoutWithZeroFill) {
  if (!have_sm90()) GTEST_SKIP() << "needs a device of compute capability 9.0 (wgmma)";
  constexpr int kRows = 100, kRow0 = 64;  // rows 64..99 exist, 100..127 of the tile read as zeros
  const std::vector<float> x = small_values(size_t(kRows) * 128, 21), y = small_values(size_t(kRows) * 128, 22);
  std::vector<bf16> x16(x.begin(), x.end()), y16(y.begin(), y.end());
  bf16 *dx = nullptr, *dy = nullptr, *draw = nullptr;
  float* dc = nullptr;
  CUDA_OK(cudaMalloc(&dx, x16.size() * sizeof(bf16)));
  CUDA_OK(cudaMalloc(&dy, y16.size() * sizeof(bf16)));
  CUDA_OK(cudaMalloc(&draw, 64 * 128 * sizeof(bf16)));
  CUDA_OK(cudaMalloc(&dc, 64 * 128 * sizeof(float)));
  CUDA_OK(cudaMemcpy(dx, x16.data(), x16.size() * sizeof(bf16), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dy, y16.data(), y16.size() * sizeof(bf16), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(draw, 0xff, 64 * 128 * sizeof(bf16)));
  CUDA_OK(cudaMemset(dc, 0xff, 64 * 128 * sizeof(float)));
  CUtensorMap map_x{}, map_y{};
  std::string error;
  ASSERT_TRUE(kindex::kernels::encode_sw128_map(map_x, dx, kRows, 128, 128, 64, error)) << error;
  ASSERT_TRUE(kindex::kernels::encode_sw128_map(map_y, dy, kRows, 128, 128, 64, error)) << error;
  tma_tile_kernel<<<1, 128>>>(map_x, map_y, kRow0, draw, dc);
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<bf16> raw(64 * 128);
  std::vector<float> got(64 * 128);
  CUDA_OK(cudaMemcpy(raw.data(), draw, raw.size() * sizeof(bf16), cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(got.data(), dc, got.size() * sizeof(float), cudaMemcpyDeviceToHost));
  cudaFree(dx);
  cudaFree(dy);
  cudaFree(draw);
  cudaFree(dc);

  auto x_at = [&](int r, int col) { return kRow0 + r < kRows ? x[(kRow0 + r) * 128 + col] : 0.f; };
  auto y_at = [&](int r, int col) { return kRow0 + r < kRows ? y[(kRow0 + r) * 128 + col] : 0.f; };
  int layout_mismatches = 0;
  for (int r = 0; r < 64; ++r)
    for (int col = 0; col < 128; ++col)
      if (float(raw[sw128_offset(64, r, col) / 2]) != x_at(r, col)) ++layout_mismatches;
  EXPECT_EQ(layout_mismatches, 0) << "of 8192 elements of the X tile not where sw128_offset puts them";
  int product_mismatches = 0;
  for (int m = 0; m < 64; ++m)
    for (int n = 0; n < 128; ++n) {
      double want = 0;
      for (int k = 0; k < 64; ++k) want += double(x_at(k, 64 + m)) * y_at(k, n);
      if (double(got[m * 128 + n]) != want) ++product_mismatches;
    }
  EXPECT_EQ(product_mismatches, 0) << "of 8192 elements of X[:, 64:]^T Y from the TMA-loaded tiles";
}

TEST(Wgmma, KMajorOperandsFromSharedMemoryN64) { check_form<Form::ss_kmajor_n64>(); }
TEST(Wgmma, RegisterAWithKMajorBN64) { check_form<Form::rs_kmajor_n64>(); }
TEST(Wgmma, RegisterAWithMnMajorBN128) { check_form<Form::rs_mnmajor_n128>(); }
TEST(Wgmma, MnMajorOperandsFromSharedMemoryN128) { check_form<Form::ss_mnmajor_n128>(); }

}  // namespace
