#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "runner/record/sinks.hpp"
#include "catalog/builtin.hpp"

namespace kindex::runner {

namespace {

RunResult passed_result() {
  RunResult r;
  r.definition = "gqa_paged_decode_h32_kv4_d128_ps1";
  r.source = "flashinfer-bench";
  r.workload_uuid = "0c2489b2-f878-428b-b1bd-d0c6d4c39338";
  r.axes = {{"batch_size", 1}, {"len_indptr", 2}, {"num_kv_indices", 7}, {"num_pages", 8}};
  r.implementation = "kindex";
  r.reference_implementation = "gpu-reference";
  r.comparator = "flashinfer_bench_eval";
  r.rounds_requested = r.rounds_run = 3;
  r.max_abs_error = 0.0039;
  r.max_rel_error = 0.02;
  r.observed_at = "2026-12-02T10:00:00.000Z";
  r.timing.timer = "cupti_activity";
  r.timing.trials_ns = {{4000, 5000, 6000}, {5000}, {7000}};
  r.timing.summary = summarize_trials(r.timing.trials_ns);
  r.reference_timing.trials_ns = {{20000}};
  r.reference_timing.summary = summarize_trials(r.reference_timing.trials_ns);
  r.speedup = r.reference_timing.summary->latency / r.timing.summary->latency;
  return r;
}

Environment h200() {
  Environment e;
  e.has_gpu = true;
  e.gpu_name = "NVIDIA H200";
  e.kindex_version = "0.1.0+cuda";
  e.libraries = {{"cublaslt", "13.0.0"}};
  return e;
}

}  // namespace

TEST(Trace, PassedLineHasTheFlashInferBenchShape) {
  auto problem = catalog::builtin_problem("gqa_paged_decode_h32_kv4_d128_ps1");
  RunResult r = passed_result();
  nlohmann::json t = trace_line(r, problem.workloads.at(0), h200());
  EXPECT_EQ(t["definition"], "gqa_paged_decode_h32_kv4_d128_ps1");
  EXPECT_EQ(t["solution"], "kindex");
  EXPECT_EQ(t["workload"]["uuid"], r.workload_uuid);
  EXPECT_EQ(t["workload"]["axes"]["num_pages"], 8);
  EXPECT_EQ(t["workload"]["inputs"]["q"]["type"], "random");
  EXPECT_EQ(t["workload"]["inputs"]["sm_scale"]["type"], "scalar");
  const auto& e = t["evaluation"];
  EXPECT_EQ(e["status"], "PASSED");
  EXPECT_EQ(e["environment"]["hardware"], "NVIDIA_H200");
  EXPECT_EQ(e["environment"]["libs"]["kindex"], "0.1.0+cuda");
  EXPECT_EQ(e["timestamp"], r.observed_at);
  EXPECT_TRUE(e.contains("log"));
  EXPECT_DOUBLE_EQ(e["correctness"]["max_absolute_error"].get<double>(), 0.0039);
  EXPECT_DOUBLE_EQ(e["correctness"]["max_relative_error"].get<double>(), 0.02);
  // latency = mean of the trial medians (5000, 5000, 7000 ns) = 0.0056667 ms; speedup = 20000 / 5666.7
  EXPECT_NEAR(e["performance"]["latency_ms"].get<double>(), 17000.0 / 3 * 1e-6, 1e-12);
  EXPECT_NEAR(e["performance"]["reference_latency_ms"].get<double>(), 0.02, 1e-12);
  EXPECT_NEAR(e["performance"]["speedup_factor"].get<double>(), 20000.0 / (17000.0 / 3), 1e-9);
  for (const char* key : {"definition", "workload", "solution", "evaluation"}) EXPECT_TRUE(t.contains(key)) << key;
  EXPECT_EQ(t.size(), 4u);
}

TEST(Trace, StatusDecidesWhichSectionsAppear) {
  auto problem = catalog::builtin_problem("gqa_paged_decode_h32_kv4_d128_ps1");
  const auto& w = problem.workloads.at(0);
  RunResult wrong = passed_result();
  wrong.status = RunStatus::incorrect_numerical;
  wrong.max_abs_error = std::numeric_limits<double>::infinity();
  wrong.max_rel_error = std::numeric_limits<double>::quiet_NaN();
  auto t = trace_line(wrong, w, h200());
  EXPECT_EQ(t["evaluation"]["status"], "INCORRECT_NUMERICAL");
  EXPECT_EQ(t["evaluation"]["correctness"]["max_absolute_error"], "Infinity");
  EXPECT_EQ(t["evaluation"]["correctness"]["max_relative_error"], "NaN");
  EXPECT_FALSE(t["evaluation"].contains("performance"));

  for (auto [status, name] :
       {std::pair{RunStatus::runtime_error, "RUNTIME_ERROR"}, std::pair{RunStatus::resource_exceeded, "RUNTIME_ERROR"},
        std::pair{RunStatus::timeout, "TIMEOUT"}}) {
    RunResult r = passed_result();
    r.status = status;
    r.message = "the reason";
    auto line = trace_line(r, w, h200());
    EXPECT_EQ(line["evaluation"]["status"], name);
    EXPECT_EQ(line["evaluation"]["log"], "the reason");
    EXPECT_FALSE(line["evaluation"].contains("correctness"));
    EXPECT_FALSE(line["evaluation"].contains("performance"));
  }
}

TEST(Trace, RunResultRoundTripsThroughJson) {
  RunResult r = passed_result();
  r.status = RunStatus::incorrect_numerical;
  r.max_rel_error = std::numeric_limits<double>::infinity();
  r.work.referenced_bytes = 1234;
  r.work.flops = 99;
  r.phases = {0.5, 0.25, 1.5, 2.5, 0.125, 3, 4, 0.0625, "device"};
  RunResult back = RunResult::from_json(nlohmann::json::parse(r.to_json().dump()));
  EXPECT_EQ(back.status, RunStatus::incorrect_numerical);
  EXPECT_EQ(back.workload_uuid, r.workload_uuid);
  EXPECT_EQ(back.axes, r.axes);
  EXPECT_TRUE(std::isinf(back.max_rel_error));
  EXPECT_EQ(back.timing.trials_ns, r.timing.trials_ns);
  EXPECT_EQ(back.timing.timer, "cupti_activity");
  EXPECT_DOUBLE_EQ(back.work.referenced_bytes, 1234);
  EXPECT_DOUBLE_EQ(back.work.flops, 99);
  EXPECT_EQ(back.phases.setup, 0.5);
  EXPECT_EQ(back.phases.inputs, 0.25);
  EXPECT_EQ(back.phases.reference, 1.5);
  EXPECT_EQ(back.phases.implementation, 2.5);
  EXPECT_EQ(back.phases.compare, 0.125);
  EXPECT_EQ(back.phases.timing, 3);
  EXPECT_EQ(back.phases.reference_timing, 4);
  EXPECT_EQ(back.phases.record, 0.0625);
  EXPECT_EQ(back.phases.compared_on, "device");
}

}  // namespace kindex::runner
