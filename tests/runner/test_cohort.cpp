// One converter (problem_manifest) builds the OperationSpec and WorkloadCase of kindex's own runs and of imported
// harness traces: a kindex run and a harness trace of the same definition and workload name the same operation
// and workload, and on the same machine under the same protocol they share one cohort (comparisonKey).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <tuple>

#include "runner/execute/implementation.hpp"
#include "runner/record/sinks.hpp"
#include "runner/support.hpp"
#include "catalog/builtin.hpp"
#include "catalog/fib_export.hpp"
#include "catalog/loader.hpp"
#include "problem_manifest/problem_manifest.hpp"
#include "store/import.hpp"
#include "store/query.hpp"
#include "store/store.hpp"

namespace kindex::runner {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

Environment h200() {
  Environment e;
  test::describe_h200(e);
  e.kindex_version = "0.1.0+cuda";
  return e;
}

RunResult passed_run(const catalog::Definition& def, const catalog::Workload& w, double latency_ns) {
  RunResult r;
  r.definition = def.name;
  r.source = std::string(catalog::source_name(def.source));
  r.workload_uuid = w.uuid;
  r.axes = w.axes;
  r.implementation = "cpu-reference";
  r.implementation_info = make_implementation("cpu-reference")->info();  // the runner attaches it to every run
  r.reference_implementation = "cpu-reference";
  r.comparator = "flashinfer_bench_eval";
  r.rounds_requested = r.rounds_run = 1;
  r.max_abs_error = r.max_rel_error = 0;
  r.observed_at = "2026-12-03T10:00:00.000Z";
  r.timed_on_device = true;
  r.protocol = {6, 10, 3, true};
  r.timing.timer = r.reference_timing.timer = "cupti_activity";
  r.timing.trials_ns = {{latency_ns, latency_ns, latency_ns}};
  r.timing.summary = summarize_trials(r.timing.trials_ns);
  r.reference_timing.trials_ns = {{2 * latency_ns}};
  r.reference_timing.summary = summarize_trials(r.reference_timing.trials_ns);
  r.speedup = 2.0;
  return r;
}

std::string first_line(const fs::path& file) {
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  return line;
}

struct Row {
  std::string operation, workload, protocol, comparison, environment, implementation;
};

// The store's runs by where they came from and their latency ("kindex 5000", "flashinfer-bench 4000").
std::map<std::string, Row> runs(store::Store& s) {
  std::map<std::string, Row> out;
  for (const auto& r : s.db().query(
           "SELECT r.origin, r.primary_value, w.operation_id, r.workload_id, r.protocol_key, r.comparison_key, "
           "r.environment_key, r.implementation_id "
           "FROM benchmark_runs r JOIN workloads w ON w.id = r.workload_id",
           {}))
    out[r.text(0) + " " + std::to_string(std::llround(r.real(1)))] = {r.text(2), r.text(3), r.text(4), r.text(5),
                                                                       r.text(6), r.text(7)};
  return out;
}

// A store and --out folder (a scratch folder named folder_prefix + the definition) holding one run kindex bench
// recorded itself, 5000 ns, of the problem's first workload: the "kindex 5000" row the checks below compare with.
struct Recorded {
  catalog::Problem problem;
  fs::path dir;
  std::string uri;
};
void record_first_workload(const std::string& problem_name, const std::string& folder_prefix, Recorded& r) {
  r.problem = catalog::builtin_problem(problem_name);
  const catalog::Definition& def = r.problem.definition;
  r.dir = test::scratch_dir(folder_prefix + def.name);
  r.uri = "sqlite:" + (r.dir / "k.db").string();
  BenchReport report;
  report.environment = h200();
  report.results = {passed_run(def, r.problem.workloads.at(0), 5000)};
  std::vector<WorkItem> items = {{&def, &r.problem.workloads.at(0)}};
  ASSERT_EQ(write_outputs(report, items, {r.dir.string(), r.uri}).runs_recorded, 1);
}

// Imports kindex's own trace line of the recorded run and `harness_file` into the recorded store: the store then
// holds three runs, the one kindex recorded itself ("kindex 5000"), its trace line and the harness's run.
struct Imported {
  std::unique_ptr<store::Store> s;
  Row own, own_trace, harness_run;
};
void import_beside_own_trace(const Recorded& recorded, const fs::path& definition_file, const fs::path& harness_file,
                             const std::string& harness_row, Imported& out) {
  const catalog::Definition& def = recorded.problem.definition;
  out.s = store::Store::open(recorded.uri);
  store::ImportOptions o;
  o.definitions = {definition_file.string()};
  const fs::path kindex_trace = recorded.dir / "traces" / (def.name + ".jsonl");
  auto rep = store::import_files(*out.s, {kindex_trace.string(), harness_file.string()}, o);
  EXPECT_EQ(rep.inserted["benchmark_runs"], 2);
  auto rows = runs(*out.s);
  ASSERT_EQ(rows.size(), 3u);
  out.own = rows.at("kindex 5000");                                                    // recorded by kindex bench
  out.own_trace = rows.at(std::string(catalog::source_name(def.source)) + " 5000");  // its trace line, imported
  out.harness_run = rows.at(harness_row);                                             // the harness's, imported
}

// The store holds one workload, and both runs name it and its operation.
void expect_one_workload(store::Store& s, const Row& a, const Row& b) {
  EXPECT_EQ(s.counts()["workloads"].get<int64_t>(), 1);
  EXPECT_EQ(a.operation, b.operation);
  EXPECT_EQ(a.workload, b.workload);
}

// Records one kindex run of (definition, workload) into a store and an --out folder, then imports into the same
// store the trace line kindex wrote and a harness trace of the same workload from another solution on the same
// machine (the harness's own workload line, as the upstream dataset writes it).
// With expect_same_workload false, the harness's workload is another one (and so another cohort).
void check_one_cohort(const std::string& problem_name, const fs::path& definition_file, const json& harness_workload,
                      bool expect_same_workload = true) {
  Recorded recorded;
  ASSERT_NO_FATAL_FAILURE(record_first_workload(problem_name, "cohort-", recorded));
  const catalog::Definition& def = recorded.problem.definition;
  const fs::path& dir = recorded.dir;

  const fs::path kindex_trace = dir / "traces" / (def.name + ".jsonl");
  json harness = json::parse(first_line(kindex_trace));
  harness["solution"] = "someone_elses_kernel";
  harness["workload"] = harness_workload;
  harness["evaluation"]["performance"]["latency_ms"] = 0.004;
  harness["evaluation"]["timestamp"] = "2026-12-03T11:00:00";
  const fs::path harness_trace = dir / "harness.jsonl";
  std::ofstream(harness_trace) << harness.dump() << "\n";

  Imported in;
  ASSERT_NO_FATAL_FAILURE(import_beside_own_trace(recorded, definition_file, harness_trace,
                                                  std::string(catalog::source_name(def.source)) + " 4000", in));
  store::Store* s = in.s.get();
  const Row &own = in.own, &own_trace = in.own_trace, &harness_run = in.harness_run;
  // The run kindex recorded itself and both imported traces name one operation and one workload.
  EXPECT_EQ(s->counts()["operations"].get<int64_t>(), 1);
  EXPECT_EQ(own_trace.operation, own.operation);
  EXPECT_EQ(harness_run.operation, own.operation);
  EXPECT_EQ(own_trace.workload, own.workload);
  if (!expect_same_workload) {
    EXPECT_EQ(s->counts()["workloads"].get<int64_t>(), 2);
    EXPECT_NE(harness_run.workload, own.workload);
    EXPECT_NE(harness_run.comparison, own_trace.comparison);
    fs::remove_all(dir);
    return;
  }
  expect_one_workload(*s, harness_run, own);
  // kindex's trace line and the harness's trace (same protocol, same reported machine) share one cohort; the run
  // kindex recorded under its own measurement protocol is a cohort of its own (docs/protocols.md).
  EXPECT_EQ(own_trace.comparison, harness_run.comparison);
  EXPECT_EQ(own_trace.protocol, harness_run.protocol);
  EXPECT_NE(own.protocol, own_trace.protocol);
  EXPECT_NE(own.comparison, own_trace.comparison);
  fs::remove_all(dir);
}

}  // namespace

TEST(Cohort, KindexRunAndFlashInferBenchTraceOfOneWorkloadShareItsCohort) {
  const std::string name = "gqa_paged_decode_h24_kv4_d128_ps64";
  auto problem = catalog::builtin_problem(name);
  check_one_cohort(name,
                   fs::path(test::source_dir()) / "definitions/flashinfer-trace/definitions/gqa_paged" / (name + ".json"),
                   problem.workloads.at(0).raw.at("workload"));
}

TEST(Cohort, KindexRunAndSolExecBenchTraceOfOneWorkloadShareItsCohort) {
  auto problem = catalog::builtin_problem(catalog::kSolGqaRopeBackward);
  check_one_cohort(std::string(catalog::kSolGqaRopeBackward),
                   fs::path(test::source_dir()) / "definitions/sol-execbench/L2" /
                       std::string(catalog::kSolGqaRopeBackward) / "definition.json",
                   problem.workloads.at(0).raw);
}

// The workload line `kindex catalog export` writes for FlashInfer-Bench (the page table as a safetensors file), as the
// harness copies it into every trace it writes.
json exported_workload(const std::string& name, size_t index) {
  auto dir = test::scratch_dir("export-" + name);
  catalog::export_flashinfer_bench({name}, dir);
  std::ifstream in(dir / "workloads" / "gqa_paged" / (name + ".jsonl"));
  std::string line;
  for (size_t i = 0; i <= index; ++i) std::getline(in, line);
  fs::remove_all(dir);
  return json::parse(line).at("workload");
}

TEST(Cohort, FlashInferBenchTraceOfAnExportedWorkloadJoinsKindexsOwnWorkload) {
  for (const std::string name : {"gqa_paged_decode_h24_kv4_d128_ps64", "gqa_paged_decode_h32_kv4_d128_ps1"}) {
    SCOPED_TRACE(name);
    const json workload = exported_workload(name, 0);
    ASSERT_EQ(workload.at("inputs").at("kv_indices").at("type"), "safetensors");
    check_one_cohort(name, fs::path(test::source_dir()) / "definitions/flashinfer-trace/definitions/gqa_paged" /
                               (name + ".json"),
                     workload);
  }
}

TEST(Cohort, AHarnessTraceOfAnotherPageTableIsAnotherWorkload) {
  const std::string name = "gqa_paged_decode_h24_kv4_d128_ps64";
  json workload = exported_workload(name, 0);
  // The same uuid and axes with a captured blob (FlashInfer-Bench's own dataset layout): not kindex's page table.
  for (const char* input : {"kv_indptr", "kv_indices", "kv_last_page_len"})
    workload["inputs"][input]["path"] = "./blob/workloads/gqa_paged/" + name + "/captured.safetensors";
  check_one_cohort(name, fs::path(test::source_dir()) / "definitions/flashinfer-trace/definitions/gqa_paged" /
                             (name + ".json"),
                   workload, /*expect_same_workload=*/false);
}

// A workload whose page table comes from another length distribution (kv_indptr's "lengths") is another
// WorkloadCase: its index tensors are recorded as generated by "random_<lengths>". The default, written out or not,
// keeps "random" and so every earlier digest. kindex's trace line carries the key and the exported table's path
// names the distribution, so both land in the workload kindex's own run of it names.
TEST(Cohort, ALengthDistributionIsAnotherWorkloadCase) {
  const std::string name = "gqa_paged_decode_h24_kv4_d128_ps64";
  const catalog::Problem problem = catalog::builtin_problem(name);
  const catalog::Definition& def = problem.definition;
  const evidence::Manifest op = problem_manifest::operation_spec(def);
  const catalog::Workload base = problem.workloads.at(0);
  const std::string base_digest = problem_manifest::workload_case(def, base, op).digest;
  auto with = [&](const std::string& lengths) {
    catalog::Workload w = base;
    w.inputs["kv_indptr"].lengths = lengths;
    return w;
  };
  EXPECT_EQ(problem_manifest::workload_case(def, with("exponential"), op).digest, base_digest);
  std::set<std::string> digests = {base_digest};
  for (const std::string d : {"equal", "long_tail", "one_long"}) {
    SCOPED_TRACE(d);
    const catalog::Workload w = with(d);
    const evidence::Manifest wc = problem_manifest::workload_case(def, w, op);
    EXPECT_TRUE(digests.insert(wc.digest).second);
    const json& tensors = wc.document.at("spec").at("tensors");
    for (const char* input : {"kv_indptr", "kv_indices", "kv_last_page_len"})
      EXPECT_EQ(tensors.at(input).at("data").at("generator"), "random_" + d) << input;
    EXPECT_EQ(tensors.at("q").at("data").at("generator"), "random");
    // kindex's trace line: the key survives, and reading the line back gives the same workload.
    const json doc = problem_manifest::workload_document(w);
    EXPECT_EQ(doc.at("inputs").at("kv_indptr").at("lengths"), d);
    const catalog::Workload reread = catalog::parse_workload_line(
        json{{"definition", name}, {"workload", doc}}.dump(), def, "trace.jsonl", 1);
    EXPECT_EQ(reread.inputs.at("kv_indptr").lengths, d);
    EXPECT_EQ(problem_manifest::workload_case(def, reread, op).digest, wc.digest);
    // A harness trace of the exported workload: the page table as the file the export wrote for it.
    json exported = doc;
    for (const char* input : {"kv_indptr", "kv_indices", "kv_last_page_len"})
      exported["inputs"][input] = {{"type", "safetensors"},
                                   {"path", catalog::page_table_blob_path(name, w.uuid, d)},
                                   {"tensor_key", input}};
    EXPECT_EQ(problem_manifest::workload_case(op.document, exported, name, "harness").digest, wc.digest);
  }
  // A trace naming a distribution kindex does not know is refused with the field and the value.
  json unknown = problem_manifest::workload_document(base);
  unknown["inputs"]["kv_indptr"]["lengths"] = "zipf";
  try {
    problem_manifest::workload_case(op.document, unknown, name, "harness");
    ADD_FAILURE() << "an unknown distribution was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.field(), "workload.inputs.kv_indptr.lengths");
    EXPECT_EQ(e.value(), "zipf");
  }
}

// A trace line as the harness's own models write it (tests/data/harness-traces/make_traces.py) for the first workload
// of a seed problem: it files under kindex's own operation and workload, with the protocol of kindex's own trace
// lines. Its environment is what the harness reports (torch, triton, CUDA), not what kindex's trace line reports
// (kindex, cuBLASLt, CUPTI, CUDA): a cohort also needs one environment, so the two share a cohort only where the
// reported software agrees.
void check_harness_file(const std::string& problem_name, const fs::path& definition_file, const std::string& fixture,
                        const std::string& harness_row) {
  Recorded recorded;
  ASSERT_NO_FATAL_FAILURE(record_first_workload(problem_name, "cohort-harness-file-", recorded));
  Imported in;
  ASSERT_NO_FATAL_FAILURE(import_beside_own_trace(
      recorded, definition_file, fs::path(test::source_dir()) / "tests/data/harness-traces" / fixture, harness_row, in));
  store::Store* s = in.s.get();
  const fs::path& dir = recorded.dir;
  const Row &own = in.own, &own_trace = in.own_trace, &harness_run = in.harness_run;
  expect_one_workload(*s, harness_run, own);
  EXPECT_EQ(harness_run.protocol, own_trace.protocol);
  EXPECT_NE(harness_run.environment, own_trace.environment);
  EXPECT_NE(harness_run.comparison, own_trace.comparison);
  fs::remove_all(dir);
}

TEST(Cohort, TheTraceFlashInferBenchWritesForAnExportedWorkloadFilesUnderKindexsWorkload) {
  const std::string name = "gqa_paged_decode_h24_kv4_d128_ps64";
  check_harness_file(name, fs::path(test::source_dir()) / "definitions/flashinfer-trace/definitions/gqa_paged" /
                               (name + ".json"),
                     "fib_traces_exported_ps64.jsonl", "flashinfer-bench 30100");
}

TEST(Cohort, TheTraceSolExecBenchWritesForL2003FilesUnderKindexsWorkload) {
  check_harness_file(std::string(catalog::kSolGqaRopeBackward),
                     fs::path(test::source_dir()) / "definitions/sol-execbench/L2" /
                         std::string(catalog::kSolGqaRopeBackward) / "definition.json",
                     "sol_traces_l2_003.jsonl", "sol-execbench 887500");
}

// Lines FlashInfer-Bench 0.1.2 and SOL ExecBench 1.0.1.1 wrote on the H200 (results/harnesses/, 2026-12-03) for the
// first workload of a seed problem, imported as users import them (no --solutions): kindex's solution and, in the
// FlashInfer-Bench file, FlashInfer's baseline on the same workload. Both file under kindex's own operation and
// workload; they are two implementations of one cohort (one harness, one reported environment).
void check_h200_file(const std::string& problem_name, const fs::path& definition_file, const std::string& fixture,
                     const std::string& kindex_row, const std::string& flashinfer_row) {
  Recorded recorded;
  ASSERT_NO_FATAL_FAILURE(record_first_workload(problem_name, "cohort-h200-", recorded));
  const fs::path& dir = recorded.dir;
  const std::string& uri = recorded.uri;

  auto s = store::Store::open(uri);
  store::ImportOptions o;
  o.definitions = {definition_file.string()};
  const std::string harness_file = test::source_dir() + "/tests/data/harness-traces/" + fixture;
  auto rep = store::import_files(*s, {harness_file}, o);
  EXPECT_EQ(rep.inserted["benchmark_runs"], flashinfer_row.empty() ? 1 : 2);
  EXPECT_EQ(s->counts()["workloads"].get<int64_t>(), 1);
  auto rows = runs(*s);
  const Row& own = rows.at("kindex 5000");
  ASSERT_TRUE(rows.count(kindex_row)) << kindex_row;
  const Row& harness_kindex = rows.at(kindex_row);
  EXPECT_EQ(harness_kindex.operation, own.operation);
  EXPECT_EQ(harness_kindex.workload, own.workload);
  EXPECT_NE(harness_kindex.implementation, own.implementation);
  if (!flashinfer_row.empty()) {
    ASSERT_TRUE(rows.count(flashinfer_row)) << flashinfer_row;
    const Row& harness_flashinfer = rows.at(flashinfer_row);
    EXPECT_EQ(harness_flashinfer.workload, own.workload);
    EXPECT_EQ(harness_flashinfer.comparison, harness_kindex.comparison);
    EXPECT_NE(harness_flashinfer.implementation, harness_kindex.implementation);
  }
  // Re-importing the same file adds nothing.
  EXPECT_EQ(store::import_files(*s, {harness_file}, o).inserted["benchmark_runs"], 0);
  fs::remove_all(dir);
}

TEST(Cohort, TheH200FlashInferBenchTracesOfKindexAndFlashInferFileUnderKindexsWorkloadInOneCohort) {
  for (const auto& [name, fixture, kindex_ns, flashinfer_ns] :
       {std::tuple{"gqa_paged_decode_h24_kv4_d128_ps64", "h200_fib_ps64.jsonl", "51087", "426107"},
        std::tuple{"gqa_paged_decode_h32_kv4_d128_ps1", "h200_fib_ps1.jsonl", "42011", "192486"}}) {
    SCOPED_TRACE(name);
    check_h200_file(name,
                    fs::path(test::source_dir()) / "definitions/flashinfer-trace/definitions/gqa_paged" /
                        (std::string(name) + ".json"),
                    fixture, std::string("flashinfer-bench ") + kindex_ns, std::string("flashinfer-bench ") + flashinfer_ns);
  }
}

TEST(Cohort, TheH200SolExecBenchTraceOfL2003FilesUnderKindexsWorkload) {
  check_h200_file(std::string(catalog::kSolGqaRopeBackward),
                  fs::path(test::source_dir()) / "definitions/sol-execbench/L2" /
                      std::string(catalog::kSolGqaRopeBackward) / "definition.json",
                  "h200_sol_l2_003.jsonl", "sol-execbench 516172", "");
}

}  // namespace kindex::runner
