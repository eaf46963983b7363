// The FlashInfer-Bench / SOL-ExecBench trace line of each run, appended to <out>/traces/<definition>.jsonl.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "runner/record/json_number.hpp"
#include "runner/record/sinks.hpp"
#include "core/error.hpp"
#include "problem_manifest/problem_manifest.hpp"

namespace kindex::runner {

using nlohmann::json;

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
  // A harness's solution is named as the harness's own trace names it (its name; kindex keeps it as the version).
  const std::string& interface = r.implementation_info.interface;
  const bool harness_solution = interface == "flashinfer_bench_solution" || interface == "sol_execbench_solution";
  return {{"definition", r.definition},
          {"workload", problem_manifest::workload_document(w)},
          {"solution", harness_solution && !r.implementation_info.version.empty() ? r.implementation_info.version
                                                                                  : r.implementation},
          {"evaluation", evaluation}};
}

namespace {

class TraceSink final : public RunSink {
 public:
  TraceSink(const std::string& out_dir, OutputSummary& summary) : dir_(out_dir), summary_(summary) {}
  void add(const RunResult& r, const WorkItem& item, const Environment& environment) override {
    std::filesystem::path path = dir_ / "traces" / (r.definition + ".jsonl");
    std::filesystem::create_directories(path.parent_path());
    std::ofstream f(path, std::ios::app);
    if (!f) throw Error("kindex bench", "--out", dir_.string(), "cannot write " + path.string());
    f << trace_line(r, *item.workload, environment).dump() << "\n";
    f.flush();
    if (!f) throw Error("kindex bench", "--out", dir_.string(), "cannot write " + path.string());
    if (files_.insert(path.string()).second) summary_.files.push_back(path.string());
  }

 private:
  std::filesystem::path dir_;
  OutputSummary& summary_;
  std::set<std::string> files_;  // listed once in summary.files
};

}  // namespace

std::unique_ptr<RunSink> make_trace_sink(const std::string& out_dir, OutputSummary& summary) {
  return std::make_unique<TraceSink>(out_dir, summary);
}

}  // namespace kindex::runner
