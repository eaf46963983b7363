// FlashInfer-Bench and SOL-ExecBench traces (with their definitions and solutions) and kindex's own run records.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "store/fixtures.hpp"
#include "store/import.hpp"
#include "store/query.hpp"

namespace kindex::store {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class Traces : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kindex-traces-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }
  fs::path dir_;
};

// Import options that read the definitions from `definitions` (a file or folder under tests/data).
ImportOptions with_definitions(const std::string& definitions) {
  ImportOptions o;
  o.definitions = {kindex::test::data_dir() + definitions};
  return o;
}

json fib_trace(double latency_ms, const std::string& status = "PASSED") {
  return {{"definition", "gqa_paged_decode_h24_kv4_d128_ps64"},
          {"solution", "my_decode_v1"},
          {"workload",
           {{"uuid", "4f1c7a9e-0000-0000-0000-000000000001"},
            {"axes", {{"batch_size", 1}, {"num_pages", 425}, {"len_indptr", 2}, {"num_kv_indices", 361}}},
            {"inputs", {{"q", {{"type", "random"}}}, {"k_cache", {{"type", "random"}}}, {"v_cache", {{"type", "random"}}},
                        {"kv_indptr", {{"type", "safetensors"}}}, {"kv_indices", {{"type", "safetensors"}}},
                        {"kv_last_page_len", {{"type", "safetensors"}}}, {"sm_scale", {{"type", "scalar"}, {"value", 0.08838834764831843}}}}}}},
          {"evaluation",
           {{"status", status},
            {"environment", {{"hardware", "NVIDIA B200"}, {"libs", {{"torch", "2.9.1+cu128"}, {"triton", "3.5.1"}, {"cuda", "12.8"}}}}},
            {"timestamp", "2026-10-01T10:00:00Z"},
            {"correctness", {{"max_absolute_error", 0.001}, {"max_relative_error", 0.002}}},
            {"performance", {{"latency_ms", latency_ms}, {"reference_latency_ms", 1.2}, {"speedup_factor", 1.2 / latency_ms}}}}}};
}

TEST_F(Traces, FlashInferBenchTraceJoinsTheSliceCohortAndReimportsNothing) {
  auto s = Store::open(":memory:");
  import_files(*s, {kindex::test::data_dir() + "/kernelindex/export-slice-gqa.jsonl.zst"});
  int64_t operations = s->counts()["operations"];
  std::string solution = write("my_decode_v1.json", json{{"name", "my_decode_v1"}, {"definition", "gqa_paged_decode_h24_kv4_d128_ps64"},
                                                          {"author", "someone"},
                                                          {"spec", {{"language", "triton"}, {"target_hardware", {"NVIDIA B200"}},
                                                                    {"entry_point", "main.py::run"}}},
                                                          {"sources", {{{"path", "main.py"}, {"content", "def run(): pass\n"}}}}}
                                                         .dump());
  std::string trace = write("traces.jsonl", fib_trace(0.25).dump() + "\n" + fib_trace(0.9, "RUNTIME_ERROR").dump() + "\n");
  ImportOptions o = with_definitions("/specs/flashinfer-trace/definitions");
  o.solutions = {solution};
  ImportReport rep = import_files(*s, {trace}, o);
  EXPECT_EQ(rep.inserted["benchmark_runs"], 2);
  EXPECT_EQ(import_files(*s, {trace}, o).total_inserted(), 0);
  // The definition converts to the same OperationSpec KernelIndex published, so no new operation appears and the
  // trace ranks in the same cohort as FlashInfer's baseline (same protocol, environment and workload).
  EXPECT_EQ(s->counts()["operations"], operations);
  ResolveQuery q{"gqa_paged_decode_h24_kv4_d128_ps64", {{"batch_size", 1}, {"num_pages", 425}}, "bf16", "B200"};
  json r = resolve(*s, q);
  ASSERT_EQ(r["exact"]["cohorts"].size(), 1u);
  const json& runs = r["exact"]["cohorts"][0]["runs"];
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0]["implementation"], "my_decode_v1");
  EXPECT_EQ(runs[1]["implementation"], "flashinfer_wrapper_1b7890");
  EXPECT_EQ(r["exact"]["cohorts"][0]["unranked"][0]["status"], "runtime_error");
  EXPECT_NEAR(run_view(*s, runs[0]["id"])["speedupFactor"].get<double>(), 4.8, 1e-9);
}

TEST_F(Traces, UnknownDefinitionIsAClearError) {
  auto s = Store::open(":memory:");
  std::string trace = write("t.jsonl", fib_trace(0.25).dump() + "\n");
  try {
    import_files(*s, {trace});
    FAIL();
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(trace + ":1: definition = gqa_paged_decode_h24_kv4_d128_ps64"), std::string::npos) << msg;
    EXPECT_NE(msg.find("--definitions"), std::string::npos) << msg;
  }
}

std::string harness_traces() { return kindex::test::data_dir() + "/harness-traces"; }

// Imports a FlashInfer-Bench trace file (its definitions bundled under tests/data), expects `runs` new runs, and
// returns what `sql` reads then.
Rows import_fib_and_query(Store& s, const std::string& file, size_t runs, std::string_view sql) {
  ImportReport rep = import_files(s, {file}, with_definitions("/specs/flashinfer-trace/definitions"));
  EXPECT_EQ(rep.inserted["benchmark_runs"], int64_t(runs));
  return s.db().query(sql);
}

TEST_F(Traces, FlashInferBench012TraceFileNamedAnyhowImportsWithItsZonelessTimestamps) {
  auto s = Store::open(":memory:");
  // Named neither after its definition nor .jsonl (an upload, say): the format comes from the content.
  fs::copy_file(harness_traces() + "/fib_traces_gqa_paged_decode_h24_kv4_d128_ps64.jsonl", dir_ / "upload.json");
  auto rows = import_fib_and_query(
      *s, (dir_ / "upload.json").string(), 2,
      "SELECT r.status, r.observed_at, r.primary_value, m.manifest FROM benchmark_runs r JOIN run_manifests m ON "
      "m.run_id = r.id ORDER BY r.observed_at");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].text(0), "passed");
  // "2026-12-03T08:51:59.947655" as written: no zone, read as UTC, kept with the rule applied.
  EXPECT_EQ(rows[0].text(1), "2026-12-03T08:51:59.947Z");
  EXPECT_EQ(rows[0].real(2), 12300);
  const json labels = json::parse(rows[0].text(3))["run"]["metadata"]["labels"];
  EXPECT_EQ(labels["source_timestamp"], "2026-12-03T08:51:59.947655");
  EXPECT_EQ(labels["source_timestamp_rule"], "no zone: read as UTC");
  // INCORRECT_NUMERICAL with NaN errors (written as "NaN") and a null performance: stored, unranked.
  EXPECT_EQ(rows[1].text(0), "incorrect_numerical");
  EXPECT_TRUE(rows[1].is_null(2));
}

TEST_F(Traces, SolExecBench1011TraceLinesImport) {
  auto s = Store::open(":memory:");
  ImportOptions o = with_definitions("/specs/sol-execbench/L2/003_grouped_query_attention_with_rope_backward/definition.json");
  ImportReport rep = import_files(*s, {harness_traces() + "/sol_traces_l2_003.jsonl"}, o);
  EXPECT_EQ(rep.inserted["benchmark_runs"], 1);
  auto rows = s->db().query("SELECT observed_at, primary_value, origin FROM benchmark_runs");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].text(0), "2026-12-03T09:14:07.502Z");
  EXPECT_EQ(rows[0].real(1), 887500);
  EXPECT_EQ(rows[0].text(2), "sol-execbench");
}

TEST_F(Traces, H200HarnessLinesWithoutSolutionsFileOneImplementationPerSolution) {
  // Lines FlashInfer-Bench 0.1.2 wrote on the H200 (results/harnesses/): kindex's solution and FlashInfer's baseline on
  // one workload, imported without --solutions as users do. Before, both digested to one implementation (the
  // solution name was only in the metadata) and FlashInfer's run was filed under kindex's solution.
  auto s = Store::open(":memory:");
  auto rows = import_fib_and_query(
      *s, harness_traces() + "/h200_fib_ps64.jsonl", 2,
      "SELECT i.title, r.primary_value, r.comparison_key FROM benchmark_runs r JOIN implementations i ON i.id = "
      "r.implementation_id ORDER BY r.primary_value");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].text(0), "kindex_paged_decode_gqa_paged_decode_h24_kv4_d128_ps64");
  EXPECT_EQ(rows[0].real(1), 51087);
  EXPECT_EQ(rows[1].text(0), "flashinfer_decode_gqa_paged_decode_h24_kv4_d128_ps64");
  EXPECT_EQ(rows[1].real(1), 426107);
  EXPECT_EQ(rows[0].text(2), rows[1].text(2));  // one harness, one environment: one cohort
}

TEST_F(Traces, EveryBadLineIsNamedAndTheGoodLinesAreNotImported) {
  auto s = Store::open(":memory:");
  json late = fib_trace(0.3);
  late["evaluation"]["timestamp"] = "03/12/2026 08:51";
  std::string trace = write("mixed.jsonl", fib_trace(0.25).dump() + "\n{\"definition\": \n" + late.dump() + "\n" +
                                                fib_trace(0.2).dump() + "\n");
  ImportOptions o = with_definitions("/specs/flashinfer-trace/definitions");
  const json before = s->counts();
  try {
    import_files(*s, {trace}, o);
    FAIL() << "a trace file with bad lines was imported";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(e.value(), "2 of 4") << msg;
    EXPECT_NE(msg.find(trace + ":2"), std::string::npos) << msg;
    EXPECT_NE(msg.find(trace + ":3: evaluation.timestamp = 03/12/2026 08:51"), std::string::npos) << msg;
    EXPECT_EQ(msg.find(trace + ":1"), std::string::npos) << msg;
  }
  EXPECT_EQ(s->counts(), before);
}

TEST_F(Traces, SolExecBenchTraceWithDefinition) {
  auto s = Store::open(":memory:");
  std::string def = kindex::test::data_dir() +
                    "/specs/sol-execbench/L2/003_grouped_query_attention_with_rope_backward/definition.json";
  json line = {{"definition", "003_grouped_query_attention_with_rope_backward"},
               {"solution", "kx_bwd"},
               {"workload", {{"uuid", "ba15cf4f-904f-54d8-99e0-ca0b7e335a9d"}, {"axes", {{"batch_size", 1}, {"seq_len", 691}}},
                             {"inputs", {{"scaling", {{"type", "scalar"}, {"value", 0.08838834764831845}}}}},
                             {"tolerance", {{"max_atol", 0.039}, {"max_rtol", 0.05}}}}},
               {"evaluation", {{"status", "PASSED"}, {"environment", {{"hardware", "NVIDIA H200"}, {"libs", {{"torch", "2.11.0"}}}}},
                               {"timestamp", "2026-12-02T10:00:00Z"}, {"performance", {{"latency_ms", 0.61}}}}}};
  ImportOptions o;
  o.definitions = {def};
  ImportReport rep = import_files(*s, {write("sol.jsonl", line.dump() + "\n")}, o);
  EXPECT_EQ(rep.inserted["benchmark_runs"], 1);
  json v = operation_view(*s, "003_grouped_query_attention_with_rope_backward");
  ASSERT_EQ(v["cohorts"].size(), 1u);
  EXPECT_EQ(v["cohorts"][0]["protocol"]["harness"], "sol-execbench");
  // Derived axes were evaluated into tensor shapes: q_weight is [num_attention_heads*head_dim, hidden_size].
  json run = run_view(*s, v["cohorts"][0]["runs"][0]["id"]);
  bool found = false;
  for (const auto& t : run["workload"]["tensors"]) {
    if (t["name"] == "q_weight") {
      EXPECT_EQ(t["shape"], json::array({4096, 5120}));
      found = true;
    }
  }
  EXPECT_TRUE(found);
  // H200 floor: every declared input read once at 4.8 TB/s vs attention FLOPs (family "rope": no FLOP formula).
  EXPECT_TRUE(v["cohorts"][0].contains("floor"));
}

TEST_F(Traces, OwnRunRecordsRoundTrip) {
  auto s = Store::open(":memory:");
  OwnRun r = test::example_run(8123, 5, true, {8100, 8123, 8150});
  r.kindex_floor_ns = 5000;
  std::string file = write("runs.jsonl", to_json(r).dump() + "\n");
  ImportReport rep = import_files(*s, {file});
  EXPECT_EQ(rep.inserted["benchmark_runs"], 1);
  EXPECT_EQ(import_files(*s, {file}).total_inserted(), 0);
  json v = operation_view(*s, "example_rmsnorm");
  EXPECT_EQ(v["cohorts"][0]["kindexFloorNs"], 5000.0);
  EXPECT_EQ(v["cohorts"][0]["runs"][0]["evidence"], "verified");
  std::string bad = write("bad.jsonl", json{{"kindexRun", 1}, {"extra", true}}.dump() + "\n");
  EXPECT_THROW(import_files(*s, {bad}), Error);
}

}  // namespace
}  // namespace kindex::store
