#pragma once
// The matmul of the bf16 references: fp32 operands holding bf16 values, fp32 accumulation (OpenBLAS sgemm), and
// one rounding of each result element to bf16, which is what torch.matmul does on bf16 tensors.
#include <cstdint>

namespace kindex::reference {

// A row-major matrix operand: element (i, j) is data[i * ld + j], or data[j * ld + i] when transposed.
struct MatrixRef {
  const float* data;
  int64_t ld;
  bool transposed = false;
};

// C[M, N] = round_bf16(op(A)[M, K] * op(B)[K, N]), C row-major with leading dimension ldc (values stay in fp32
// storage, already rounded). `parallel`: split C into tiles over kindex::parallel_for; pass false when the caller
// already runs inside parallel_for. OpenBLAS itself is kept single-threaded, so there is one thread pool.
void gemm_round_bf16(int64_t m, int64_t n, int64_t k, MatrixRef a, MatrixRef b, float* c, int64_t ldc, bool parallel);

// Test hook, process-wide: accumulate in fp64 in index order (k = 0, 1, ...) instead of OpenBLAS's fp32, and
// round that to bf16. A naive fp64 implementation with the same rounding points then agrees bit for bit, which
// pins the rounding points down independently of OpenBLAS's summation order. Much slower; never on in the product.
void set_exact_accumulation_for_tests(bool on);

// Widens n bf16 values to fp32 (exact), in parallel.
void widen_bf16(const void* src, float* dst, int64_t n);

}  // namespace kindex::reference
