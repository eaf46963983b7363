// Index speed benchmark: with the KernelIndex slice plus 10,000 generated runs, the operation page (query + HTML,
// in process, over HTTP from one client and from 8 concurrent keep-alive clients), resolve, and /api/records for
// the whole store, p50/p99; and the import of an export of 100,000 generated runs (digests verified as in any
// import). The server keeps answers until the store changes: each HTTP phase starts with an empty cache, and the
// cost of computing an answer is reported in process and as each phase's first request ("cold").
// Imports: an export the size of KernelIndex's public catalog (--catalog-runs generated runs with one measurement
// each: 49,641 rows against the public export's 49,611 digests, half of them rows with a manifest to validate and
// digest, as in the slice) and the stress point of 100,000 runs; each is imported into a fresh store after the
// slice, then imported again.
// Usage: index_bench [--runs 10000] [--catalog-runs 24800] [--import-runs 100000] (0: skip) [--out FILE]
#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <thread>

#include "evidence/digest.hpp"
#include "evidence/keys.hpp"
#include "evidence/manifest.hpp"
#include "store/import.hpp"
#include "store/query.hpp"
#include "store/store.hpp"
#include "web/pages.hpp"
#include "web/server.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

const std::string kOperation = "gqa_paged_decode_h24_kv4_d128_ps64";

// The machine's 1-minute load average (other builds share it; every figure moves with it).
double load_average() {
  std::ifstream in("/proc/loadavg");
  double load = -1;
  in >> load;
  return load;
}

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

json percentiles(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[std::min(v.size() - 1, static_cast<size_t>(q * (v.size() - 1) + 0.5))]; };
  return {{"samples", v.size()}, {"p50_ms", at(0.5)}, {"p90_ms", at(0.9)}, {"p99_ms", at(0.99)}, {"max_ms", v.back()}};
}

// Writes an export (.jsonl) of `runs` generated runs of kOperation's workloads on an H200 environment, spread
// over 40 implementations, every digest and key computed as KernelIndex does.
void generate_export(kindex::store::Store& slice_store, const std::string& path, int runs, int seed) {
  auto op = slice_store.db().query(
      "SELECT o.id, o.semantic_digest FROM operations o WHERE o.name = ?", {kOperation});
  std::string op_id = op.at(0).text(0), op_digest = op.at(0).text(1);
  struct W { std::string id, digest, correctness; };
  std::vector<W> workloads;
  for (const auto& r : slice_store.db().query("SELECT id, workload_digest, manifest FROM workloads WHERE operation_id = ?", {op_id})) {
    json m = json::parse(r.text(2));
    workloads.push_back({r.text(0), r.text(1), kindex::evidence::correctness_key(m["spec"]["correctness"])});
  }
  json protocol = {{"apiVersion", kindex::evidence::kApiVersion}, {"kind", "BenchmarkProtocol"},
                   {"metadata", {{"name", "kindex-bench-generated"}}},
                   {"spec", {{"harness", {{"name", "kindex"}}}, {"measurement", {{"timer", "cupti_activity"}, {"primaryStatistic", "median"}}},
                             {"correctness", {{"reference", "definition reference implementation"}, {"comparator", "flashinfer_bench_eval"}}}}}};
  json environment = {{"apiVersion", kindex::evidence::kApiVersion}, {"kind", "ExecutionEnvironment"},
                      {"metadata", {{"name", "generated-h200"}}},
                      {"spec", {{"hardware", {{"vendor", "nvidia"}, {"product", "NVIDIA H200"}, {"architecture", "sm_90"}}},
                                {"software", {{"cudaToolkit", "13.0"}}}}}};
  std::string protocol_digest = kindex::evidence::make_manifest(protocol).digest;
  std::string env_digest = kindex::evidence::make_manifest(environment).digest;
  std::ofstream out(path);
  std::string project_id = kindex::store::id_from_digest(kindex::evidence::sha256_digest("bench-project"));
  json project = {{"apiVersion", kindex::evidence::kApiVersion}, {"kind", "SoftwareProject"},
                  {"metadata", {{"name", "generated"}}}, {"spec", {{"name", "Generated"}}}};
  out << json{{"table", "projects"}, {"row", {{"id", project_id}, {"slug", "generated"}, {"name", "Generated"}, {"manifest", project}}}}.dump() << "\n";
  std::vector<std::pair<std::string, std::string>> impls;  // id, digest
  for (int i = 0; i < 40; ++i) {
    json m = {{"apiVersion", kindex::evidence::kApiVersion}, {"kind", "ImplementationRevision"},
              {"metadata", {{"name", "generated-" + std::to_string(i)}, {"title", "generated kernel " + std::to_string(i)}}},
              {"spec", {{"projectRevision", {{"version", "v" + std::to_string(i)}}}, {"operation", {{"specDigest", op_digest}}},
                        {"callable", {{"language", "cuda"}}}, {"licensing", json::object()},
                        {"support", {{"hardwareArchitectures", {"sm_90"}}, {"dtypes", {"bf16", "fp32", "int32"}}}}}}};
    std::string d = kindex::evidence::make_manifest(m).digest;
    std::string id = kindex::store::id_from_digest(kindex::evidence::sha256_digest(op_id + d));
    impls.push_back({id, d});
    out << json{{"table", "implementations"},
                {"row", {{"id", id}, {"projectId", project_id}, {"operationId", op_id}, {"slug", "generated-" + std::to_string(i)},
                         {"implementationDigest", d}, {"language", "cuda"}, {"title", "generated kernel " + std::to_string(i)},
                         {"sourceAvailable", false}, {"installable", false}, {"manifest", m}}}}.dump() << "\n";
  }
  std::mt19937_64 rng(seed);
  std::vector<std::string> run_lines, measurement_lines;
  for (int i = 0; i < runs; ++i) {
    const W& w = workloads[rng() % workloads.size()];
    const auto& [impl_id, impl_digest] = impls[rng() % impls.size()];
    int64_t median = 5000 + static_cast<int64_t>(rng() % 2000000);
    char observed[40];
    std::snprintf(observed, sizeof observed, "2026-%02d-%02dT%02d:%02d:%02d.%03dZ", 1 + i % 12, 1 + i / 12 % 28, i / 336 % 24,
                  i / 8064 % 60, seed % 60, i % 1000);
    json run = {{"apiVersion", kindex::evidence::kApiVersion}, {"kind", "BenchmarkRun"},
                {"metadata", {{"name", "generated-run-" + std::to_string(seed) + "-" + std::to_string(i)}}},
                {"spec", {{"implementationDigest", impl_digest}, {"workloadDigest", w.digest}, {"protocolDigest", protocol_digest},
                          {"environmentDigest", env_digest}, {"status", "passed"}, {"observedAt", observed},
                          {"timing", {{"primaryStatistic", "median"}, {"latencyNs", {{"median", median}}}}}}}};
    std::string run_digest = kindex::evidence::manifest_digest(run);
    std::string ck = kindex::evidence::comparison_key({op_digest, w.digest, protocol_digest, env_digest, w.correctness,
                                                       kindex::evidence::run_metric_key(run)});
    std::string id = kindex::store::id_from_digest(run_digest);
    json row = {{"id", id}, {"runDigest", run_digest}, {"implementationId", impl_id}, {"workloadId", w.id}, {"status", "passed"},
                {"observedAt", observed}, {"hardwareVendor", "nvidia"}, {"hardwareModel", "NVIDIA H200"},
                {"hardwareArchitecture", "sm_90"}, {"protocolKey", protocol_digest}, {"environmentKey", env_digest},
                {"correctnessKey", w.correctness}, {"comparisonKey", ck}, {"primaryMetric", "latency"},
                {"primaryValue", median}, {"primaryUnit", "ns"}, {"reported", true}, {"primaryStatistic", "median"},
                {"sourceNative", false}, {"environmentSummary", "generated · H200"},
                {"manifest", {{"run", run}, {"protocol", protocol}, {"environment", environment}}}};
    out << json{{"table", "benchmark_runs"}, {"row", row}}.dump() << "\n";
    measurement_lines.push_back(json{{"table", "measurements"},
                                     {"row", {{"id", kindex::store::id_from_digest(kindex::evidence::sha256_digest(id + "m"))},
                                              {"runId", id}, {"metric", "latency"}, {"statistic", "median"}, {"unit", "ns"},
                                              {"value", median}}}}.dump());
  }
  for (const auto& l : measurement_lines) out << l << "\n";
}

}  // namespace

int run(int argc, char** argv);

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "index_bench: " << e.what() << "\n";
    return 2;
  }
}

int run(int argc, char** argv) {
  int runs = 10000, catalog_runs = 24800, import_runs = 100000;
  std::string out_path = "results/index/index_bench.json";
  bool keep = false;  // --keep 1: leave the stores in the temporary directory (for profiling)
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--keep") keep = std::atoi(argv[i + 1]) != 0;
    if (a == "--runs") runs = std::atoi(argv[i + 1]);
    else if (a == "--import-runs") import_runs = std::atoi(argv[i + 1]);
    else if (a == "--catalog-runs") catalog_runs = std::atoi(argv[i + 1]);
    else if (a == "--out") out_path = argv[i + 1];
  }
  const std::string slice = std::string(KINDEX_TEST_DATA_DIR) + "/kernelindex/export-slice-gqa.jsonl.zst";
  fs::path dir = fs::temp_directory_path() / ("kindex-index-bench-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  json result = {{"machine", {{"cpus", std::thread::hardware_concurrency()}, {"load_average_at_start", load_average()}}},
                 {"operation", kOperation}};

  // 1. The slice plus `runs` generated runs in a SQLite file.
  auto store = kindex::store::Store::open((dir / "index.db").string());
  auto t = Clock::now();
  kindex::store::import_files(*store, {slice});
  result["slice_import_ms"] = ms_since(t);
  std::string gen = (dir / "generated.jsonl").string();
  generate_export(*store, gen, runs, 1);
  t = Clock::now();
  auto rep = kindex::store::import_files(*store, {gen});
  result["generated_runs"] = rep.inserted["benchmark_runs"];
  result["generated_import_ms"] = ms_since(t);
  result["store_counts"] = store->counts();

  json base = kindex::store::operation_view(*store, kOperation);
  std::vector<json> workloads(base["workloads"].begin(), base["workloads"].end());
  std::vector<double> page, resolve;
  std::mt19937 rng(7);
  for (int i = 0; i < 300; ++i) {
    const json& w = workloads[rng() % workloads.size()];
    auto s = Clock::now();
    std::string html = kindex::web::operation_page(kindex::store::operation_view(*store, kOperation, w["id"]));
    page.push_back(ms_since(s));
    if (html.size() < 1000) return 1;
  }
  for (int i = 0; i < 1000; ++i) {
    const json& w = workloads[rng() % workloads.size()];
    kindex::store::ResolveQuery q{kOperation, {}, "bf16", "H200"};
    for (const auto& [k, v] : w["axes"].items()) q.axes[k] = v.get<int64_t>();
    auto s = Clock::now();
    json r = kindex::store::resolve(*store, q);
    resolve.push_back(ms_since(s));
    if (r["exact"].is_null()) return 1;
  }
  result["operation_page_in_process"] = percentiles(page);
  result["resolve_in_process"] = percentiles(resolve);

  // Over HTTP on loopback (server in this process, its own threads).
  kindex::web::ServerOptions o;
  o.port = 0;
  o.requests_per_minute = 1000000;
  kindex::web::IndexServer server(*store, o);
  int port = server.bind();
  std::thread th([&] { server.listen(); });
  httplib::Client c("127.0.0.1", port);
  std::vector<double> http_page, http_resolve;
  for (int i = 0; i < 300; ++i) {
    const json& w = workloads[rng() % workloads.size()];
    auto s = Clock::now();
    auto r = c.Get(("/operations/" + kOperation + "?workload=" + w["id"].get<std::string>()).c_str());
    http_page.push_back(ms_since(s));
    if (!r || r->status != 200) return 1;
  }
  for (int i = 0; i < 1000; ++i) {
    const json& w = workloads[rng() % workloads.size()];
    std::string q = "/api/resolve?operation=" + kOperation + "&gpu=H200";
    for (const auto& [k, v] : w["axes"].items()) q += "&" + k + "=" + v.dump();
    auto s = Clock::now();
    auto r = c.Get(q.c_str());
    http_resolve.push_back(ms_since(s));
    if (!r || r->status != 200) return 1;
  }
  server.stop();
  th.join();
  // The server keeps answers until the store changes, so each phase below starts a fresh server (an empty cache):
  // its first requests are computed, the rest mostly answered from the cache. "cold" is the uncached cost.
  auto fresh_server = [&](auto&& phase) {
    kindex::web::IndexServer srv(*store, o);
    int p = srv.bind();
    std::thread t([&] { srv.listen(); });
    phase(p);
    srv.stop();
    t.join();
  };
  // The whole store's records, as the records page and `kindex records` without an operation ask for them: in
  // process (always computed) and over HTTP (the first request computed, then cached).
  std::vector<double> records_computed, http_records;
  for (int i = 0; i < 5; ++i) {
    auto s = Clock::now();
    std::string body = kindex::store::records(*store).dump();
    records_computed.push_back(ms_since(s));
    if (body.size() < 100) return 1;
  }
  fresh_server([&](int p) {
    httplib::Client rc("127.0.0.1", p);
    for (int i = 0; i < 20; ++i) {
      auto s = Clock::now();
      auto r = rc.Get("/api/records");
      http_records.push_back(ms_since(s));
      if (!r || r->status != 200) std::exit(1);
    }
  });
  // 8 clients at once, each on its own keep-alive connection, each asking for 100 operation pages of random
  // workloads (20 distinct pages: the first request for each is computed).
  std::vector<std::vector<double>> per_client(8);
  double concurrent_s = 0;
  fresh_server([&](int p) {
    std::vector<std::thread> clients;
    auto concurrent_start = Clock::now();
    for (int k = 0; k < 8; ++k) {
      clients.emplace_back([&, k] {
        httplib::Client kc("127.0.0.1", p);
        kc.set_keep_alive(true);
        std::mt19937 krng(100 + k);
        for (int i = 0; i < 100; ++i) {
          const json& w = workloads[krng() % workloads.size()];
          auto s = Clock::now();
          auto r = kc.Get(("/operations/" + kOperation + "?workload=" + w["id"].get<std::string>()).c_str());
          if (!r || r->status != 200) return;
          per_client[k].push_back(ms_since(s));
        }
      });
    }
    for (auto& t : clients) t.join();
    concurrent_s = ms_since(concurrent_start) / 1000;
  });
  std::vector<double> concurrent_page;
  for (const auto& v : per_client) concurrent_page.insert(concurrent_page.end(), v.begin(), v.end());
  if (concurrent_page.size() != 800) return 1;
  result["operation_page_http"] = percentiles(http_page);
  result["resolve_http"] = percentiles(http_resolve);
  result["records_whole_store_in_process"] = percentiles(records_computed);
  result["records_whole_store_http"] = percentiles(http_records);
  result["records_whole_store_http"]["cold_ms"] = http_records.front();
  result["operation_page_http_8_keepalive_clients"] = percentiles(concurrent_page);
  result["operation_page_http_8_keepalive_clients"]["pages_per_s"] = 800 / concurrent_s;

  // 2. Imports of generated runs into a fresh store (after the slice they refer to), then the same file again.
  auto import_point = [&](const std::string& name, int n, int seed) {
    if (n <= 0) return;
    auto fresh = kindex::store::Store::open((dir / (name + ".db")).string());
    kindex::store::import_files(*fresh, {slice});
    std::string file = (dir / (name + ".jsonl")).string();
    generate_export(*fresh, file, n, seed);
    auto t0 = Clock::now();
    auto rep = kindex::store::import_files(*fresh, {file});
    result[name] = {{"runs", rep.inserted["benchmark_runs"]}, {"rows", rep.total_inserted()},
                    {"seconds", ms_since(t0) / 1000}, {"digests_verified", true}};
    t0 = Clock::now();
    auto again = kindex::store::import_files(*fresh, {file});
    result[name + "_reimport"] = {{"inserted", again.total_inserted()}, {"seconds", ms_since(t0) / 1000}};
    fresh.reset();
    if (!keep) {
      fs::remove((dir / (name + ".db")).string());
      fs::remove(file);
    }
  };
  import_point("catalog_import", catalog_runs, 3);
  import_point("import", import_runs, 2);
  result["machine"]["load_average_at_end"] = load_average();
  result["targets"] = {{"operation_page_p99_ms", 50}, {"operation_page_8_clients_p99_ms", 50}, {"resolve_ms", 5},
                       {"records_whole_store_ms", 100}, {"import_catalog_s", 15}, {"reimport_catalog_s", 10}};
  result["met"] = {{"operation_page", result["operation_page_http"]["p99_ms"].get<double>() < 50},
                   {"operation_page_8_clients", result["operation_page_http_8_keepalive_clients"]["p99_ms"].get<double>() < 50},
                   {"resolve", result["resolve_in_process"]["p99_ms"].get<double>() < 5},
                   {"records_whole_store_cached", result["records_whole_store_http"]["p50_ms"].get<double>() < 100},
                   {"records_whole_store_computed", result["records_whole_store_in_process"]["p50_ms"].get<double>() < 100}};
  if (result.contains("catalog_import")) {
    result["met"]["import_catalog"] = result["catalog_import"]["seconds"].get<double>() < 15;
    result["met"]["reimport_catalog"] = result["catalog_import_reimport"]["seconds"].get<double>() < 10;
  }
  if (result.contains("import")) {  // the stress point, held to the same targets
    result["met"]["import_100k"] = result["import"]["seconds"].get<double>() < 15;
    result["met"]["reimport_100k"] = result["import_reimport"]["seconds"].get<double>() < 10;
  }
  if (keep) {
    std::cerr << "stores kept in " << dir << "\n";
  } else {
    fs::remove_all(dir);
  }
  fs::create_directories(fs::path(out_path).parent_path());
  std::ofstream(out_path) << result.dump(2) << "\n";
  std::cout << result.dump(2) << "\n";
  return 0;
}
