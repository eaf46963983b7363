// --gpus (BenchOptions::gpus): the runs dealt among several runner processes give the results of one runner, in
// the same order, each fed to the sinks once. Without a GPU the runners are logical workers on the CPU, which is
// what this test checks; the pinning itself (CUDA_VISIBLE_DEVICES) and the per-GPU environments need GPUs.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "runner/runner.hpp"
#include "runner/gpus.hpp"
#include "runner/support.hpp"
#include "catalog/builtin.hpp"
#include "core/error.hpp"

namespace kindex::runner {
namespace {

TEST(Spread, ThreeWorkersGiveTheResultsOfOneInTheSameOrder) {
  const catalog::Problem ps1 = catalog::builtin_problem("gqa_paged_decode_h32_kv4_d128_ps1");
  const catalog::Problem h16 = catalog::builtin_problem("gqa_paged_decode_h16_kv2_d128_ps1");
  std::vector<WorkItem> items;
  for (size_t w = 0; w < 3; ++w) items.push_back({&ps1.definition, &ps1.workloads.at(w)});
  items.push_back({&h16.definition, &h16.workloads.at(0)});
  ASSERT_EQ(items.size(), 4u);
  // Two implementations per workload (so a workload's runs share a runner), one of them wrong: passed and
  // incorrect_numerical results both come back through the runners unchanged.
  const std::string wrong = "external:" + test::fake_decode_library(3);
  BenchOptions options = test::quick_options({"cpu-reference", wrong});
  const BenchReport one = run_bench(items, options);

  options.gpus = {0, 1, 2};
  std::vector<std::string> fed;  // the sinks' order: as runs end
  const BenchReport three = run_bench(items, options, [&](const RunResult& r, const Environment&) {
    fed.push_back(r.workload_uuid + " " + r.implementation);
  });
  ASSERT_EQ(one.results.size(), 8u);
  ASSERT_EQ(three.results.size(), one.results.size());
  for (size_t i = 0; i < one.results.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(test::run_content(three.results[i]), test::run_content(one.results[i]));
    EXPECT_EQ(three.results[i].implementation_info.name, one.results[i].implementation_info.name);
  }
  EXPECT_EQ(one.results[0].status, RunStatus::passed);
  EXPECT_EQ(one.results[1].status, RunStatus::incorrect_numerical);
  // Every run fed once.
  EXPECT_EQ(fed.size(), 8u);
  EXPECT_EQ(std::set<std::string>(fed.begin(), fed.end()).size(), 8u);
  // One environment per runner (logical here: no GPU, so no GPU labels).
  EXPECT_EQ(three.gpus.size(), 3u);
  EXPECT_TRUE(three.results[0].labels.empty());
  EXPECT_EQ(three.environment.cpu_threads, one.environment.cpu_threads);
}

TEST(Spread, MoreWorkersThanWorkloadsAndOneWorkerAreFine) {
  const catalog::Problem ps1 = catalog::builtin_problem("gqa_paged_decode_h32_kv4_d128_ps1");
  const std::vector<WorkItem> items = {{&ps1.definition, &ps1.workloads.at(0)}};
  BenchOptions options = test::quick_options({"cpu-reference"});
  options.gpus = {0, 1, 2, 3};
  BenchReport report = run_bench(items, options);
  ASSERT_EQ(report.results.size(), 1u);
  EXPECT_EQ(report.results[0].status, RunStatus::passed) << report.results[0].message;
  EXPECT_EQ(report.gpus.size(), 1u) << "only runners with work are started";
  options.gpus = {5};
  report = run_bench(items, options);
  ASSERT_EQ(report.results.size(), 1u);
  EXPECT_EQ(report.results[0].status, RunStatus::passed) << report.results[0].message;
}

TEST(Spread, ABadImplementationIsStillABadArgument) {
  const catalog::Problem ps1 = catalog::builtin_problem("gqa_paged_decode_h32_kv4_d128_ps1");
  const std::vector<WorkItem> items = {{&ps1.definition, &ps1.workloads.at(0)}, {&ps1.definition, &ps1.workloads.at(1)}};
  BenchOptions options = test::quick_options({"external:/no/such/library.so"});
  options.gpus = {0, 1};
  try {
    run_bench(items, options);
    FAIL() << "a library that cannot be loaded was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.field(), "--impl");
  }
}

TEST(Spread, GpuOrdinalsAreCheckedAgainstTheMachine) {
  EXPECT_EQ(gpu_ordinals("all", 2), (std::vector<int>{0, 1}));
  EXPECT_EQ(gpu_ordinals("2,0", 4), (std::vector<int>{2, 0}));
  const std::map<std::pair<std::string, int>, std::string> refused = {
      {{"all", 0}, "--gpus = all: this machine has no GPU"},
      {{"0", 0}, "--gpus = 0: no such GPU: this machine has no GPU"},
      {{"0,2", 2}, "--gpus = 2: no such GPU: this machine has 2 (0-1)"},
      {{"1,1", 2}, "--gpus = 1: named twice"},
      {{"x", 2}, "--gpus = x: not a GPU ordinal"},
      {{"-1", 2}, "--gpus = -1: not a GPU ordinal"},
      {{"0,", 2}, "not a GPU ordinal"},
      {{"", 2}, "not a GPU ordinal"},
  };
  for (const auto& [args, message] : refused) {
    try {
      gpu_ordinals(args.first, args.second);
      ADD_FAILURE() << args.first << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace kindex::runner
