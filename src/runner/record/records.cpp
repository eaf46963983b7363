// A run's KernelIndex records: the six manifests (environment, operation, workload, implementation, protocol,
// run) with their digests and the raw samples, and the sink that writes them under --out.
#include "runner/record/records.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <tuple>

#include "runner/record/sinks.hpp"
#include "catalog/builtin.hpp"
#include "catalog/inputs.hpp"
#include "evidence/digest.hpp"
#include "problem_manifest/problem_manifest.hpp"

namespace kindex::runner {

namespace fs = std::filesystem;
using nlohmann::json;

// ---------------------------------------------------------------------------------------------------------------
// KernelIndex manifests

namespace {

std::string manifest_name(std::string s) {
  std::string out;
  for (char c : s) {
    c = char(std::tolower(static_cast<unsigned char>(c)));
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-';
    out += ok ? c : '-';
  }
  while (!out.empty() && (out.front() == '-' || out.front() == '.')) out.erase(0, 1);
  if (out.empty()) out = "kindex";
  return out.substr(0, 200);
}

bool is_hex40(const std::string& s) {
  return s.size() == 40 && std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit(c) && !std::isupper(c); });
}

evidence::Manifest implementation_manifest(const ImplementationInfo& info, const catalog::Definition& def,
                                           const std::string& operation_digest, const Environment& env) {
  evidence::ImplementationRevisionModel m;
  m.metadata.name = manifest_name(info.name + "-" + def.name);
  m.metadata.title = evidence::clip_text(info.name + " · " + def.name, evidence::kMaxTitleChars);
  m.metadata.description = evidence::clip_text(info.description, evidence::kMaxDescriptionChars);
  m.version = info.version.empty() ? env.kindex_version : info.version;
  if (info.path.empty() && is_hex40(env.kindex_commit)) m.commit = env.kindex_commit;
  m.operation_spec_digest = operation_digest;
  m.language = info.language;
  m.symbol = info.symbol;
  m.interface = !info.interface.empty() ? info.interface : info.path.empty() ? "kindex_internal" : "kindex_c_abi";
  if (info.on_device)
    m.hardware_architectures = {"sm_90", "sm_100"};
  else
    m.hardware_architectures = {"x86_64"};
  if (env.has_gpu && info.on_device) m.products_tested = {env.gpu_name};
  std::set<std::string> dtypes;
  for (const auto& t : def.inputs) dtypes.insert(problem_manifest::short_dtype(std::string(dtype_name(t.dtype))));
  m.dtypes.assign(dtypes.begin(), dtypes.end());
  if (!info.path.empty()) {
    // An external library or a solution file is identified by its bytes.
    const FileDigest d = file_digest(info.path);
    m.source_content_digest = d.digest;
    m.source_file_name = fs::path(info.path).filename().string();
    m.source_size_bytes = d.size;
  } else {
    m.license_declared = "Apache-2.0";
  }
  return evidence::to_manifest(m);
}

evidence::Manifest protocol_manifest(const RunResult& r, const Environment& env, bool prefer_cupti) {
  const bool fib = r.source == "flashinfer-bench";
  evidence::BenchmarkProtocolModel m;
  std::string timer = r.timing.timer;
  if (timer.empty()) timer = r.timed_on_device ? (prefer_cupti ? "cupti_activity" : "cuda_events") : "wall_clock";
  m.metadata.name = manifest_name("kindex-bench-" + r.source + "-" + timer);
  m.metadata.title = evidence::clip_text("kindex bench, " + r.source + " protocol (" + timer + ")", evidence::kMaxTitleChars);
  m.harness_name = "kindex bench";
  m.harness_version = env.kindex_version;
  if (is_hex40(env.kindex_commit)) m.harness_commit = env.kindex_commit;
  m.timer = timer;
  m.synchronization = r.timed_on_device ? "device_sync" : "host_call";
  m.compile_included = false;
  m.setup_included = false;
  m.warmup_iterations = r.protocol.untimed + r.protocol.warmup;
  m.measured_iterations = r.protocol.iterations;
  m.input_regeneration = fib ? "per_trial" : (r.timed_on_device ? "fresh_addresses_per_iteration" : "per_trial");
  m.outlier_policy = "none";
  m.primary_statistic = "median";
  m.correctness_reference =
      "kindex reference implementation (CPU fp64 / upstream rounding points, or the GPU "
      "reference checked against it)";
  m.correctness_comparator = r.comparator;
  m.clocks_locked = env.clocks_locked;
  m.persistence_mode = env.persistence_mode;
  m.comparability_family =
      std::string("kindex_") + (fib ? "flashinfer_bench" : "sol_execbench") + (r.timed_on_device ? "_device" : "_host");
  std::ostringstream notes;
  if (r.timed_on_device)
    notes << "cold L2 (a 2 x L2 buffer zeroed before every call), " << r.protocol.untimed << " untimed + "
          << r.protocol.warmup << " warm-up calls, " << r.protocol.iterations
          << " timed; per-call span = first GPU activity start to last GPU activity end; median per trial, "
          << (fib ? "mean of 3 trial medians as the source reports it" : "one trial");
  else
    notes << "host wall clock around each call, " << r.protocol.untimed << " untimed + " << r.protocol.warmup
          << " warm-up calls, " << r.protocol.iterations << " timed (the CPU path)";
  m.comparability_notes = notes.str();
  return evidence::to_manifest(m);
}

evidence::Manifest environment_manifest(const Environment& env) {
  evidence::ExecutionEnvironmentModel m;
  if (env.has_gpu) {
    m.metadata.name = manifest_name(env.gpu_name + "-" + env.driver_version + "-cuda-" + env.cuda_runtime_version);
    m.metadata.title = evidence::clip_text(
        env.gpu_name + " (driver " + env.driver_version + ", CUDA " + env.cuda_runtime_version + ")", evidence::kMaxTitleChars);
    m.vendor = "nvidia";
    m.product = env.gpu_name;
    m.architecture = env.architecture;
    m.memory_bytes = env.memory_bytes;
    m.count = 1;
    m.driver = env.driver_version;
    m.cuda_toolkit = env.cuda_toolkit;
    m.clocks_locked = env.clocks_locked;
    m.persistence_mode = env.persistence_mode;
    m.ecc_enabled = env.ecc_enabled;
    m.power_limit_watts = env.power_limit_watts;
  } else {
    const std::string& cpu = env.cpu_model;
    m.metadata.name = manifest_name("cpu-" + cpu + "-" + std::to_string(env.cpu_threads) + "-threads");
    m.metadata.title = evidence::clip_text(cpu + ", " + std::to_string(env.cpu_threads) + " threads (no GPU)", evidence::kMaxTitleChars);
    m.vendor =
        cpu.find("AMD") != std::string::npos ? "amd" : (cpu.find("Intel") != std::string::npos ? "intel" : "cpu");
    m.product = cpu.empty() ? "unknown CPU" : cpu;
    m.architecture = "x86_64";
    m.count = 1;
  }
  m.operating_system = env.operating_system;
  m.kernel = env.kernel;
  m.compiler = (env.nvcc.empty() ? "" : "nvcc " + env.nvcc + ", ") + env.host_compiler;
  m.libraries = env.libraries;
  m.libraries["kindex"] = env.kindex_version;
  return evidence::to_manifest(m);
}

int64_t ns(double v) { return int64_t(std::llround(std::max(0.0, v))); }

evidence::Manifest run_manifest(const RunResult& r, const std::string& impl_digest, const std::string& workload_digest,
                                const std::string& protocol_digest, const std::string& environment_digest,
                                const Environment& env, const std::string& samples_uri,
                                const std::string& samples_digest) {
  evidence::BenchmarkRunModel m;
  m.metadata.name = manifest_name("kindex-" + r.implementation.substr(0, 60) + "-" + r.definition + "-" +
                                  r.workload_uuid.substr(0, 8));
  m.metadata.title = evidence::clip_text(r.implementation + " · " + r.definition + " · " + r.workload_uuid, evidence::kMaxTitleChars);
  if (!r.message.empty()) m.metadata.description = evidence::clip_text(r.message, evidence::kMaxDescriptionChars);
  m.metadata.labels = r.labels;
  m.implementation_digest = impl_digest;
  m.workload_digest = workload_digest;
  m.protocol_digest = protocol_digest;
  m.environment_digest = environment_digest;
  m.status = std::string(status_name(r.status));
  if (r.rounds_run > 0 && (r.status == RunStatus::passed || r.status == RunStatus::incorrect_numerical)) {
    m.comparator = r.comparator;
    if (std::isfinite(r.max_abs_error)) m.maximum_absolute_error = r.max_abs_error;
    if (std::isfinite(r.max_rel_error)) m.maximum_relative_error = r.max_rel_error;
    if (std::isfinite(r.matched_ratio)) m.matched_ratio = std::clamp(r.matched_ratio, 0.0, 1.0);
  }
  auto measure = [&](const char* metric, const char* unit, const char* statistic, double value,
                     std::optional<int64_t> count = std::nullopt) {
    if (std::isfinite(value)) m.measurements.push_back({metric, unit, statistic, value, count});
  };
  if (r.status == RunStatus::passed && r.timing.summary) {
    const auto& t = *r.timing.summary;
    const auto& s = t.pooled;
    m.primary_statistic = "median";
    m.samples = int64_t(s.count);
    m.latency_ns.median = ns(s.median);
    m.latency_ns.mean = ns(s.mean);
    m.latency_ns.p05 = ns(s.p05);
    m.latency_ns.p95 = ns(s.p95);
    m.latency_ns.minimum = ns(s.minimum);
    m.latency_ns.maximum = ns(s.maximum);
    m.latency_ns.mad = ns(s.mad);
    m.latency_ns.confidence95 = std::make_pair(ns(s.ci95_low), ns(s.ci95_high));
    m.raw_samples_uri = samples_uri;
    m.raw_samples_digest = samples_digest;
    measure("latency", "ns", "mean_of_trial_medians", t.latency, int64_t(s.count));
    if (r.reference_timing.summary)
      measure("reference_latency", "ns", "mean_of_trial_medians", r.reference_timing.summary->latency);
    if (r.speedup) measure("speedup_factor", "ratio", "value", *r.speedup);
    if (r.headroom) measure("floor_headroom_v1", "ns", "estimate", r.headroom->floor_s * 1e9);
    if (r.kindex_floor) measure("floor_kindex", "ns", "estimate", r.kindex_floor->floor_s * 1e9);
    if (r.headroom_ratio) measure("ratio_to_headroom_v1_floor", "ratio", "value", *r.headroom_ratio);
    if (r.kindex_ratio) measure("ratio_to_kindex_floor", "ratio", "value", *r.kindex_ratio);
    if (r.sol_score) measure("sol_score", "score", "value", *r.sol_score);
    if (r.t_sol_s) measure("t_sol", "ns", "estimate", *r.t_sol_s * 1e9);
    if (r.t_baseline_s) measure("t_baseline", "ns", "reported", *r.t_baseline_s * 1e9);
    if (env.has_gpu && env.sm_clock_mhz > 0) measure("sm_clock", "mhz", "at_start", env.sm_clock_mhz);
  }
  m.observed_at = r.observed_at;
  return evidence::to_manifest(m);
}

std::string digest_hex(const std::string& digest) { return digest.substr(digest.find(':') + 1); }

}  // namespace

// Cached: the records of every run of a library name its bytes (libkindex.so, 12 MB, hashed for each of the main
// job's runs and by each sink was ~100 ms a run on the H200).
FileDigest file_digest(const std::string& path) {
  static std::mutex mutex;
  static std::map<std::tuple<std::string, uintmax_t, fs::file_time_type::rep>, FileDigest> cache;
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  const auto mtime = ec ? fs::file_time_type{} : fs::last_write_time(path, ec);
  const auto key = std::make_tuple(path, ec ? uintmax_t(0) : size, mtime.time_since_epoch().count());
  std::lock_guard<std::mutex> lock(mutex);
  if (!ec)
    if (auto it = cache.find(key); it != cache.end()) return it->second;
  std::ifstream in(path, std::ios::binary);
  std::string bytes(ec ? 0 : size_t(size), '\0');
  if (!bytes.empty()) in.read(bytes.data(), std::streamsize(bytes.size()));
  bytes.resize(size_t(std::max<std::streamsize>(in.gcount(), 0)));
  FileDigest d{"sha256:" + evidence::sha256_hex(bytes), int64_t(bytes.size())};
  if (!ec) cache[key] = d;
  return d;
}

RunRecords run_records(const RunResult& r, const WorkItem& item, const Environment& environment,
                       bool samples_in_files) {
  const auto& def = *item.definition;
  RunRecords rec;
  auto& env_m = rec.environment;
  auto& op_m = rec.operation;
  auto& wl_m = rec.workload;
  auto& impl_m = rec.implementation;
  auto& proto_m = rec.protocol;
  env_m = environment_manifest(environment);
  op_m = problem_manifest::operation_spec(def);
  wl_m = problem_manifest::workload_case(def, *item.workload, op_m);
  impl_m = implementation_manifest(r.implementation_info, def, op_m.digest, environment);
  proto_m = protocol_manifest(r, environment, r.timing.timer != "cuda_events");
  for (const auto& trial : r.timing.trials_ns) rec.samples.insert(rec.samples.end(), trial.begin(), trial.end());
  if (!rec.samples.empty()) {
    rec.samples_text = json{{"unit", "ns"}, {"trials", r.timing.trials_ns}}.dump() + "\n";
    rec.samples_digest = "sha256:" + evidence::sha256_hex(rec.samples_text);
    rec.samples_uri = samples_in_files ? "samples/" + digest_hex(rec.samples_digest) + ".json"
                                       : "kindex-store:samples/" + digest_hex(rec.samples_digest);
  }
  rec.run = run_manifest(r, impl_m.digest, wl_m.digest, proto_m.digest, env_m.digest, environment, rec.samples_uri,
                         rec.samples_digest);
  return rec;
}

namespace {

// <out>/manifests/<kind>/<hex>.json, each digest written once, and the raw samples under <out>/samples/.
class ManifestSink final : public RunSink {
 public:
  ManifestSink(const std::string& out_dir, OutputSummary& summary) : dir_(out_dir), summary_(summary) {}
  void add(const RunResult& r, const WorkItem& item, const Environment& environment) override {
    const RunRecords rec = run_records(r, item, environment, true);
    if (!rec.samples_uri.empty())
      write_output_file((dir_ / rec.samples_uri).string(), rec.samples_text, summary_.files);
    for (const auto* m : {&rec.environment, &rec.operation, &rec.workload, &rec.implementation, &rec.protocol,
                          &rec.run}) {
      if (!written_.insert(m->digest).second) continue;
      write_output_file((dir_ / "manifests" / m->kind() / (digest_hex(m->digest) + ".json")).string(),
                        m->document.dump(2) + "\n", summary_.files);
    }
  }

 private:
  fs::path dir_;
  OutputSummary& summary_;
  std::set<std::string> written_;  // manifest digests already written
};

}  // namespace

std::unique_ptr<RunSink> make_manifest_sink(const std::string& out_dir, OutputSummary& summary) {
  return std::make_unique<ManifestSink>(out_dir, summary);
}

}  // namespace kindex::runner
