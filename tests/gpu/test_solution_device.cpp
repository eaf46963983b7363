// A Python solution on the device: its outputs reach the runner's device comparator through CUDA IPC (the worker
// copies them into the runner's buffers), so what is compared is what the solution wrote, byte for byte, and an
// output it never wrote fails. Torch decode solutions of gqa_paged_decode_h32_kv4_d128_ps1's small workloads against
// the GPU reference: right (destination-passing and value-returning), wrong by 0.5, an output left unwritten, an
// output of the wrong dtype. Skips without a device or without torch with CUDA in python3 (KINDEX_PYTHON).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include <nlohmann/json.hpp>

#include "runner/measurement.hpp"
#include "runner/runner.hpp"
#include "runner/support.hpp"
#include "catalog/builtin.hpp"

namespace kindex::runner {

namespace {

using nlohmann::json;

bool python_has_cuda_torch() {
  const char* python = std::getenv("KINDEX_PYTHON");
  const std::string cmd = std::string(python ? python : "python3") +
                          " -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

// Paged decode in torch on the device, fp32 math: attend(...) -> (output bf16 [B, H, D], lse fp32 [B, H], base 2).
const char* kTorchDecode = R"py(import math
import torch


def attend(q, k_cache, v_cache, kv_indptr, kv_indices, sm_scale):
    batch, heads, dim = q.shape
    kv_heads = k_cache.shape[2]
    k = k_cache.reshape(-1, kv_heads, dim).float()  # page size 1: one token a page
    v = v_cache.reshape(-1, kv_heads, dim).float()
    out = torch.zeros(batch, heads, dim, dtype=torch.float32, device=q.device)
    lse = torch.full((batch, heads), float("-inf"), dtype=torch.float32, device=q.device)
    for b in range(batch):
        ids = kv_indices[int(kv_indptr[b]):int(kv_indptr[b + 1])].long()
        if ids.numel() == 0:
            continue
        qb = q[b].float().view(kv_heads, heads // kv_heads, dim)
        s = torch.einsum("hgd,lhd->hgl", qb, k[ids]) * sm_scale
        lse[b] = (torch.logsumexp(s, -1) / math.log(2.0)).reshape(heads)
        out[b] = torch.einsum("hgl,lhd->hgd", torch.softmax(s, -1), v[ids]).reshape(heads, dim)
    return out.to(torch.bfloat16), lse
)py";

std::string solution(const std::string& name, const std::string& body, bool dps = true) {
  const json doc = test::python_solution(name, "gqa_paged_decode_h32_kv4_d128_ps1", "NVIDIA_H200",
                                         std::string(kTorchDecode) + body, dps);
  return "solution:" + test::write_solution(doc, "device-solution-" + name);
}

}  // namespace

TEST(SolutionOnDevice, OutputsReachTheDeviceComparatorThroughCudaIpc) {
  if (!device::available()) GTEST_SKIP() << "no CUDA device";
  if (!python_has_cuda_torch()) GTEST_SKIP() << "python3 has no torch with CUDA";
  const catalog::Problem problem = catalog::builtin_problem("gqa_paged_decode_h32_kv4_d128_ps1");
  const auto small = select_workloads(problem, "small");
  ASSERT_GE(small.size(), 2u);
  const std::vector<WorkItem> items = {{&problem.definition, small[0]}, {&problem.definition, small[1]}};

  const std::string dps_body =
      "\ndef run(q, k, v, indptr, indices, scale, output, lse):\n"
      "    o, l = attend(q, k, v, indptr, indices, scale)\n"
      "    output.copy_(o)\n    lse.copy_(l)\n";
  const std::vector<std::string> impls = {
      solution("right", dps_body),
      solution("returns", "\ndef run(q, k, v, indptr, indices, scale):\n"
                          "    return attend(q, k, v, indptr, indices, scale)\n",
               false),
      solution("wrong", "\ndef run(q, k, v, indptr, indices, scale, output, lse):\n"
                        "    o, l = attend(q, k, v, indptr, indices, scale)\n"
                        "    output.copy_(o.float() + 0.5)\n    lse.copy_(l)\n"),
      solution("unwritten", "\ndef run(q, k, v, indptr, indices, scale, output, lse):\n"
                            "    o, l = attend(q, k, v, indptr, indices, scale)\n    output.copy_(o)\n"),
      solution("dtype", "\ndef run(q, k, v, indptr, indices, scale):\n"
                        "    o, l = attend(q, k, v, indptr, indices, scale)\n    return o.float(), l\n",
               false),
  };
  BenchOptions o;
  o.implementations = impls;
  o.reference = "gpu-reference";
  o.trials = 2;  // a second round into the same (mapped again) buffers
  o.timing_trials = 1;
  o.iterations = 3;
  o.warmup = 1;
  o.timeout_s = 120;
  o.isolate = false;  // CUDA is initialised in this process already: no forked workers
  const BenchReport report = run_bench(items, o);
  ASSERT_EQ(report.results.size(), 2 * impls.size());
  for (const RunResult& r : report.results) {
    const std::string what = r.implementation + " on " + r.workload_uuid + ": " + r.message;
    const std::string name = r.implementation_info.version;
    if (name == "right" || name == "returns") {
      EXPECT_EQ(r.status, RunStatus::passed) << what;
      EXPECT_EQ(r.phases.compared_on, "device") << what;
      EXPECT_EQ(r.rounds_run, 2) << what;
      EXPECT_TRUE(r.timed_on_device) << what;
      EXPECT_GT(r.latency_ns(), 0) << what;
    } else if (name == "wrong") {
      EXPECT_EQ(r.status, RunStatus::incorrect_numerical) << what;
      EXPECT_GE(r.max_abs_error, 0.4) << what;
    } else if (name == "unwritten") {
      // lse was never written: the worker's poisoned tensor (NaN) is what reaches the comparator.
      EXPECT_EQ(r.status, RunStatus::incorrect_numerical) << what;
    } else if (name == "dtype") {
      EXPECT_EQ(r.status, RunStatus::runtime_error) << what;
      EXPECT_NE(r.message.find("output output is float32 [" + std::to_string(r.axes.at("batch_size"))),
                std::string::npos)
          << what;
    } else {
      ADD_FAILURE() << "unexpected run " << what;
    }
  }
}

}  // namespace kindex::runner
