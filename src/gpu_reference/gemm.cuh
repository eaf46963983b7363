#pragma once
// Row-major bf16 GEMM through cuBLASLt for the GPU reference: C[M,N] = op(A)[M,K] @ op(B)[K,N], fp32
// accumulation, bf16 result (one rounding, as torch.matmul on bf16 tensors). Dense storage: A is [M,K], or [K,M]
// when trans_a; B is [K,N], or [N,K] when trans_b; C is [M,N]. Optionally strided-batched.
// cuBLASLt is column-major, so it computes C^T = op(B)^T op(A)^T: a row-major matrix is its transpose in
// column-major order, which makes the operands swap places and keep their transpose flags.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace kindex::gpu_reference {

inline constexpr size_t kGemmWorkspaceBytes = size_t(32) << 20;

struct GemmError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

cublasLtHandle_t lt_handle();  // one per process, created on first use

class Gemm {
 public:
  Gemm(void* workspace, cudaStream_t stream) : workspace_(workspace), stream_(stream) {}
  void operator()(int64_t m, int64_t n, int64_t k, const void* a, bool trans_a, const void* b, bool trans_b, void* c,
                  int64_t batch = 1, int64_t stride_a = 0, int64_t stride_b = 0, int64_t stride_c = 0) const;

 private:
  void* workspace_;
  cudaStream_t stream_;
};

}  // namespace kindex::gpu_reference
