#include "reference/bf16_gemm.hpp"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

#include "core/half.hpp"
#include "core/parallel.hpp"

extern "C" void openblas_set_num_threads(int num_threads);

namespace kindex::reference {
namespace {

// parallel_for owns the threads; OpenBLAS's own pool would oversubscribe the cores when called from it.
void keep_openblas_single_threaded() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

std::atomic<bool> exact_accumulation{false};

// C = A * B with fp64 sums in index order, in the axpy form (inner loop over contiguous columns) and blocks of 8 rows
// so each row of B is read once per block.
void gemm_tile_fp64(int64_t rows, int64_t cols, int64_t k, const float* a, int64_t lda, bool a_t, const float* b,
                    int64_t ldb, bool b_t, float* c, int64_t ldc) {
  constexpr int64_t kBlock = 8;
  std::vector<double> b_rows(k * cols), acc(kBlock * cols);
  for (int64_t x = 0; x < k; ++x)
    for (int64_t j = 0; j < cols; ++j) b_rows[x * cols + j] = b_t ? b[j * ldb + x] : b[x * ldb + j];
  for (int64_t i0 = 0; i0 < rows; i0 += kBlock) {
    const int64_t block = std::min(kBlock, rows - i0);
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int64_t x = 0; x < k; ++x) {
      const double* br = &b_rows[x * cols];
      for (int64_t i = 0; i < block; ++i) {
        const double ax = a_t ? a[x * lda + i0 + i] : a[(i0 + i) * lda + x];
        double* row = &acc[i * cols];
        for (int64_t j = 0; j < cols; ++j) row[j] += ax * br[j];
      }
    }
    for (int64_t i = 0; i < block; ++i)
      for (int64_t j = 0; j < cols; ++j) c[(i0 + i) * ldc + j] = float(acc[i * cols + j]);
  }
}

void gemm_tile(int64_t m0, int64_t m1, int64_t n0, int64_t n1, int64_t k, const MatrixRef& a, const MatrixRef& b,
               float* c, int64_t ldc) {
  const float* a_tile = a.transposed ? a.data + m0 : a.data + m0 * a.ld;
  const float* b_tile = b.transposed ? b.data + n0 * b.ld : b.data + n0;
  float* c_tile = c + m0 * ldc + n0;
  int64_t rows = m1 - m0, cols = n1 - n0;
  if (k == 0) {
    for (int64_t i = 0; i < rows; ++i) std::fill_n(c_tile + i * ldc, cols, 0.0f);
    return;
  }
  if (exact_accumulation.load(std::memory_order_relaxed))
    gemm_tile_fp64(rows, cols, k, a_tile, a.ld, a.transposed, b_tile, b.ld, b.transposed, c_tile, ldc);
  else
    cblas_sgemm(CblasRowMajor, a.transposed ? CblasTrans : CblasNoTrans, b.transposed ? CblasTrans : CblasNoTrans,
                int(rows), int(cols), int(k), 1.0f, a_tile, int(a.ld), b_tile, int(b.ld), 0.0f, c_tile, int(ldc));
  for (int64_t i = 0; i < rows; ++i) {
    float* row = c_tile + i * ldc;
    for (int64_t j = 0; j < cols; ++j) row[j] = round_bf16(row[j]);
  }
}

}  // namespace

void gemm_round_bf16(int64_t m, int64_t n, int64_t k, MatrixRef a, MatrixRef b, float* c, int64_t ldc, bool parallel) {
  if (m <= 0 || n <= 0) return;
  keep_openblas_single_threaded();
  if (!parallel) {
    gemm_tile(0, m, 0, n, k, a, b, c, ldc);
    return;
  }
  // Tiles large enough that sgemm's packing is amortised, numerous enough to balance over the threads.
  int64_t tile_m = std::min<int64_t>(m, 1024), tile_n = std::min<int64_t>(n, 1024);
  auto tiles = [&] { return ((m + tile_m - 1) / tile_m) * ((n + tile_n - 1) / tile_n); };
  while (tiles() < 4 * hardware_threads() && std::max(tile_m, tile_n) > 128) {
    if (tile_m >= tile_n)
      tile_m = (tile_m + 1) / 2;
    else
      tile_n = (tile_n + 1) / 2;
  }
  int64_t tiles_n = (n + tile_n - 1) / tile_n;
  parallel_for(tiles(), [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      int64_t m0 = (t / tiles_n) * tile_m, n0 = (t % tiles_n) * tile_n;
      gemm_tile(m0, std::min(m, m0 + tile_m), n0, std::min(n, n0 + tile_n), k, a, b, c, ldc);
    }
  });
}

void set_exact_accumulation_for_tests(bool on) { exact_accumulation = on; }

void widen_bf16(const void* src, float* dst, int64_t n) {
  const auto* s = static_cast<const uint16_t*>(src);
  parallel_for(
      n,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) dst[i] = bf16_to_float(s[i]);
      },
      1 << 16);
}

}  // namespace kindex::reference
