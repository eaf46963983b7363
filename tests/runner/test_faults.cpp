// Fault classification: an external implementation that crashes, fails, is wrong or hangs ends its run with
// runtime_error / incorrect_numerical / timeout, and the bench goes on with the next one.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "runner/execute/implementation.hpp"
#include "runner/runner.hpp"
#include "runner/record/sinks.hpp"
#include "runner/support.hpp"
#include "catalog/builtin.hpp"
#include "core/error.hpp"

namespace kindex::runner {

namespace {

struct Fixture {
  catalog::Problem problem = catalog::builtin_problem("gqa_paged_decode_h32_kv4_d128_ps1");
  std::vector<WorkItem> items() const { return {{&problem.definition, &problem.workloads.at(0)}}; }
};

BenchOptions options(std::vector<std::string> impls, double timeout_s = 60) {
  BenchOptions o = test::quick_options(std::move(impls));
  o.timeout_s = timeout_s;
  return o;
}

}  // namespace

TEST(Faults, EachFailureGetsItsStatusAndTheBenchGoesOn) {
  Fixture f;
  const std::string correct = "external:" + test::fake_decode_library(0);
  const std::string crash = "external:" + test::fake_decode_library(1);
  const std::string error = "external:" + test::fake_decode_library(2);
  const std::string wrong = "external:" + test::fake_decode_library(3);
  // The crashing library first: its worker dies, a fresh one runs the rest.
  BenchReport report = run_bench(f.items(), options({crash, error, wrong, correct}));
  ASSERT_EQ(report.results.size(), 4u);
  const RunResult& crashed = report.results[0];
  EXPECT_EQ(crashed.status, RunStatus::runtime_error);
  EXPECT_NE(crashed.message.find("crashed"), std::string::npos) << crashed.message;
  EXPECT_NE(crashed.message.find("signal 11"), std::string::npos) << crashed.message;

  const RunResult& failed = report.results[1];
  EXPECT_EQ(failed.status, RunStatus::runtime_error);
  EXPECT_NE(failed.message.find("invalid_argument"), std::string::npos) << failed.message;
  EXPECT_NE(failed.message.find("synthetic failure"), std::string::npos) << failed.message;

  const RunResult& incorrect = report.results[2];
  EXPECT_EQ(incorrect.status, RunStatus::incorrect_numerical);
  EXPECT_GE(incorrect.max_abs_error, 0.4);
  EXPECT_LT(incorrect.matched_ratio, 1.0);
  EXPECT_TRUE(incorrect.timing.trials_ns.empty());

  const RunResult& ok = report.results[3];
  EXPECT_EQ(ok.status, RunStatus::passed) << ok.message;
  EXPECT_EQ(ok.check, "reference");
  EXPECT_EQ(ok.timing.timer, "wall_clock");
  EXPECT_TRUE(report.any_correctness_failure());
}

TEST(Faults, AHangIsATimeout) {
  Fixture f;
  const std::string hang = "external:" + test::fake_decode_library(4);
  const std::string correct = "external:" + test::fake_decode_library(0);
  BenchReport report = run_bench(f.items(), options({hang, correct}, 3));
  ASSERT_EQ(report.results.size(), 2u);
  EXPECT_EQ(report.results[0].status, RunStatus::timeout);
  EXPECT_NE(report.results[0].message.find("timeout"), std::string::npos);
  EXPECT_EQ(report.results[1].status, RunStatus::passed) << report.results[1].message;
}

TEST(Faults, BadImplementationArgumentsNameTheArgument) {
  auto expect_impl_error = [](const std::string& spec, const std::string& fragment) {
    try {
      check_implementation_spec(spec);
      ADD_FAILURE() << spec << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.field(), "--impl") << spec;
      EXPECT_EQ(e.value(), spec);
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  expect_impl_error("triton", "unknown implementation");
  expect_impl_error("external:", "needs a shared library path");
  expect_impl_error("external:/no/such/library.so", "no such shared library");
  // A real shared library without kindex's C ABI.
  auto dir = test::scratch_dir("noabi");
  std::string src = (dir / "empty.c").string(), lib = (dir / "libempty.so").string();
  std::ofstream(src) << "int unrelated(void) { return 1; }\n";
  ASSERT_EQ(std::system((test::c_compiler() + " -shared -fPIC " + src + " -o " + lib).c_str()), 0);
  expect_impl_error("external:" + lib, "kindex_last_error");
  for (const auto& name : builtin_implementation_names()) EXPECT_NO_THROW(check_implementation_spec(name));
}

// The shipped libkindex.so loads as an external implementation through the same path a user's library takes.
TEST(Faults, LibkindexLoadsAsAnExternalImplementation) {
  const std::string lib = test::binary_dir() + "/lib/libkindex.so";
  if (!std::filesystem::exists(lib)) GTEST_SKIP() << lib << " is not built (target kindex_shared)";
  auto impl = make_implementation("external:" + lib);
  EXPECT_EQ(impl->info().version.rfind("0.1.0", 0), 0u) << impl->info().version;
  EXPECT_EQ(impl->memory(), Where::device);
  Fixture f;
  EXPECT_EQ(impl->unsupported_reason(f.problem.definition), "");
  BenchReport report = run_bench(f.items(), options({"external:" + lib}));
  ASSERT_EQ(report.results.size(), 1u);
  if (!report.environment.has_gpu) {
    // No GPU here: the library (or the device allocation before it) says why, as a runtime_error.
    EXPECT_EQ(report.results[0].status, RunStatus::runtime_error);
    EXPECT_FALSE(report.results[0].message.empty());
  } else {
    EXPECT_EQ(report.results[0].status, RunStatus::passed) << report.results[0].message;
  }
}

// Only workers load an implementation: after a bench of an external library (one run that crashes its worker,
// one that passes) the runner process has never mapped the library, yet every result, the crashed one included,
// carries the library's description for its records.
TEST(Faults, OnlyWorkersLoadTheLibraryAndEveryResultDescribesIt) {
  Fixture f;
  const std::string crash_lib = test::fake_decode_library(1), correct_lib = test::fake_decode_library(0);
  BenchReport report = run_bench(f.items(), options({"external:" + crash_lib, "external:" + correct_lib}));
  ASSERT_EQ(report.results.size(), 2u);
  EXPECT_EQ(report.results[0].status, RunStatus::runtime_error);
  EXPECT_EQ(report.results[1].status, RunStatus::passed) << report.results[1].message;
  for (size_t i = 0; i < 2; ++i) {
    const ImplementationInfo& info = report.results[i].implementation_info;
    EXPECT_EQ(info.name, report.results[i].implementation);
    EXPECT_EQ(info.language, "c_abi");
    EXPECT_EQ(info.version, "fake-decode-" + std::to_string(i == 0 ? 1 : 0));
    EXPECT_EQ(info.path, i == 0 ? crash_lib : correct_lib);
    EXPECT_FALSE(info.on_device);  // kindex_abi_host_pointers
  }
  std::ifstream maps("/proc/self/maps");
  std::stringstream text;
  text << maps.rdbuf();
  EXPECT_EQ(text.str().find("libfake_decode_"), std::string::npos) << "the runner process loaded the library";
}

// A sink added to a RecordWriter sees every run once, as it ends, with its work item, then the report.
TEST(Faults, ASinkSeesEachRunWithItsWorkItem) {
  struct Recorder final : RunSink {
    std::vector<std::string>* seen;
    explicit Recorder(std::vector<std::string>* s) : seen(s) {}
    void add(const RunResult& r, const WorkItem& item, const Environment&) override {
      seen->push_back(r.implementation + "@" + item.workload->uuid);
    }
    void finish(const BenchReport& report) override { seen->push_back("end " + std::to_string(report.results.size())); }
  };
  Fixture f;
  std::vector<std::string> seen;
  RecordWriter writer(f.items(), {});
  writer.add_sink(std::make_unique<Recorder>(&seen));
  BenchReport report = run_bench(f.items(), options({"cpu-reference"}),
                                 [&](const RunResult& r, const Environment& env) { writer.add(r, env); });
  writer.finish(report);
  const std::string uuid = f.problem.workloads.at(0).uuid;
  EXPECT_EQ(seen, (std::vector<std::string>{"cpu-reference@" + uuid, "end 1"}));
  EXPECT_TRUE(writer.summary().files.empty());  // no --out, no store: nothing written
}

}  // namespace kindex::runner
