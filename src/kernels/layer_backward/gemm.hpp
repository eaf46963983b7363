#pragma once
// bf16 GEMMs through cuBLASLt in row-major terms: C[m, n] = op(A)[m, k] op(B)[k, n] (+ C when accumulate),
// bf16 in and out, fp32 accumulation, one rounding of each result to bf16 (torch.matmul's rounding point).
// A plan (descriptors + the heuristic's first algorithm) is built once per shape and cached.
#include <cstddef>
#include <cstdint>
#include <string>

#include <cuda_runtime.h>

namespace kindex::kernels::backward {

struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false;  // A is stored [k, m] (op(A) = A^T) instead of [m, k]
  bool trans_b = false;  // B is stored [n, k] instead of [k, n]
  int64_t lda = 0, ldb = 0, ldc = 0;  // row strides in elements
  bool accumulate = false;            // beta = 1: C += op(A) op(B), C read as bf16
};

// cuBLASLt workspace each concurrently running GEMM gets.
constexpr size_t kGemmWorkspaceBytes = size_t(32) << 20;

// Enqueues the GEMM on `stream`. Returns false with `message` set when cuBLASLt refuses or has no algorithm.
bool gemm_bf16(const GemmShape& shape, const void* a, const void* b, void* c, void* workspace, size_t workspace_bytes,
               cudaStream_t stream, std::string& message);

}  // namespace kindex::kernels::backward
