// cuBLASLt plans for the row-major bf16 GEMMs of the layer backward. cuBLASLt is column-major, so the row-major
// product C = op(A) op(B) is issued as C^T = op(B)^T op(A)^T: the B buffer becomes cuBLASLt's first operand.
#include "kernels/layer_backward/gemm.hpp"

#include <cublasLt.h>

#include <map>
#include <memory>
#include <mutex>
#include <tuple>

namespace kindex::kernels::backward {
namespace {

using PlanKey = std::tuple<int, int64_t, int64_t, int64_t, bool, bool, int64_t, int64_t, int64_t, bool, size_t>;

struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t first = nullptr, second = nullptr, out = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~Plan() {
    if (out) cublasLtMatrixLayoutDestroy(out);
    if (second) cublasLtMatrixLayoutDestroy(second);
    if (first) cublasLtMatrixLayoutDestroy(first);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

struct Cache {
  std::mutex mutex;
  cublasLtHandle_t handle = nullptr;
  std::map<PlanKey, std::unique_ptr<Plan>> plans;
};

Cache& cache() {
  static Cache c;  // handles and plans live for the process (cuBLASLt handles are cheap and reusable)
  return c;
}

std::string status_text(const char* what, cublasStatus_t s) {
  return std::string(what) + " failed: " + cublasLtGetStatusName(s) + " (" + cublasLtGetStatusString(s) + ")";
}

// Builds the plan; returns nullptr with `message` set on failure.
std::unique_ptr<Plan> make_plan(cublasLtHandle_t handle, const GemmShape& s, size_t workspace_bytes,
                                std::string& message) {
  auto plan = std::make_unique<Plan>();
  cublasStatus_t st = cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  if (st != CUBLAS_STATUS_SUCCESS) return message = status_text("cublasLtMatmulDescCreate", st), nullptr;
  const cublasOperation_t op_first = s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof(op_first));
  cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof(op_second));
  // Column-major views: B buffer as [n, k] (or [k, n] transposed), A buffer as [k, m] (or [m, k]), C as [n, m].
  st = s.trans_b ? cublasLtMatrixLayoutCreate(&plan->first, CUDA_R_16BF, s.k, s.n, s.ldb)
                 : cublasLtMatrixLayoutCreate(&plan->first, CUDA_R_16BF, s.n, s.k, s.ldb);
  if (st != CUBLAS_STATUS_SUCCESS) return message = status_text("cublasLtMatrixLayoutCreate", st), nullptr;
  st = s.trans_a ? cublasLtMatrixLayoutCreate(&plan->second, CUDA_R_16BF, s.m, s.k, s.lda)
                 : cublasLtMatrixLayoutCreate(&plan->second, CUDA_R_16BF, s.k, s.m, s.lda);
  if (st != CUBLAS_STATUS_SUCCESS) return message = status_text("cublasLtMatrixLayoutCreate", st), nullptr;
  st = cublasLtMatrixLayoutCreate(&plan->out, CUDA_R_16BF, s.n, s.m, s.ldc);
  if (st != CUBLAS_STATUS_SUCCESS) return message = status_text("cublasLtMatrixLayoutCreate", st), nullptr;

  cublasLtMatmulPreference_t pref = nullptr;
  st = cublasLtMatmulPreferenceCreate(&pref);
  if (st != CUBLAS_STATUS_SUCCESS) return message = status_text("cublasLtMatmulPreferenceCreate", st), nullptr;
  uint64_t ws = workspace_bytes;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  // The entry point checks 16-byte alignment of every tensor; promise no more than that.
  const uint32_t align = 16;
  for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    cublasLtMatmulPreferenceSetAttribute(pref, attr, &align, sizeof(align));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  st = cublasLtMatmulAlgoGetHeuristic(handle, plan->desc, plan->first, plan->second, plan->out, plan->out, pref, 1,
                                      &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS) return message = status_text("cublasLtMatmulAlgoGetHeuristic", st), nullptr;
  if (found == 0) return message = "cuBLASLt has no algorithm for this GEMM", nullptr;
  plan->algo = result.algo;
  return plan;
}

}  // namespace

bool gemm_bf16(const GemmShape& s, const void* a, const void* b, void* c, void* workspace, size_t workspace_bytes,
               cudaStream_t stream, std::string& message) {
  Cache& cc = cache();
  const Plan* plan = nullptr;
  cublasLtHandle_t handle = nullptr;
  {
    std::lock_guard<std::mutex> lock(cc.mutex);
    if (!cc.handle) {
      const cublasStatus_t st = cublasLtCreate(&cc.handle);
      if (st != CUBLAS_STATUS_SUCCESS) return message = status_text("cublasLtCreate", st), false;
    }
    handle = cc.handle;
    int device = 0;
    cudaGetDevice(&device);
    const PlanKey key{device, s.m, s.n, s.k, s.trans_a, s.trans_b, s.lda, s.ldb, s.ldc, s.accumulate, workspace_bytes};
    auto it = cc.plans.find(key);
    if (it == cc.plans.end()) {
      auto made = make_plan(handle, s, workspace_bytes, message);
      if (!made) return false;
      it = cc.plans.emplace(key, std::move(made)).first;
    }
    plan = it->second.get();  // plans are never erased, so the pointer outlives the lock
  }
  const float alpha = 1.f, beta = s.accumulate ? 1.f : 0.f;
  const cublasStatus_t st = cublasLtMatmul(handle, plan->desc, &alpha, b, plan->first, a, plan->second, &beta, c,
                                           plan->out, c, plan->out, &plan->algo, workspace, workspace_bytes, stream);
  if (st != CUBLAS_STATUS_SUCCESS) return message = status_text("cublasLtMatmul", st), false;
  return true;
}

}  // namespace kindex::kernels::backward
