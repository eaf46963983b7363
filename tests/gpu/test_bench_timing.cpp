// The runner on a real GPU: its timing protocol against a kernel of known duration, and the GPU reference
// against the CPU reference. Skips without a device.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstdlib>
#include <fstream>

#include <nlohmann/json.hpp>

#include "runner/measurement.hpp"
#include "runner/runner.hpp"
#include "catalog/builtin.hpp"
#include "gpu_reference/gpu_reference.hpp"

namespace kindex::runner {

namespace {

bool have_gpu() { return device::available(); }

}  // namespace

// A kernel that spins for N ns of %globaltimer, timed three ways: the runner's CUPTI span, CUDA events, and the
// kernel's own reading of %globaltimer. Writes the comparison to $KINDEX_TIMING_JSON when set.
TEST(BenchTiming, CuptiSpanAgreesWithAKernelOfKnownDuration) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  std::string why;
  EXPECT_TRUE(cupti_available(&why)) << why;
  void* stream = device::create_stream();
  device::Buffer observed(2 * sizeof(unsigned long long));
  nlohmann::json rows = nlohmann::json::array();
  for (uint64_t target_ns : {2000ull, 10000ull, 50000ull, 200000ull, 1000000ull}) {
    auto call = [&] {
      ASSERT_EQ(gpu_reference::spin(target_ns, static_cast<unsigned long long*>(observed.get()), stream),
                KINDEX_STATUS_OK);
    };
    TimingProtocol protocol{1, 3, 30, true};
    TimingSamples cupti = time_device(
        protocol, [] {}, call, stream, true);
    TimingSamples events = time_device(
        protocol, [] {}, call, stream, false);
    unsigned long long self[2] = {0, 0};
    ASSERT_EQ(cudaMemcpy(self, observed.get(), sizeof self, cudaMemcpyDeviceToHost), cudaSuccess);
    Summary c = summarize(cupti.ns), e = summarize(events.ns);
    rows.push_back({{"target_ns", target_ns},
                    {"cupti_timer", cupti.timer},
                    {"cupti_median_ns", c.median},
                    {"cupti_min_ns", c.minimum},
                    {"cupti_p95_ns", c.p95},
                    {"events_median_ns", e.median},
                    {"events_min_ns", e.minimum},
                    {"kernel_globaltimer_ns", self[0]},
                    {"kernel_clock_cycles", self[1]}});
    EXPECT_EQ(cupti.timer, "cupti_activity") << cupti.note;
    // The kernel cannot end before its target; the span adds only launch-to-first-instruction and exit.
    EXPECT_GE(c.median, double(target_ns) * 0.999) << target_ns;
    EXPECT_LE(c.median, double(target_ns) * 1.02 + 4000) << target_ns;
    EXPECT_GE(double(self[0]), double(target_ns));
    // Events include launch overhead: never shorter than the kernel, a few microseconds longer at most.
    EXPECT_GE(e.median, double(target_ns) * 0.999) << target_ns;
    EXPECT_LE(e.median, double(target_ns) * 1.05 + 20000) << target_ns;
  }
  device::destroy_stream(stream);
  if (const char* path = std::getenv("KINDEX_TIMING_JSON")) {
    std::ofstream(path) << nlohmann::json{{"test", "BenchTiming.CuptiSpanAgreesWithAKernelOfKnownDuration"},
                                          {"protocol", "cold L2, 1 untimed + 3 warm-up, 30 timed, medians"},
                                          {"rows", rows}}
                               .dump(2)
                        << "\n";
  }
}

// The GPU reference against the CPU reference on small workloads of the three seed problems (in this process:
// CUDA is already initialised here, so no worker processes).
TEST(BenchTiming, GpuReferenceMatchesCpuReference) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  std::vector<catalog::Problem> problems;
  for (const char* name : {"gqa_paged_decode_h32_kv4_d128_ps1", "gqa_paged_decode_h24_kv4_d128_ps64",
                           "gqa_paged_decode_h6_kv1_d128_ps64", "003_grouped_query_attention_with_rope_backward"})
    problems.push_back(catalog::builtin_problem(name));
  // Under compute-sanitizer (KINDEX_NO_CUPTI=1) one workload per problem and one call suffice.
  const bool sanitizer = std::getenv("KINDEX_NO_CUPTI") != nullptr;
  std::vector<WorkItem> items;
  for (const auto& p : problems) {
    auto small = select_workloads(p, "small");
    for (size_t i = 0; i < small.size() && i < (sanitizer ? 1u : 3u); ++i) items.push_back({&p.definition, small[i]});
  }
  ASSERT_FALSE(items.empty());
  BenchOptions o;
  o.implementations = {"gpu-reference"};
  o.reference = "cpu-reference";
  o.trials = sanitizer ? 1 : 2;
  o.timing_trials = 1;
  o.iterations = sanitizer ? 1 : 5;
  o.warmup = sanitizer ? 0 : 1;
  o.isolate = false;
  o.prefer_cupti = !sanitizer;  // CUPTI and compute-sanitizer do not attach together
  BenchReport report = run_bench(items, o);
  for (const auto& r : report.results) {
    EXPECT_EQ(r.status, RunStatus::passed) << r.definition << " " << r.workload_uuid << ": " << r.message;
    EXPECT_TRUE(r.timed_on_device);
    EXPECT_GT(r.latency_ns(), 0);
  }
}

}  // namespace kindex::runner
