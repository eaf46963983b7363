// --gpus on a GPU machine: spread over every GPU, a bench gives the results of the plain bench in the same order,
// each run recorded with the environment of the GPU it ran on and labelled with that GPU's UUID and ordinal. On a
// machine with one GPU (the H200) this is `--gpus all` against the plain run. Skips without a GPU.
#include <gtest/gtest.h>

#include <map>

#include "runner/gpus.hpp"
#include "runner/runner.hpp"
#include "runner/session.hpp"
#include "runner/support.hpp"
#include "catalog/builtin.hpp"

namespace kindex::runner {
namespace {

TEST(SpreadDevice, AllGpusGiveThePlainRunsResultsEachWithItsGpu) {
  const int n = probe_gpu_count();  // in a child: this process must not initialise CUDA before the bench forks
  if (n == 0) GTEST_SKIP() << "no CUDA device";
  const catalog::Problem ps1 = catalog::builtin_problem("gqa_paged_decode_h32_kv4_d128_ps1");
  std::vector<WorkItem> items;
  for (size_t w = 0; w < 4; ++w) items.push_back({&ps1.definition, &ps1.workloads.at(w)});
  BenchOptions options = test::quick_options({"kindex", "gpu-reference"}, 5);
  const BenchReport plain = run_bench(items, options);

  options.gpus = gpu_ordinals("all", n);
  std::map<std::string, std::string> fed_uuid;  // run -> the UUID of the environment it was recorded with
  const BenchReport spread = run_bench(items, options, [&](const RunResult& r, const Environment& env) {
    fed_uuid[r.workload_uuid + " " + r.implementation] = env.gpu_uuid;
  });
  ASSERT_EQ(plain.results.size(), 8u);
  ASSERT_EQ(spread.results.size(), plain.results.size());
  ASSERT_EQ(spread.gpus.size(), size_t(std::min(n, 4)));
  for (size_t i = 0; i < plain.results.size(); ++i) {
    SCOPED_TRACE(i);
    const RunResult& a = plain.results[i];
    const RunResult& b = spread.results[i];
    EXPECT_EQ(a.status, RunStatus::passed) << a.message;
    EXPECT_EQ(test::run_content(b), test::run_content(a));
    EXPECT_EQ(a.labels.at("gpu_uuid"), plain.environment.gpu_uuid);
    // Work item i ran on GPU i mod n: its environment and its labels say so.
    const size_t k = (i / 2) % spread.gpus.size();
    EXPECT_EQ(b.labels.at("gpu_index"), std::to_string(options.gpus[k]));
    EXPECT_EQ(b.labels.at("gpu_uuid"), spread.gpus[k].gpu_uuid);
    EXPECT_EQ(fed_uuid.at(b.workload_uuid + " " + b.implementation), spread.gpus[k].gpu_uuid);
  }
  for (const auto& env : spread.gpus) {
    EXPECT_TRUE(env.has_gpu);
    EXPECT_EQ(env.gpu_uuid.rfind("GPU-", 0), 0u) << env.gpu_uuid;
    EXPECT_GT(env.sm_clock_max_mhz, 0);
  }
  if (n == 1) {
    EXPECT_EQ(spread.gpus[0].gpu_uuid, plain.environment.gpu_uuid);
  }
}

}  // namespace
}  // namespace kindex::runner
