// Serving evidence: the public serving export slice and KernelIndex's serving example manifests imported (every
// digest and restated column checked), exported and verified, and the serving views (Pareto fronts, resolve-serving)
// checked against values computed here from the export's raw rows.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "core/error.hpp"
#include "evidence/digest.hpp"
#include "evidence/export.hpp"
#include "evidence/reader.hpp"
#include "store/export.hpp"
#include "store/import.hpp"
#include "store/query.hpp"
#include "store/store.hpp"
#include "support/paths.hpp"

namespace kindex::store {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string serving_slice() { return test::data_dir() + "/kernelindex/export-slice-serving.jsonl.zst"; }
std::string examples() { return test::data_dir() + "/kernelindex/examples"; }

std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() / ("kindex-serving-" + std::to_string(::getpid()) + "-" + name)).string();
}

// The slice's lines, decompressed, to tamper with.
std::vector<json> slice_lines() {
  std::vector<json> out;
  evidence::for_each_export_line(serving_slice(), [&](std::string_view text, std::size_t) { out.push_back(json::parse(text)); });
  return out;
}
std::string write_lines(const std::string& name, const std::vector<json>& lines) {
  const std::string path = temp_path(name);
  std::ofstream out(path);
  for (const auto& l : lines) out << l.dump() << "\n";
  return path;
}
json& first_row(std::vector<json>& lines, const std::string& table) {
  for (auto& l : lines)
    if (l["table"] == table) return l["row"];
  throw std::runtime_error("no row of " + table);
}

TEST(Serving, UpstreamExampleDigestsArePinned) {
  // The digests KernelIndex's own examples state for the manifests they name (computed by KernelIndex).
  const std::map<std::string, std::string> pinned = {
      {"model-revision.yaml", "sha256:a8bee6f772dc4b4c35b199f27fe3e40f7b3b2266dc57e0da432a047a5d52e22d"},
      {"serving-configuration.yaml", "sha256:8951b4b4c5edbcb2708cacf29f9936bdbc18584aae204ea710c30921c060a5ea"},
      {"serving-workload.yaml", "sha256:48d84537ce32c83fade011934806f89f1585710e0235921a168a7fed96bb880d"},
      {"serving-stack-revision.yaml", "sha256:f00ca9e39835e6c1fa6e95d16904fbf633492ea3c61c63774943f0d83fb10717"}};
  for (const auto& [file, digest] : pinned)
    EXPECT_EQ(evidence::manifest_digest(evidence::read_manifest_file(examples() + "/" + file)), digest) << file;
}

TEST(Serving, SliceImportsEveryServingRowNothingSkippedAndReimportsNothing) {
  auto store = Store::open(":memory:");
  const ImportReport first = import_files(*store, {serving_slice()});
  const std::map<std::string, int64_t> expected = {{"serving_runs", 145},          {"serving_measurements", 145},
                                                   {"serving_configurations", 130}, {"serving_stack_revisions", 71},
                                                   {"serving_workloads", 17},       {"model_revisions", 6},
                                                   {"sources", 4}};
  for (const auto& [table, n] : expected) EXPECT_EQ(first.inserted.at(table), n) << table;
  EXPECT_TRUE(first.warnings.empty()) << first.warnings.front();
  const json counts = store->counts();
  const ImportReport second = import_files(*store, {serving_slice()});
  EXPECT_EQ(second.total_inserted(), 0);
  EXPECT_EQ(store->counts(), counts);
  EXPECT_EQ(store->integrity_check(), "ok");
}

TEST(Serving, SliceVerifiesAndRoundTripsThroughExport) {
  const evidence::VerifyReport slice = evidence::verify_export(serving_slice());
  EXPECT_TRUE(slice.ok()) << slice.mismatches.front();
  EXPECT_EQ(slice.columns.at("serving_runs.runDigest").matched, 145u);
  EXPECT_EQ(slice.columns.at("serving_runs.manifest.spec.configurationDigest").matched, 145u);
  EXPECT_EQ(slice.columns.at("serving_configurations.manifest.spec.stackDigest").matched, 130u);
  EXPECT_EQ(slice.columns.at("serving_measurements.value").matched, 145u);
  EXPECT_EQ(slice.columns.at("serving_runs.totalAccelerators").matched, 145u);
  EXPECT_TRUE(slice.skipped_tables.empty());

  auto store = Store::open(":memory:");
  import_files(*store, {serving_slice()});
  const std::string out = temp_path("roundtrip.jsonl.zst");
  const json written = export_store(*store, out);
  EXPECT_EQ(written["serving_runs"], 145);
  EXPECT_TRUE(evidence::verify_export(out).ok());
  auto again = Store::open(":memory:");
  import_files(*again, {out});
  EXPECT_EQ(again->counts(), store->counts());
  EXPECT_EQ(serving_view(*again, "mlperf-llama2-70b", "h200"), serving_view(*store, "mlperf-llama2-70b", "h200"));
  fs::remove(out);
}

// Each kind of tampering is refused naming the column, and the store stays as it was.
TEST(Serving, RowsThatDisagreeWithTheirManifestsAreRefusedNamingTheColumn) {
  struct Case {
    std::string name, field;
    std::function<void(std::vector<json>&)> tamper;
  };
  const std::vector<Case> cases = {
      {"measured value inside the run manifest", "runDigest",
       [](auto& l) { first_row(l, "serving_runs")["manifest"]["spec"]["measurements"][0]["value"] = 1.5; }},
      {"restated accelerator", "acceleratorModel",
       [](auto& l) { first_row(l, "serving_runs")["acceleratorModel"] = "NVIDIA H200"; }},
      {"restated accelerator count", "totalAccelerators",
       [](auto& l) { first_row(l, "serving_runs")["totalAccelerators"] = 64; }},
      {"measurement row", "value", [](auto& l) { first_row(l, "serving_measurements")["value"] = 1.0; }},
      {"workload digest", "workloadDigest",
       [](auto& l) { first_row(l, "serving_workloads")["manifest"]["spec"]["streaming"] = false; }},
      {"configuration filed under another stack", "manifest.spec.stackDigest",
       [](auto& l) {
         std::string other;
         for (const auto& x : l)
           if (x["table"] == "serving_stack_revisions") other = x["row"]["id"];
         first_row(l, "serving_configurations")["stackRevisionId"] = other;
       }},
      {"run naming a missing model", "modelRevisionId",
       [](auto& l) { first_row(l, "serving_runs")["modelRevisionId"] = "01a00000-0000-7000-8000-000000000000"; }},
      {"a manifest of the wrong kind", "manifest.kind",
       [](auto& l) {
         json& model = first_row(l, "model_revisions");
         model["manifest"] = first_row(l, "serving_workloads")["manifest"];
         model["modelDigest"] = evidence::manifest_digest(model["manifest"]);
       }},
  };
  auto store = Store::open(":memory:");
  import_files(*store, {examples()});
  const json before = store->counts();
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto lines = slice_lines();
    c.tamper(lines);
    const std::string path = write_lines("tampered.jsonl", lines);
    try {
      import_files(*store, {path});
      ADD_FAILURE() << "imported";
    } catch (const Error& e) {
      EXPECT_EQ(e.field(), c.field) << e.what();
    }
    EXPECT_EQ(store->counts(), before);
    fs::remove(path);
  }
}

TEST(Serving, ExampleManifestsBecomeAServingRunWithItsMeasurements) {
  auto store = Store::open(":memory:");
  const ImportReport rep = import_files(*store, {examples()});
  EXPECT_EQ(rep.inserted.at("serving_runs"), 1);
  EXPECT_EQ(rep.inserted.at("serving_measurements"), 2);
  EXPECT_EQ(import_files(*store, {examples()}).total_inserted(), 0);
  const std::string digest = evidence::manifest_digest(evidence::read_manifest_file(examples() + "/serving-run.yaml"));
  const json v = serving_run_view(*store, digest);
  EXPECT_EQ(v["run"]["runDigest"], digest);
  EXPECT_EQ(v["run"]["gpu"], "NVIDIA B200");
  EXPECT_EQ(v["run"]["accelerators"], 2);
  EXPECT_EQ(v["run"]["outputTokensPerSecond"], 14250.0);
  EXPECT_EQ(v["run"]["outputTokensPerSecondPerAccelerator"], 7125.0);
  EXPECT_EQ(v["run"]["latency"]["ttft_ms"]["ms"], 1480.0);  // measured, not the SLO's 2000
  EXPECT_EQ(v["run"]["latency"]["ttft_ms"]["bound"], false);
  EXPECT_EQ(v["model"]["slug"], "example-meridian-8b");
  // The same rows an export of them gives back, digests intact.
  const std::string out = temp_path("examples.jsonl");
  export_store(*store, out);
  EXPECT_TRUE(evidence::verify_export(out).ok());
  fs::remove(out);
}

// The raw rows of the slice: per run, its model slug, GPU, accelerators, throughput and its workload's p99 TTFT SLO.
struct RawRun {
  std::string id, model, gpu, configuration;
  double accelerators = 0, throughput = 0;
  std::optional<double> ttft_slo;
};
std::vector<RawRun> raw_runs() {
  const evidence::ExportData data = evidence::read_export(serving_slice());
  std::map<std::string, std::string> models;
  std::map<std::string, std::optional<double>> ttft;
  std::map<std::string, double> throughput;
  for (const auto& m : data.rows("model_revisions")) models[m["id"]] = m["slug"];
  for (const auto& w : data.rows("serving_workloads"))
    for (const auto& s : w["manifest"]["spec"].value("slo", json::array()))
      if (s["metric"] == "ttft_ms" && s["statistic"] == "p99") ttft[w["id"]] = s["value"].get<double>();
  for (const auto& m : data.rows("serving_measurements"))
    if (m["metric"] == "output_token_throughput_tps") throughput[m["runId"]] = m["value"].get<double>();
  std::vector<RawRun> out;
  for (const auto& r : data.rows("serving_runs"))
    out.push_back({r["id"], models[r["modelRevisionId"]], r["acceleratorModel"], r["configurationId"],
                   r["totalAccelerators"].get<double>(), throughput[r["id"]], ttft[r["workloadId"]]});
  return out;
}

TEST(Serving, ParetoFrontPerModelAndGpuAgreesWithTheRawRows) {
  auto store = Store::open(":memory:");
  import_files(*store, {serving_slice()});
  const std::string gpu = "NVIDIA H200-SXM-141GB";
  const json v = serving_view(*store, "llama2-70b", gpu);  // a unique part of the model's slug
  EXPECT_EQ(v["model"]["slug"], "mlperf-llama2-70b");
  EXPECT_EQ(v["gpus"], json::array({gpu}));  // exact: not the NVL or the virtualized H200
  std::vector<RawRun> expected;
  for (const auto& r : raw_runs())
    if (r.model == "mlperf-llama2-70b" && r.gpu == gpu) expected.push_back(r);
  ASSERT_EQ(v["points"].size() + v["notPlotted"].size(), expected.size());
  // Plotted: the runs with a TTFT bound (server, interactive); offline runs have none.
  size_t with_slo = 0;
  for (const auto& r : expected) with_slo += r.ttft_slo.has_value();
  EXPECT_EQ(v["points"].size(), with_slo);
  EXPECT_GT(with_slo, 0u);
  EXPECT_FALSE(v["notPlotted"].empty());
  // The front: no plotted point has both lower-or-equal latency and higher throughput per accelerator than a
  // front point, and every point off the front is beaten by one on it.
  std::map<std::string, json> by_id;
  for (const auto& p : v["points"]) by_id[p["id"]] = p;
  auto lat = [](const json& p) { return p["latency"]["ttft_ms"]["ms"].get<double>(); };
  auto tput = [](const json& p) { return p["outputTokensPerSecondPerAccelerator"].get<double>(); };
  std::set<std::string> front(v["front"].begin(), v["front"].end());
  ASSERT_FALSE(front.empty());
  for (const auto& [id, p] : by_id) {
    EXPECT_TRUE(p["latency"]["ttft_ms"]["bound"].get<bool>());  // MLPerf publishes no latency: the SLO bound
    bool beaten = false;
    for (const auto& [other_id, q] : by_id)
      beaten = beaten || (other_id != id && lat(q) <= lat(p) && tput(q) > tput(p));
    EXPECT_EQ(front.count(id) == 0, beaten) << id;
  }
  // TPOT as the latency axis: the same runs (both SLOs are stated for server and interactive).
  EXPECT_EQ(serving_view(*store, "mlperf-llama2-70b", gpu, "tpot")["points"].size(), with_slo);
  EXPECT_THROW(serving_view(*store, "mlperf-llama2-70b", gpu, "e2e"), Error);
  EXPECT_THROW(serving_view(*store, "mlperf", gpu), Error);          // several models match
  EXPECT_THROW(serving_view(*store, "no-such-model", gpu), Error);
  EXPECT_THROW(serving_view(*store, "mlperf-llama2-70b", "TPU v5"), Error);
}

TEST(Serving, ResolveServingPicksTheHighestThroughputPerGpuWithinTheSlo) {
  auto store = Store::open(":memory:");
  import_files(*store, {serving_slice()});
  const std::vector<RawRun> raw = raw_runs();
  for (double limit : {100.0, 450.0, 2000.0}) {
    SCOPED_TRACE(limit);
    const RawRun* best = nullptr;
    for (const auto& r : raw) {
      if (r.model != "mlperf-llama2-70b" || r.gpu.find("B200") == std::string::npos || !r.ttft_slo || *r.ttft_slo > limit) continue;
      if (!best || r.throughput / r.accelerators > best->throughput / best->accelerators) best = &r;
    }
    const json answer = resolve_serving(*store, {"mlperf-llama2-70b", "B200", {{"ttft", limit}}});
    if (!best) {
      EXPECT_TRUE(answer["best"].is_null());
      EXPECT_TRUE(answer["configurations"].empty());
      continue;
    }
    ASSERT_TRUE(answer["best"].is_object());
    EXPECT_EQ(answer["best"]["id"], best->id);
    EXPECT_DOUBLE_EQ(answer["best"]["outputTokensPerSecondPerAccelerator"].get<double>(), best->throughput / best->accelerators);
    EXPECT_LE(answer["best"]["latency"]["ttft_ms"]["ms"].get<double>(), limit);
    std::set<std::string> configurations;
    for (const auto& c : answer["configurations"]) EXPECT_TRUE(configurations.insert(c["configurationId"]).second);
  }
  // No SLO: every valid run with a throughput counts, offline ones included.
  const json any = resolve_serving(*store, {"mlperf-llama2-70b", "B200", {}});
  EXPECT_EQ(any["excluded"]["noLatencyForTheSlo"], 0);
  EXPECT_THROW(resolve_serving(*store, {"mlperf-llama2-70b", "B200", {{"ttft", -1}}}), Error);
  EXPECT_THROW(resolve_serving(*store, {"mlperf-llama2-70b", "B200", {{"e2e", 10}}}), Error);
}

TEST(Serving, OverviewListsEveryModelAndGpu) {
  auto store = Store::open(":memory:");
  EXPECT_TRUE(serving_overview(*store)["modelsAndGpus"].empty());
  import_files(*store, {serving_slice()});
  const json o = serving_overview(*store);
  EXPECT_EQ(o["counts"]["serving_runs"], 145);
  int64_t runs = 0;
  for (const auto& p : o["modelsAndGpus"]) runs += p["runs"].get<int64_t>();
  EXPECT_EQ(runs, 145);
  EXPECT_EQ(o["modelsAndGpus"].size(), 45u);
}

}  // namespace
}  // namespace kindex::store
