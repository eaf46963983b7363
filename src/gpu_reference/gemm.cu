#include "gpu_reference/gemm.cuh"

#include <mutex>

namespace kindex::gpu_reference {
namespace {

void check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw GemmError(std::string(what) + ": cuBLASLt status " + std::to_string(int(status)));
}

// RAII for the descriptors of one call.
struct Layout {
  cublasLtMatrixLayout_t desc = nullptr;
  Layout(uint64_t rows, uint64_t cols, int64_t ld, int64_t batch, int64_t stride) {
    check(cublasLtMatrixLayoutCreate(&desc, CUDA_R_16BF, rows, cols, ld), "cublasLtMatrixLayoutCreate");
    if (batch > 1) {
      int32_t count = int32_t(batch);
      check(cublasLtMatrixLayoutSetAttribute(desc, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)),
            "CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT");
      check(
          cublasLtMatrixLayoutSetAttribute(desc, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)),
          "CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET");
    }
  }
  Layout(const Layout&) = delete;
  Layout& operator=(const Layout&) = delete;
  ~Layout() { cublasLtMatrixLayoutDestroy(desc); }
};

}  // namespace

cublasLtHandle_t lt_handle() {
  static cublasLtHandle_t handle = nullptr;
  static std::once_flag once;
  static cublasStatus_t created = CUBLAS_STATUS_SUCCESS;
  std::call_once(once, [] { created = cublasLtCreate(&handle); });
  check(created, "cublasLtCreate");
  return handle;
}

void Gemm::operator()(int64_t m, int64_t n, int64_t k, const void* a, bool trans_a, const void* b, bool trans_b,
                      void* c, int64_t batch, int64_t stride_a, int64_t stride_b, int64_t stride_c) const {
  // Column-major view: D[n, m] = X[n, k] * Y[k, m] with X = op(B)^T (from B's memory), Y = op(A)^T (from A's).
  cublasOperation_t op_x = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t op_y = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  Layout x = trans_b ? Layout(k, n, k, batch, stride_b) : Layout(n, k, n, batch, stride_b);
  Layout y = trans_a ? Layout(m, k, m, batch, stride_a) : Layout(k, m, k, batch, stride_a);
  Layout d(n, m, n, batch, stride_c);

  cublasLtMatmulDesc_t op = nullptr;
  check(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  struct OpGuard {
    cublasLtMatmulDesc_t d;
    ~OpGuard() { cublasLtMatmulDescDestroy(d); }
  } op_guard{op};
  check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &op_x, sizeof(op_x)), "TRANSA");
  check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &op_y, sizeof(op_y)), "TRANSB");

  cublasLtMatmulPreference_t pref = nullptr;
  check(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  struct PrefGuard {
    cublasLtMatmulPreference_t p;
    ~PrefGuard() { cublasLtMatmulPreferenceDestroy(p); }
  } pref_guard{pref};
  size_t ws = kGemmWorkspaceBytes;
  check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)),
        "CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES");
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  check(cublasLtMatmulAlgoGetHeuristic(lt_handle(), op, x.desc, y.desc, d.desc, d.desc, pref, 1, &heuristic, &found),
        "cublasLtMatmulAlgoGetHeuristic");
  if (found == 0)
    throw GemmError("no cuBLASLt algorithm for GEMM m=" + std::to_string(m) + " n=" + std::to_string(n) +
                    " k=" + std::to_string(k));
  const float alpha = 1.f, beta = 0.f;
  check(cublasLtMatmul(lt_handle(), op, &alpha, b, x.desc, a, y.desc, &beta, c, d.desc, c, d.desc, &heuristic.algo,
                       workspace_, ws, stream_),
        "cublasLtMatmul");
}

}  // namespace kindex::gpu_reference
