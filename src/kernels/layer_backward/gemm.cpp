// cuBLASLt plans for the row-major bf16 GEMMs of the layer backward. cuBLASLt is column-major, so the row-major
// product C = op(A) op(B) is issued as C^T = op(B)^T op(A)^T: the B buffer becomes cuBLASLt's first operand.
#include "kernels/layer_backward/gemm.hpp"

#include <cublasLt.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

namespace kindex::kernels::backward {
namespace {

using PlanKey = std::tuple<int, int64_t, int64_t, int64_t, bool, bool, int64_t, int64_t, int64_t, bool, size_t>;

struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t first = nullptr, second = nullptr, out = nullptr;
  std::vector<cublasLtMatmulAlgo_t> candidates;  // heuristic order
  cublasLtMatmulAlgo_t algo{};                   // the one used: candidates[0] until tuned
  bool tuned = false;
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
  // Split-K only with fp32 partials in the workspace: one rounding to bf16, no atomics, no bf16 partial sums.
  const uint32_t reduction = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &reduction,
                                       sizeof(reduction));
  cublasLtMatmulHeuristicResult_t results[kGemmCandidates] = {};
  int found = 0;
  st = cublasLtMatmulAlgoGetHeuristic(handle, plan->desc, plan->first, plan->second, plan->out, plan->out, pref,
                                      kGemmCandidates, results, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS) return message = status_text("cublasLtMatmulAlgoGetHeuristic", st), nullptr;
  for (int i = 0; i < found; ++i)
    if (results[i].state == CUBLAS_STATUS_SUCCESS) plan->candidates.push_back(results[i].algo);
  if (plan->candidates.empty()) return message = "cuBLASLt has no algorithm for this GEMM", nullptr;
  plan->algo = plan->candidates.front();
  plan->tuned = plan->candidates.size() == 1;
  return plan;
}

// The cached plan for `s` (built on first use). Call with the cache mutex held; plans are never erased, so the
// pointer stays valid.
Plan* find_plan(Cache& cc, const GemmShape& s, size_t workspace_bytes, std::string& message) {
  if (!cc.handle) {
    const cublasStatus_t st = cublasLtCreate(&cc.handle);
    if (st != CUBLAS_STATUS_SUCCESS) return message = status_text("cublasLtCreate", st), nullptr;
  }
  int device = 0;
  cudaGetDevice(&device);
  const PlanKey key{device, s.m, s.n, s.k, s.trans_a, s.trans_b, s.lda, s.ldb, s.ldc, s.accumulate, workspace_bytes};
  auto it = cc.plans.find(key);
  if (it == cc.plans.end()) {
    auto made = make_plan(cc.handle, s, workspace_bytes, message);
    if (!made) return nullptr;
    it = cc.plans.emplace(key, std::move(made)).first;
  }
  return it->second.get();
}

cublasStatus_t matmul(cublasLtHandle_t handle, const Plan& plan, const cublasLtMatmulAlgo_t& algo, const GemmShape& s,
                      const void* a, const void* b, void* c, void* workspace, size_t workspace_bytes,
                      cudaStream_t stream) {
  const float alpha = 1.f, beta = s.accumulate ? 1.f : 0.f;
  return cublasLtMatmul(handle, plan.desc, &alpha, b, plan.first, a, plan.second, &beta, c, plan.out, c, plan.out,
                        &algo, workspace, workspace_bytes, stream);
}

}  // namespace

bool gemm_bf16(const GemmShape& s, const void* a, const void* b, void* c, void* workspace, size_t workspace_bytes,
               cudaStream_t stream, std::string& message) {
  Cache& cc = cache();
  const Plan* plan = nullptr;
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulAlgo_t algo{};
  {
    std::lock_guard<std::mutex> lock(cc.mutex);
    plan = find_plan(cc, s, workspace_bytes, message);
    if (!plan) return false;
    handle = cc.handle;
    algo = plan->algo;  // copied under the lock: tune_gemms may replace it
  }
  const cublasStatus_t st = matmul(handle, *plan, algo, s, a, b, c, workspace, workspace_bytes, stream);
  if (st != CUBLAS_STATUS_SUCCESS) return message = status_text("cublasLtMatmul", st), false;
  return true;
}

bool tune_gemms(const GemmCall* calls, size_t count, cudaStream_t stream, std::string& message) {
  Cache& cc = cache();
  std::lock_guard<std::mutex> lock(cc.mutex);  // tuning is rare; holding the lock keeps it simple
  std::vector<std::pair<Plan*, const GemmCall*>> todo;
  for (size_t i = 0; i < count; ++i) {
    Plan* plan = find_plan(cc, calls[i].shape, kGemmWorkspaceBytes, message);
    if (!plan) return false;
    const bool queued = std::any_of(todo.begin(), todo.end(), [&](const auto& t) { return t.first == plan; });
    if (!plan->tuned && !queued) todo.emplace_back(plan, &calls[i]);
  }
  if (todo.empty()) return true;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaError_t e = cudaStreamIsCapturing(stream, &capture); e != cudaSuccess)
    return message = std::string("cudaStreamIsCapturing: ") + cudaGetErrorString(e), false;
  if (capture != cudaStreamCaptureStatusNone) return true;

  int device = 0, l2_bytes = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device);
  const size_t flush_bytes = size_t(std::max(l2_bytes, 1 << 20)) * 2;
  void* flush = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  auto cleanup = [&] {
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
    if (flush) cudaFree(flush);
  };
  cudaError_t e = cudaStreamSynchronize(stream);
  if (e == cudaSuccess) e = cudaMalloc(&flush, flush_bytes);
  if (e == cudaSuccess) e = cudaEventCreate(&start);
  if (e == cudaSuccess) e = cudaEventCreate(&stop);
  if (e != cudaSuccess) {
    cleanup();
    return message = std::string("tuning GEMMs: ") + cudaGetErrorString(e), false;
  }
  for (auto [plan, call] : todo) {
    float best_ms = 0.f;
    bool have_best = false;
    for (const cublasLtMatmulAlgo_t& algo : plan->candidates) {
      auto run = [&] {
        return matmul(cc.handle, *plan, algo, call->shape, call->a, call->b, call->c, call->workspace,
                      kGemmWorkspaceBytes, stream);
      };
      if (run() != CUBLAS_STATUS_SUCCESS) continue;  // a candidate cuBLASLt refuses at run time is skipped
      float ms[3] = {};
      bool ok = true;
      for (float& m : ms) {
        ok = cudaMemsetAsync(flush, 0, flush_bytes, stream) == cudaSuccess &&
             cudaEventRecord(start, stream) == cudaSuccess && run() == CUBLAS_STATUS_SUCCESS &&
             cudaEventRecord(stop, stream) == cudaSuccess && cudaEventSynchronize(stop) == cudaSuccess &&
             cudaEventElapsedTime(&m, start, stop) == cudaSuccess;
        if (!ok) break;
      }
      if (!ok) continue;
      std::sort(ms, ms + 3);
      // A later candidate must win by 2%: timing noise should not move us off the heuristic's order.
      if (!have_best || ms[1] < 0.98f * best_ms) {
        best_ms = ms[1];
        plan->algo = algo;
        have_best = true;
      }
    }
    plan->tuned = true;  // with no timed candidate, plan->algo stays the heuristic's first
  }
  // Clear any non-sticky error a refused candidate left, so the caller's launch check does not report it.
  e = cudaStreamSynchronize(stream);
  cudaGetLastError();
  cleanup();
  if (e != cudaSuccess) return message = std::string("tuning GEMMs: ") + cudaGetErrorString(e), false;
  return true;
}

}  // namespace kindex::kernels::backward
