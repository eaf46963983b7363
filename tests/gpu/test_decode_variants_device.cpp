// kindex's kernel on the decode-variant dataset (definitions/decode_variants) through the runner, as `kindex bench`
// runs it: the C ABI with the variant fields the definition's inputs give, judged by the CPU reference (the GPU
// reference computes the plain decode only), with no timing reference. Skips without a device.
#include <gtest/gtest.h>

#include <filesystem>

#include "runner/execute/pipeline.hpp"
#include "runner/measurement.hpp"
#include "runner/runner.hpp"
#include "catalog/builtin.hpp"
#include "catalog/loader.hpp"
#include "support/paths.hpp"

namespace kindex::runner {

TEST(DecodeVariantsDevice, KindexPassesEverySmallWorkloadAgainstTheCpuReference) {
  if (!device::available()) GTEST_SKIP() << "no CUDA device";
  const auto problems =
      catalog::load_dataset(std::filesystem::path(test::source_dir()) / "definitions" / "decode_variants");
  ASSERT_EQ(problems.size(), 7u);
  BenchOptions o;
  o.trials = 2;
  o.iterations = 3;
  o.warmup = 1;
  for (const catalog::Problem& p : problems) {
    for (const catalog::Workload& w : p.workloads) {
      if (!catalog::is_small(p.definition, w)) continue;
      SCOPED_TRACE(p.definition.name + " " + w.uuid);
      bool sticky = false;
      const RunResult r = execute_run(WorkItem{&p.definition, &w}, "kindex", o, /*gpu=*/true, &sticky);
      EXPECT_EQ(r.status, RunStatus::passed) << r.message;
      EXPECT_EQ(r.reference_implementation, "cpu-reference");
      EXPECT_EQ(r.check, "reference");
      EXPECT_EQ(r.timing_reference, "");
      EXPECT_TRUE(r.reference_timing.trials_ns.empty());
      EXPECT_EQ(r.timing.trials_ns.size(), 2u);
      ASSERT_FALSE(sticky);
    }
  }
}

}  // namespace kindex::runner
