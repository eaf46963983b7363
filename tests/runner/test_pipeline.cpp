// The runner end to end on the CPU path: inputs, the CPU reference checked against a second independent call,
// wall-clock timing, floors, and all three outputs (trace lines, KernelIndex manifests, store rows).
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "runner/record/environment.hpp"
#include "runner/execute/pipeline.hpp"
#include "runner/record/records.hpp"
#include "runner/session.hpp"
#include "runner/support.hpp"
#include "catalog/builtin.hpp"
#include "core/error.hpp"
#include "evidence/digest.hpp"
#include "evidence/reader.hpp"
#include "evidence/schema.hpp"
#include "store/store.hpp"

namespace kindex::runner {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

SessionOptions cpu_session(const fs::path& dir) {
  SessionOptions s;
  s.problems = {"gqa_paged_decode_h32_kv4_d128_ps1"};
  s.workloads = "0-1";
  s.bench.implementations = {"cpu-reference"};
  s.bench.reference = "cpu-reference";
  s.bench.trials = 2;
  s.bench.iterations = 3;
  s.bench.warmup = 0;
  s.bench.timeout_s = 120;
  s.output.out_dir = dir.string();
  s.output.store_uri = "sqlite:" + (dir / "kindex.db").string();
  s.json = true;
  return s;
}

std::vector<json> read_lines(const fs::path& file) {
  std::ifstream in(file);
  std::vector<json> lines;
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) lines.push_back(json::parse(line));
  return lines;
}

}  // namespace

TEST(Pipeline, CpuPathWritesTracesManifestsAndStoreRows) {
  auto dir = test::scratch_dir("pipeline");
  std::ostringstream out, err;
  ASSERT_EQ(run_session(cpu_session(dir), out, err), 0) << err.str() << out.str();
  json report = json::parse(out.str());

  ASSERT_EQ(report["results"].size(), 2u);
  EXPECT_FALSE(report["environment"]["cpu_model"].get<std::string>().empty());
  for (const auto& r : report["results"]) {
    EXPECT_EQ(r["status"], "passed") << r.dump();
    EXPECT_EQ(r["correctness"]["check"], "determinism");
    EXPECT_EQ(r["correctness"]["rounds_run"], 2);
    EXPECT_EQ(r["correctness"]["comparator"], "flashinfer_bench_eval");
    // the same code twice on the same inputs: bit-identical
    EXPECT_EQ(r["correctness"]["max_absolute_error"], 0.0);
    EXPECT_EQ(r["timing"]["timer"], "wall_clock");
    ASSERT_EQ(r["timing"]["trials_ns"].size(), 2u);  // min(rounds, 3 timing trials)
    EXPECT_EQ(r["timing"]["trials_ns"][0].size(), 3u);
    EXPECT_GT(r["timing"]["summary"]["latency_ns"].get<double>(), 0);
    EXPECT_NEAR(r["speedup_factor"].get<double>(), 1.0, 1e-12);  // its own timing reference
    EXPECT_GT(r["headroom_ratio"].get<double>(), 0);
    EXPECT_GT(r["kindex_floor_ratio"].get<double>(), 0);
    EXPECT_EQ(r["floors"]["headroom_v1"]["method"], "headroom-v1");
    EXPECT_NE(r["message"].get<std::string>().find("reduced to 2"), std::string::npos);
    // Where the run's time went (host outputs, so the host comparator), within its wall time.
    EXPECT_EQ(r["compared_on"], "host");
    double phases = 0;
    for (const char* phase :
         {"setup", "inputs", "reference", "implementation", "compare", "timing", "reference_timing"})
      phases += r["phases_s"].at(phase).get<double>();
    EXPECT_GT(r["phases_s"]["compare"].get<double>(), 0);
    EXPECT_GT(r["phases_s"]["timing"].get<double>(), 0);
    EXPECT_LE(phases, r["wall_s"].get<double>() * 1.0001);
    EXPECT_GT(r["phases_s"]["record"].get<double>(), 0);  // the runner's own, after the run: not in wall_s
  }

  // Each run was appended to runs.jsonl as it ended.
  auto streamed = read_lines(dir / "runs.jsonl");
  ASSERT_EQ(streamed.size(), 2u);
  EXPECT_EQ(streamed[1]["workload_uuid"], report["results"][1]["workload_uuid"]);

  // Trace lines.
  auto traces = read_lines(dir / "traces" / "gqa_paged_decode_h32_kv4_d128_ps1.jsonl");
  ASSERT_EQ(traces.size(), 2u);
  for (const auto& t : traces) {
    EXPECT_EQ(t["solution"], "cpu-reference");
    EXPECT_EQ(t["evaluation"]["status"], "PASSED");
    EXPECT_GT(t["evaluation"]["performance"]["latency_ms"].get<double>(), 0);
  }

  // Manifests: valid against the KernelIndex schemas, named by their digest, and the run points at them.
  std::set<std::string> kinds;
  std::map<std::string, std::string> digest_kind;
  for (const auto& entry : fs::recursive_directory_iterator(dir / "manifests")) {
    if (!entry.is_regular_file()) continue;
    json m = evidence::read_manifest_file(entry.path().string());
    EXPECT_NO_THROW(evidence::validate_manifest(m, entry.path().string()));
    const std::string digest = evidence::manifest_digest(m);
    EXPECT_EQ("sha256:" + entry.path().stem().string(), digest);
    kinds.insert(m["kind"]);
    digest_kind[digest] = m["kind"];
  }
  EXPECT_EQ(kinds, (std::set<std::string>{"OperationSpec", "WorkloadCase", "ImplementationRevision",
                                          "BenchmarkProtocol", "ExecutionEnvironment", "BenchmarkRun"}));
  int runs = 0;
  for (const auto& entry : fs::directory_iterator(dir / "manifests" / "BenchmarkRun")) {
    json run = evidence::read_manifest_file(entry.path().string());
    ++runs;
    EXPECT_EQ(digest_kind[run["spec"]["workloadDigest"]], "WorkloadCase");
    EXPECT_EQ(digest_kind[run["spec"]["implementationDigest"]], "ImplementationRevision");
    EXPECT_EQ(digest_kind[run["spec"]["protocolDigest"]], "BenchmarkProtocol");
    EXPECT_EQ(digest_kind[run["spec"]["environmentDigest"]], "ExecutionEnvironment");
    EXPECT_EQ(run["spec"]["status"], "passed");
    EXPECT_EQ(run["spec"]["timing"]["samples"], 6);
    // the raw samples file exists and matches its digest
    const std::string uri = run["spec"]["timing"]["rawSamples"]["uri"];
    EXPECT_EQ("sha256:" + evidence::sha256_hex(evidence::read_file_bytes((dir / uri).string())),
              run["spec"]["timing"]["rawSamples"]["digest"]);
  }
  EXPECT_EQ(runs, 2);

  // Store rows.
  auto store = store::Store::open("sqlite:" + (dir / "kindex.db").string());
  json counts = store->counts();
  EXPECT_EQ(counts["benchmark_runs"], 2);
  EXPECT_GE(counts["run_samples"].get<int>(), 1);
  EXPECT_TRUE(fs::exists(dir / "results.json"));
  fs::remove_all(dir);
}

TEST(Pipeline, SelectsWorkloadsByNameIndexAndSize) {
  auto problems = resolve_problems("gqa_paged_decode_h32_kv4_d128_ps1");
  ASSERT_EQ(problems.size(), 1u);
  const auto& p = problems[0];
  EXPECT_EQ(select_workloads(p, "all").size(), p.workloads.size());
  auto small = select_workloads(p, "small");
  EXPECT_FALSE(small.empty());
  EXPECT_LT(small.size(), p.workloads.size());
  auto picked = select_workloads(p, "0-2,5");
  ASSERT_EQ(picked.size(), 4u);
  EXPECT_EQ(picked[3], &p.workloads[5]);
  auto by_uuid = select_workloads(p, p.workloads[7].uuid.substr(0, 12));
  ASSERT_EQ(by_uuid.size(), 1u);
  EXPECT_EQ(by_uuid[0], &p.workloads[7]);
  for (const char* bad : {"99999", "3-1", "zzzz-not-a-uuid", "1,,2", "1-x"}) {
    try {
      select_workloads(p, bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.field(), "--workloads") << bad;
    }
  }
  try {
    resolve_problems("no_such_problem");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.field(), "--problem");
    EXPECT_EQ(e.value(), "no_such_problem");
  }
}

}  // namespace kindex::runner

namespace kindex::runner {

// The GPU shape of the records (environment, device protocol, SOL score fields) validates too: a CPU-path report
// relabelled as an H200 run goes through the same writers.
TEST(Pipeline, GpuShapedRecordsAreValidManifests) {
  auto dir = test::scratch_dir("gpu-shaped");
  auto problem = catalog::builtin_problem("gqa_paged_decode_h24_kv4_d128_ps64");
  std::vector<WorkItem> items = {{&problem.definition, &problem.workloads.at(3)}};
  BenchOptions o = test::quick_options({"cpu-reference"}, 2);
  BenchReport report = run_bench(items, o);
  ASSERT_EQ(report.results.size(), 1u);
  ASSERT_EQ(report.results[0].status, RunStatus::passed) << report.results[0].message;
  Environment& env = report.environment;
  test::describe_h200(env);
  env.nvcc = "13.0.88";
  env.libraries = {{"cublaslt", "13.0.2"}, {"cupti", "api 130001"}};
  env.clocks_locked = false;
  env.persistence_mode = true;
  env.sm_clock_mhz = 1980;
  RunResult& r = report.results[0];
  r.timed_on_device = true;
  r.timing.timer = r.reference_timing.timer = "cupti_activity";
  r.protocol = {6, 10, 50, true};
  // A solution named by its path, longer than the schema's 200-character titles (an H200 run of a FlashInfer-Bench
  // solution failed so): the titles and descriptions are cut to fit, on a character boundary.
  r.implementation = r.implementation_info.name = "solution:/" + std::string(150, 'd') + "/\u00e9" + std::string(150, 's');
  r.implementation_info.description = std::string(2500, 'x');
  auto written = write_outputs(report, items, {dir.string(), "sqlite:" + (dir / "db" / "k.db").string()});
  EXPECT_EQ(written.runs_recorded, 1);
  int manifests = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir / "manifests")) {
    if (!entry.is_regular_file()) continue;
    json m = evidence::read_manifest_file(entry.path().string());
    EXPECT_NO_THROW(evidence::validate_manifest(m, entry.path().string()));
    if (m["kind"] == "ExecutionEnvironment") {
      EXPECT_EQ(m["spec"]["hardware"]["product"], "NVIDIA H200");
      EXPECT_EQ(m["spec"]["software"]["libraries"]["cublaslt"], "13.0.2");
    }
    if (m["kind"] == "BenchmarkProtocol") {
      EXPECT_EQ(m["spec"]["measurement"]["timer"], "cupti_activity");
    }
    if (m["kind"] == "ImplementationRevision") {
      const std::string title = m["metadata"]["title"];
      EXPECT_EQ(title.substr(0, 160), r.implementation.substr(0, 160));
      EXPECT_TRUE(title.ends_with("\u2026")) << title;
    }
    ++manifests;
  }
  EXPECT_EQ(manifests, 6);
  auto trace = read_lines(dir / "traces" / "gqa_paged_decode_h24_kv4_d128_ps64.jsonl");
  ASSERT_EQ(trace.size(), 1u);
  EXPECT_EQ(trace[0]["evaluation"]["environment"]["hardware"], "NVIDIA_H200");
  fs::remove_all(dir);
}

// An implementation given by a file (a library, a solution) is identified by its bytes in every run's records; the
// digest is computed once per file version (path, size, modification time), so a rewritten file gets its own.
TEST(Pipeline, AFileImplementationIsIdentifiedByItsCurrentBytes) {
  auto dir = test::scratch_dir("file-digest");
  auto problem = catalog::builtin_problem("gqa_paged_decode_h32_kv4_d128_ps1");
  const WorkItem item{&problem.definition, &problem.workloads.at(0)};
  const auto path = dir / "libsolution.so";
  RunResult r = new_run_result(item, "external:" + path.string());
  r.implementation_info.name = r.implementation;
  r.implementation_info.path = path.string();
  r.implementation_info.language = "cuda";
  const Environment env = capture_environment();
  auto source = [&] { return run_records(r, item, env, false).implementation.spec().at("source"); };
  std::ofstream(path, std::ios::binary) << "first version";
  const json first = source();
  EXPECT_EQ(first["contentDigest"], "sha256:" + evidence::sha256_hex("first version"));
  EXPECT_EQ(first["sizeBytes"], 13);
  EXPECT_EQ(source(), first);  // the cached digest, the same
  std::ofstream(path, std::ios::binary | std::ios::trunc) << "the second, longer version";
  const json second = source();
  EXPECT_EQ(second["contentDigest"], "sha256:" + evidence::sha256_hex("the second, longer version"));
  EXPECT_EQ(second["sizeBytes"], 26);
  fs::remove_all(dir);
}

}  // namespace kindex::runner

namespace kindex::runner {

// A bench that is killed keeps what it finished: each run's trace line, manifests and store row are written the
// moment the run is added, before the bench ends (results.json only at the end).
TEST(Pipeline, EachRunIsRecordedTheMomentItEnds) {
  auto dir = test::scratch_dir("per-run");
  const std::string uri = "sqlite:" + (dir / "k.db").string();
  auto problem = catalog::builtin_problem("gqa_paged_decode_h24_kv4_d128_ps64");
  std::vector<WorkItem> items = {{&problem.definition, &problem.workloads.at(0)},
                                 {&problem.definition, &problem.workloads.at(3)}};
  BenchOptions o = test::quick_options({"cpu-reference"});
  RecordWriter writer(items, {dir.string(), uri});
  int seen = 0;
  run_bench(items, o, [&](const RunResult& r, const Environment& env) {
    writer.add(r, env);
    ++seen;
    // Another connection sees the run committed, and the trace line is on disk.
    auto db = store::Store::open(uri);
    EXPECT_EQ(db->counts()["benchmark_runs"].get<int64_t>(), seen);
    EXPECT_EQ(read_lines(dir / "traces" / "gqa_paged_decode_h24_kv4_d128_ps64.jsonl").size(), size_t(seen));
    EXPECT_FALSE(fs::exists(dir / "results.json"));
  });
  EXPECT_EQ(seen, 2);
  EXPECT_EQ(writer.summary().runs_recorded, 2);
  fs::remove_all(dir);
}

}  // namespace kindex::runner
