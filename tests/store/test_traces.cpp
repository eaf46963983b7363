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
  ImportOptions o;
  o.definitions = {kindex::test::data_dir() + "/specs/flashinfer-trace/definitions"};
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
    EXPECT_EQ(e.field(), "definition");
    EXPECT_EQ(e.value(), "gqa_paged_decode_h24_kv4_d128_ps64");
  }
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
