#pragma once
// bf16 GEMMs through cuBLASLt in row-major terms: C[m, n] = op(A)[m, k] op(B)[k, n] (+ C when accumulate),
// bf16 in and out, fp32 accumulation, one rounding of each result to bf16 (torch.matmul's rounding point).
// A plan (descriptors + up to kGemmCandidates of cuBLASLt's heuristic algorithms) is built once per shape and
// cached. It runs the heuristic's first algorithm until tune_gemms has timed the candidates (the heuristic ranks by
// a model, not by this GPU's cold-L2 behaviour; v3 measured 3-6% less GEMM time on the <= 1024-token workloads).
// Split-K is allowed only with fp32 partials (no bf16 partial sums, no in-place atomics), so every candidate rounds
// once and is deterministic.
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

constexpr int kGemmCandidates = 16;

// Enqueues the GEMM on `stream`. Returns false with `message` set when cuBLASLt refuses or has no algorithm.
bool gemm_bf16(const GemmShape& shape, const void* a, const void* b, void* c, void* workspace, size_t workspace_bytes,
               cudaStream_t stream, std::string& message);

// One GEMM as it will be issued (pointers included): tune_gemms times it on these buffers.
struct GemmCall {
  GemmShape shape;
  const void* a;
  const void* b;
  void* c;  // overwritten while tuning (the caller's real output, about to be written anyway)
  void* workspace;
};

// For each call whose shape has not been tuned yet: synchronises `stream`, times every candidate algorithm (one
// warm-up, then the median of 3 runs, each after a 2 x L2 flush so the weights stream from HBM as in a cold call)
// and keeps the fastest for the shape. One-time cost per shape and process, a few ms. Skipped, leaving the
// heuristic's first choice, while `stream` is being captured into a CUDA graph (nothing can be timed or
// synchronised then); so capture a graph after one direct call for the same sizes to get the tuned algorithms.
// Returns false with `message` set on a CUDA or cuBLASLt error.
bool tune_gemms(const GemmCall* calls, size_t count, cudaStream_t stream, std::string& message);

}  // namespace kindex::kernels::backward
