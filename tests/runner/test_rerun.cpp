// `kindex rerun`'s plan: which bundled problem, workload, protocol and implementation a stored run maps to, or the
// error that names why it cannot be rerun here (src/runner/rerun.hpp). Measuring and recording are tested through
// the CLI (tests/cli/test_cli.cpp, RerunCli).
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "catalog/builtin.hpp"
#include "core/error.hpp"
#include "runner/rerun.hpp"
#include "store/import.hpp"
#include "store/rows.hpp"
#include "store/store.hpp"
#include "support/paths.hpp"

namespace kindex::runner {
namespace {

// KernelIndex's export, as a user imports it: the seed pages' operations and their published records.
store::Store& slice_store() {
  static std::unique_ptr<store::Store> s = [] {
    auto made = store::Store::open(":memory:");
    store::import_files(*made, {kindex::test::data_dir() + "/kernelindex/export-slice-gqa.jsonl.zst"});
    return made;
  }();
  return *s;
}

// The first run of the export whose operation has this slug.
std::string run_of_operation(const std::string& slug) {
  auto rows = slice_store().db().query(
      "SELECT r.id FROM benchmark_runs r JOIN workloads w ON w.id = r.workload_id JOIN operations o ON "
      "o.id = w.operation_id WHERE o.slug = ? ORDER BY r.id LIMIT 1",
      {slug});
  return rows.empty() ? "" : rows[0].text(0);
}

// The Error plan_rerun throws for `run`, as "field = value: problem".
std::string refusal(store::Store& s, const std::string& run, const std::string& impl = "") {
  RerunOptions o;
  o.run = run;
  o.implementation = impl;
  try {
    plan_rerun(s, o);
  } catch (const Error& e) {
    return e.field() + " = " + e.value() + ": " + e.problem();
  }
  return "";
}

TEST(Rerun, Seed003RecordMapsToTheFlashInferPeerOnTheBundledWorkloadOfItsAxes) {
  // FlashInfer-Bench's FlashInfer wrapper baseline, 359.8 us (mean) on a B200: seed 003's record.
  RerunOptions o;
  o.run = "01a00b1d-382c-7e68-bbed-30ee323627a7";
  const RerunPlan plan = plan_rerun(slice_store(), o);
  EXPECT_EQ(plan.problem, "gqa_paged_decode_h24_kv4_d128_ps64");
  EXPECT_EQ(plan.source, "flashinfer-bench");
  EXPECT_EQ(plan.implementation, "flashinfer");
  EXPECT_TRUE(plan.same_implementation);
  EXPECT_EQ(plan.original_implementation, "flashinfer_wrapper_1b7890");
  // KernelIndex's workload names captured index arrays: kindex's workload of the same axes stands in.
  EXPECT_EQ(plan.workload_match, "same_axes");
  for (const auto& w : catalog::builtin_problem(plan.problem).workloads) {
    if (w.uuid != plan.workload_uuid) continue;
    EXPECT_EQ(w.axes, (std::map<std::string, int64_t>{
                          {"batch_size", 1}, {"len_indptr", 2}, {"num_kv_indices", 361}, {"num_pages", 425}}));
  }
  const auto labels = plan.labels();
  const auto digest = slice_store().db().query("SELECT run_digest FROM benchmark_runs WHERE id = ?", {o.run});
  EXPECT_EQ(labels.at(store::kReproducesRunLabel), digest.at(0).text(0));
  EXPECT_EQ(labels.at(store::kSameImplementationLabel), "true");

  // --impl overrides the mapping; only the mapped spec counts as the same implementation.
  o.implementation = "flashinfer-tc";
  EXPECT_FALSE(plan_rerun(slice_store(), o).same_implementation);
  o.implementation = "flashinfer";
  EXPECT_TRUE(plan_rerun(slice_store(), o).same_implementation);
}

TEST(Rerun, SolRecordsOfTheExportAreRefusedNamingWhy) {
  // SOL-ExecBench's L2/003 records are whole-suite results (KernelIndex's OperationSpec of L2/003 differs from the
  // bundled one in family and reference only, so the problem is found).
  EXPECT_NE(refusal(slice_store(), run_of_operation("003-grouped-query-attention-with-rope-backward"))
                .find("is a WorkloadSuite: kindex rerun re-measures one workload"),
            std::string::npos);
  // SOL-ExecBench's decode definitions have the semantics of FlashInfer-Bench's, whose protocol the bundled one
  // follows.
  EXPECT_NE(refusal(slice_store(), run_of_operation("013-gqa-paged-decode-h32-kv8-d128-ps1"))
                .find("was measured under sol-execbench's protocol, and kindex's bundled "
                      "gqa_paged_decode_h32_kv8_d128_ps1 follows flashinfer-bench's"),
            std::string::npos);
  EXPECT_NE(refusal(slice_store(), "ffffffff-0000").find("run = ffffffff-0000: no such run in this store"),
            std::string::npos);
}

TEST(Rerun, SolExecBenchTorchCompileBaselineMapsToTheTorchCompilePeer) {
  // SOL ExecBench's H200 line for L2/003, as if its solution were the torch.compile baseline.
  std::string line;
  {
    std::ifstream in(kindex::test::data_dir() + "/harness-traces/h200_sol_l2_003.jsonl");
    std::getline(in, line);
  }
  const std::string from = "\"solution\": \"kindex_003_grouped_query_attention_with_rope_backward\"";
  ASSERT_NE(line.find(from), std::string::npos);
  line.replace(line.find(from), from.size(), "\"solution\":\"torch_compile_baseline\"");
  const std::string path = ::testing::TempDir() + "kindex_rerun_sol_trace.jsonl";
  { std::ofstream(path) << line << "\n"; }
  auto s = store::Store::open(":memory:");
  store::ImportOptions io;
  io.definitions = {kindex::test::data_dir() +
                    "/specs/sol-execbench/L2/003_grouped_query_attention_with_rope_backward/definition.json"};
  store::import_files(*s, {path}, io);
  RerunOptions o;
  o.run = s->db().query("SELECT id FROM benchmark_runs").at(0).text(0);
  const RerunPlan plan = plan_rerun(*s, o);
  EXPECT_EQ(plan.problem, "003_grouped_query_attention_with_rope_backward");
  EXPECT_EQ(plan.source, "sol-execbench");
  EXPECT_EQ(plan.implementation, "torch-compile");
  EXPECT_EQ(plan.workload_match, "same_workload");
  // A --impl that does not exist is refused before anything runs.
  EXPECT_NE(refusal(*s, o.run, "solution:/nonexistent/solution.json").find("solution:"), std::string::npos);
}

}  // namespace
}  // namespace kindex::runner
