// The runner's outputs: RunResult (de)serialisation, the FlashInfer-Bench / SOL-ExecBench trace line, the
// KernelIndex manifests and digests, the store rows, and the human results table.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "bench/implementation.hpp"
#include "bench/json_number.hpp"
#include "bench/runner.hpp"
#include "catalog/builtin.hpp"
#include "catalog/inputs.hpp"
#include "core/error.hpp"
#include "evidence/digest.hpp"
#include "evidence/manifest.hpp"
#include "kindex/kindex.h"
#include "problem_manifest/problem_manifest.hpp"
#include "store/store.hpp"

namespace kindex::bench {

namespace fs = std::filesystem;
using nlohmann::json;

// ---------------------------------------------------------------------------------------------------------------
// RunResult <-> JSON (the worker's reply, and results.json)

namespace {

json floor_json(const Floor& f) {
  return {{"method", f.method},       {"bytes", f.bytes},     {"flops", f.flops}, {"memory_s", f.memory_s},
          {"compute_s", f.compute_s}, {"floor_s", f.floor_s}, {"bound", f.bound}, {"basis", f.basis}};
}

json summary_json(const TrialSummary& t) {
  const Summary& s = t.pooled;
  return {{"latency_ns", t.latency},
          {"trial_medians_ns", t.trial_medians},
          {"count", s.count},
          {"median_ns", s.median},
          {"mean_ns", s.mean},
          {"minimum_ns", s.minimum},
          {"maximum_ns", s.maximum},
          {"p05_ns", s.p05},
          {"p95_ns", s.p95},
          {"mad_ns", s.mad},
          {"ci95_ns", {s.ci95_low, s.ci95_high}}};
}

json timing_json(const TimingResult& t, bool with_samples) {
  json j = {{"timer", t.timer}, {"note", t.note}};
  if (with_samples) j["trials_ns"] = t.trials_ns;
  if (t.summary) j["summary"] = summary_json(*t.summary);
  return j;
}

TimingResult timing_from_json(const json& j) {
  TimingResult t;
  t.timer = j.value("timer", "");
  t.note = j.value("note", "");
  if (j.contains("trials_ns")) t.trials_ns = j["trials_ns"].get<std::vector<std::vector<double>>>();
  return t;
}

template <class T>
void put_optional(json& j, const char* key, const std::optional<T>& v) {
  if (v) j[key] = json_number(*v);
}

}  // namespace

json RunResult::to_json() const {
  json j = {{"definition", definition},
            {"source", source},
            {"workload_uuid", workload_uuid},
            {"axes", axes},
            {"implementation", implementation},
            {"reference_implementation", reference_implementation},
            {"timing_reference", timing_reference},
            {"status", std::string(status_name(status))},
            {"message", message},
            {"correctness",
             {{"comparator", comparator},
              {"check", check},
              {"rounds_requested", rounds_requested},
              {"rounds_run", rounds_run},
              {"max_absolute_error", json_number(max_abs_error)},
              {"max_relative_error", json_number(max_rel_error)},
              {"matched_ratio", json_number(matched_ratio)},
              {"reports", reports}}},
            {"protocol",
             {{"untimed", protocol.untimed},
              {"warmup", protocol.warmup},
              {"iterations", protocol.iterations},
              {"cold_l2", protocol.cold_l2},
              {"on_device", timed_on_device}}},
            {"timing", timing_json(timing, true)},
            {"reference_timing", timing_json(reference_timing, true)},
            {"work",
             {{"declared_input_bytes", work.declared_input_bytes},
              {"compulsory_bytes", work.compulsory_bytes},
              {"referenced_bytes", work.referenced_bytes},
              {"flops", work.flops}}},
            {"seed", seed},
            {"observed_at", observed_at},
            {"wall_s", wall_s}};
  if (work.headroom_flops) j["work"]["headroom_flops"] = *work.headroom_flops;
  if (headroom) j["floors"]["headroom_v1"] = floor_json(*headroom);
  if (kindex_floor) j["floors"]["kindex"] = floor_json(*kindex_floor);
  put_optional(j, "speedup_factor", speedup);
  put_optional(j, "headroom_ratio", headroom_ratio);
  put_optional(j, "kindex_floor_ratio", kindex_ratio);
  put_optional(j, "sol_score", sol_score);
  put_optional(j, "t_sol_s", t_sol_s);
  put_optional(j, "t_baseline_s", t_baseline_s);
  return j;
}

RunResult RunResult::from_json(const json& j) {
  RunResult r;
  r.definition = j.value("definition", "");
  r.source = j.value("source", "");
  r.workload_uuid = j.value("workload_uuid", "");
  r.axes = j.value("axes", std::map<std::string, int64_t>{});
  r.implementation = j.value("implementation", "");
  r.reference_implementation = j.value("reference_implementation", "");
  r.timing_reference = j.value("timing_reference", "");
  const std::string status = j.value("status", "runtime_error");
  for (RunStatus s : {RunStatus::passed, RunStatus::incorrect_numerical, RunStatus::runtime_error, RunStatus::timeout,
                      RunStatus::resource_exceeded})
    if (status_name(s) == status) r.status = s;
  r.message = j.value("message", "");
  const json& c = j.at("correctness");
  r.comparator = c.value("comparator", "");
  r.check = c.value("check", "");
  r.rounds_requested = c.value("rounds_requested", 0);
  r.rounds_run = c.value("rounds_run", 0);
  r.max_abs_error = number_from_json(c.at("max_absolute_error"));
  r.max_rel_error = number_from_json(c.at("max_relative_error"));
  r.matched_ratio = number_from_json(c.at("matched_ratio"), 1);
  r.reports = c.value("reports", json::array());
  const json& p = j.at("protocol");
  r.protocol = {p.value("untimed", 0), p.value("warmup", 0), p.value("iterations", 0), p.value("cold_l2", false)};
  r.timed_on_device = p.value("on_device", false);
  r.timing = timing_from_json(j.at("timing"));
  r.reference_timing = timing_from_json(j.at("reference_timing"));
  const json& w = j.at("work");
  r.work.declared_input_bytes = w.value("declared_input_bytes", 0.0);
  r.work.compulsory_bytes = w.value("compulsory_bytes", 0.0);
  r.work.referenced_bytes = w.value("referenced_bytes", 0.0);
  r.work.flops = w.value("flops", 0.0);
  if (w.contains("headroom_flops")) r.work.headroom_flops = w["headroom_flops"].get<double>();
  r.seed = j.value("seed", uint64_t(0));
  r.observed_at = j.value("observed_at", "");
  r.wall_s = j.value("wall_s", 0.0);
  return r;
}

json BenchReport::to_json() const {
  json j = {{"environment", environment.to_json()}, {"results", json::array()}};
  if (measured_rates)
    j["measured_rates"] = {{"copy_bytes_per_s", measured_rates->copy_bytes_per_s},
                           {"tensor_flops_per_s", measured_rates->tensor_flops_per_s},
                           {"provenance", measured_rates->provenance}};
  for (const auto& r : results) j["results"].push_back(r.to_json());
  return j;
}

// ---------------------------------------------------------------------------------------------------------------
// Trace line

namespace {

std::string hardware_name(const Environment& env) {
  std::string name = env.has_gpu ? env.gpu_name : (env.cpu_model.empty() ? "CPU" : env.cpu_model);
  std::replace(name.begin(), name.end(), ' ', '_');
  return name;
}

std::map<std::string, std::string> trace_libs(const Environment& env) {
  std::map<std::string, std::string> libs = env.libraries;
  libs["kindex"] = env.kindex_version;
  if (!env.cuda_runtime_version.empty()) libs["cuda"] = env.cuda_runtime_version;
  return libs;
}

}  // namespace

json trace_line(const RunResult& r, const catalog::Workload& w, const Environment& env) {
  json evaluation = {{"status", std::string(trace_status_name(r.status))},
                     {"environment", {{"hardware", hardware_name(env)}, {"libs", trace_libs(env)}}},
                     {"timestamp", r.observed_at},
                     {"log", r.message}};
  if (r.status == RunStatus::passed || r.status == RunStatus::incorrect_numerical)
    evaluation["correctness"] = {{"max_relative_error", json_number(r.max_rel_error)},
                                 {"max_absolute_error", json_number(r.max_abs_error)},
                                 {"extra",
                                  {{"matched_ratio", json_number(r.matched_ratio)},
                                   {"rounds", r.rounds_run},
                                   {"comparator", r.comparator},
                                   {"reference", r.reference_implementation}}}};
  if (r.status == RunStatus::passed && r.timing.summary) {
    const double ms = r.timing.summary->latency * 1e-6;
    const double ref_ms = r.reference_timing.summary ? r.reference_timing.summary->latency * 1e-6 : 0.0;
    evaluation["performance"] = {
        {"latency_ms", ms}, {"reference_latency_ms", ref_ms}, {"speedup_factor", r.speedup.value_or(0.0)}};
  }
  return {{"definition", r.definition},
          {"workload", problem_manifest::workload_document(w)},
          {"solution", r.implementation},
          {"evaluation", evaluation}};
}

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

evidence::Manifest implementation_manifest(const Implementation& impl, const catalog::Definition& def,
                                           const std::string& operation_digest, const Environment& env) {
  const ImplementationInfo& info = impl.info();
  evidence::ImplementationRevisionModel m;
  m.metadata.name = manifest_name(info.name + "-" + def.name);
  m.metadata.title = info.name + " · " + def.name;
  m.metadata.description = info.description.substr(0, 2000);
  m.version = info.version.empty() ? env.kindex_version : info.version;
  if (info.path.empty() && is_hex40(env.kindex_commit)) m.commit = env.kindex_commit;
  m.operation_spec_digest = operation_digest;
  m.language = info.language;
  m.symbol = info.symbol;
  m.interface = info.path.empty() ? "kindex_internal" : "kindex_c_abi";
  if (impl.memory() == Where::device)
    m.hardware_architectures = {"sm_90", "sm_100"};
  else
    m.hardware_architectures = {"x86_64"};
  if (env.has_gpu && impl.memory() == Where::device) m.products_tested = {env.gpu_name};
  std::set<std::string> dtypes;
  for (const auto& t : def.inputs) dtypes.insert(problem_manifest::short_dtype(std::string(dtype_name(t.dtype))));
  m.dtypes.assign(dtypes.begin(), dtypes.end());
  if (!info.path.empty()) {
    // An external library is identified by its bytes.
    std::ifstream in(info.path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    m.source_content_digest = "sha256:" + evidence::sha256_hex(bytes);
    m.source_file_name = fs::path(info.path).filename().string();
    m.source_size_bytes = int64_t(bytes.size());
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
  m.metadata.title = "kindex bench, " + r.source + " protocol (" + timer + ")";
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
    m.metadata.title = env.gpu_name + " (driver " + env.driver_version + ", CUDA " + env.cuda_runtime_version + ")";
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
    m.metadata.title = cpu + ", " + std::to_string(env.cpu_threads) + " threads (no GPU)";
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
  m.metadata.title = r.implementation + " · " + r.definition + " · " + r.workload_uuid;
  if (!r.message.empty()) m.metadata.description = r.message.substr(0, 2000);
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

void write_file(const fs::path& path, const std::string& text, std::vector<std::string>& files) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  if (!out) throw Error("kindex bench", "--out", path.parent_path().string(), "cannot write " + path.string());
  out << text;
  files.push_back(path.string());
}

std::string digest_hex(const std::string& digest) { return digest.substr(digest.find(':') + 1); }

}  // namespace

struct RecordWriter::State {
  std::vector<WorkItem> items;
  OutputOptions out;
  OutputSummary summary;
  std::map<std::string, std::unique_ptr<Implementation>> impls;
  std::set<std::string> written;       // manifest digests already written
  std::set<std::string> trace_files;   // listed once in summary.files
  std::unique_ptr<store::Store> db;    // opened at the first run
};

RecordWriter::RecordWriter(const std::vector<WorkItem>& items, const OutputOptions& out)
    : state_(std::make_unique<State>()) {
  state_->items = items;
  state_->out = out;
}
RecordWriter::~RecordWriter() = default;
const OutputSummary& RecordWriter::summary() const { return state_->summary; }

void RecordWriter::add(const RunResult& r, const Environment& environment) {
  State& st = *state_;
  if (st.out.out_dir.empty() && st.out.store_uri.empty()) return;
  const WorkItem* item = nullptr;
  for (const auto& it : st.items)
    if (it.definition->name == r.definition && it.workload->uuid == r.workload_uuid) item = &it;
  if (!item) return;
  const fs::path dir = st.out.out_dir;
  auto keep = [&](const evidence::Manifest& m) {
    if (dir.empty() || !st.written.insert(m.digest).second) return;
    write_file(dir / "manifests" / m.kind() / (digest_hex(m.digest) + ".json"), m.document.dump(2) + "\n",
               st.summary.files);
  };
  // The trace line first: it needs no manifest, so a manifest problem cannot lose it.
  if (!dir.empty()) {
    fs::path path = dir / "traces" / (r.definition + ".jsonl");
    fs::create_directories(path.parent_path());
    std::ofstream f(path, std::ios::app);
    if (!f) throw Error("kindex bench", "--out", dir.string(), "cannot write " + path.string());
    f << trace_line(r, *item->workload, environment).dump() << "\n";
    f.flush();
    if (!f) throw Error("kindex bench", "--out", dir.string(), "cannot write " + path.string());
    if (st.trace_files.insert(path.string()).second) st.summary.files.push_back(path.string());
  }
  const auto& def = *item->definition;
  if (!st.impls.count(r.implementation)) st.impls[r.implementation] = make_implementation(r.implementation);
  const Implementation& impl = *st.impls[r.implementation];

  auto env_m = environment_manifest(environment);
  auto op_m = problem_manifest::operation_spec(def);
  auto wl_m = problem_manifest::workload_case(def, *item->workload, op_m);
  auto impl_m = implementation_manifest(impl, def, op_m.digest, environment);
  auto proto_m = protocol_manifest(r, environment, r.timing.timer != "cuda_events");
  std::string samples_uri, samples_digest;
  std::vector<double> samples;
  for (const auto& trial : r.timing.trials_ns) samples.insert(samples.end(), trial.begin(), trial.end());
  if (!samples.empty()) {
    const std::string text = json{{"unit", "ns"}, {"trials", r.timing.trials_ns}}.dump() + "\n";
    samples_digest = "sha256:" + evidence::sha256_hex(text);
    samples_uri = "samples/" + digest_hex(samples_digest) + ".json";
    if (!dir.empty())
      write_file(dir / samples_uri, text, st.summary.files);
    else
      samples_uri = "kindex-store:samples/" + digest_hex(samples_digest);
  }
  auto run_m = run_manifest(r, impl_m.digest, wl_m.digest, proto_m.digest, env_m.digest, environment, samples_uri,
                            samples_digest);
  for (const auto* m : {&env_m, &op_m, &wl_m, &impl_m, &proto_m, &run_m}) keep(*m);
  if (st.out.store_uri.empty()) return;
  // The store last, so the files are written even when it cannot be opened. One transaction per run: a bench
  // that is killed keeps every run recorded before it.
  store::OwnRun own;
  own.operation = op_m.document;
  own.workload = wl_m.document;
  own.implementation = impl_m.document;
  own.protocol = proto_m.document;
  own.environment = env_m.document;
  own.run = run_m.document;
  own.definition_name = def.name;
  own.samples_ns = samples;
  own.real_gpu = environment.has_gpu && r.timed_on_device;
  if (r.kindex_floor) own.kindex_floor_ns = r.kindex_floor->floor_s * 1e9;
  if (r.timing.summary) {
    own.interval_low_ns = r.timing.summary->pooled.ci95_low;
    own.interval_high_ns = r.timing.summary->pooled.ci95_high;
  }
  if (!st.db) {
    const std::string& uri = st.out.store_uri;
    std::string path = uri.rfind("sqlite:", 0) == 0 ? uri.substr(7) : uri;
    const bool is_file = uri.find("://") == std::string::npos && path != ":memory:";
    if (is_file && fs::path(path).has_parent_path()) fs::create_directories(fs::path(path).parent_path());
    st.db = store::Store::open(uri);
  }
  auto recorded = st.db->record_run(own);
  if (recorded.inserted)
    ++st.summary.runs_recorded;
  else
    ++st.summary.runs_already_stored;
}

void RecordWriter::finish(const BenchReport& report) {
  if (!state_->out.out_dir.empty())
    write_file(fs::path(state_->out.out_dir) / "results.json", report.to_json().dump(2) + "\n", state_->summary.files);
}

OutputSummary write_outputs(const BenchReport& report, const std::vector<WorkItem>& items, const OutputOptions& out) {
  RecordWriter writer(items, out);
  for (const auto& r : report.results) writer.add(r, report.environment);
  writer.finish(report);
  return writer.summary();
}

// ---------------------------------------------------------------------------------------------------------------
// The human table

std::string results_table(const BenchReport& report) {
  auto time = [](double ns_value) {
    char buf[32];
    if (ns_value <= 0) return std::string("-");
    if (ns_value < 1e3)
      std::snprintf(buf, sizeof buf, "%.0f ns", ns_value);
    else if (ns_value < 1e6)
      std::snprintf(buf, sizeof buf, "%.2f us", ns_value / 1e3);
    else if (ns_value < 1e9)
      std::snprintf(buf, sizeof buf, "%.3f ms", ns_value / 1e6);
    else
      std::snprintf(buf, sizeof buf, "%.3f s", ns_value / 1e9);
    return std::string(buf);
  };
  auto ratio = [](const std::optional<double>& v) {
    if (!v) return std::string("-");
    char buf[32];
    std::snprintf(buf, sizeof buf, *v >= 100 ? "%.0fx" : "%.2fx", *v);
    return std::string(buf);
  };
  std::vector<std::vector<std::string>> rows;
  const std::string target = report.environment.floor_target();
  rows.push_back({"problem", "workload", "implementation", "status", "latency", "speedup", "x floor (" + target + ")",
                  "x kindex floor", "timer"});
  for (const auto& r : report.results) {
    std::string axes;
    for (const auto& [k, v] : r.axes) {
      if (k == "len_indptr") continue;  // batch_size + 1
      axes += (axes.empty() ? "" : " ") + k + "=" + std::to_string(v);
    }
    rows.push_back({r.definition, axes, r.implementation, std::string(status_name(r.status)), time(r.latency_ns()),
                    ratio(r.speedup), ratio(r.headroom_ratio), ratio(r.kindex_ratio), r.timing.timer});
  }
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& row : rows)
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  std::ostringstream out;
  for (size_t i = 0; i < rows.size(); ++i) {
    for (size_t c = 0; c < rows[i].size(); ++c)
      out << rows[i][c] << std::string(width[c] - rows[i][c].size() + (c + 1 < rows[i].size() ? 2 : 0), ' ');
    out << "\n";
    if (i == 0) {
      size_t total = 0;
      for (size_t c = 0; c < width.size(); ++c) total += width[c] + (c + 1 < width.size() ? 2 : 0);
      out << std::string(total, '-') << "\n";
    }
  }
  for (const auto& r : report.results)
    if (r.status != RunStatus::passed)
      out << r.definition << " " << r.workload_uuid.substr(0, 8) << " " << r.implementation << ": "
          << status_name(r.status) << ": " << r.message << "\n";
  return out.str();
}

}  // namespace kindex::bench
