#include "bench/session.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>

#include "bench/device.hpp"
#include "catalog/builtin.hpp"
#include "core/error.hpp"

namespace kindex::bench {

const std::vector<std::string>& seed_problems() {
  static const std::vector<std::string> names = {"gqa_paged_decode_h32_kv4_d128_ps1",
                                                 "gqa_paged_decode_h24_kv4_d128_ps64",
                                                 std::string(catalog::kSolGqaRopeBackward)};
  return names;
}

bool probe_gpu() {
  if (!device::built_with_cuda()) return false;
  std::cout.flush();
  std::cerr.flush();
  pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) _exit(device::available() ? 0 : 1);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

SessionOptions main_job_options(bool gpu) {
  SessionOptions s;
  s.problems = seed_problems();
  s.output.out_dir = "kindex-results";
  s.output.store_uri = "sqlite:kindex-results/kindex.db";
  if (gpu) {
    s.workloads = "all";
    s.bench.implementations = {"kindex"};
  } else {
    s.workloads = "small";
    s.bench.implementations = {"cpu-reference"};
    s.bench.reference = "cpu-reference";
    s.bench.trials = 2;  // a round and a second one on fresh inputs; recorded as reduced
    s.bench.iterations = 3;
    s.bench.warmup = 1;
  }
  return s;
}

int run_session(const SessionOptions& options, std::ostream& out, std::ostream& err) {
  if (options.problems.empty()) throw Error("kindex bench", "--problem", "", "give at least one problem");
  std::vector<catalog::Problem> problems;
  for (const auto& spec : options.problems)
    for (auto& p : resolve_problems(spec)) problems.push_back(std::move(p));
  std::vector<WorkItem> items;
  for (const auto& p : problems)
    for (const auto* w : select_workloads(p, options.workloads)) items.push_back({&p.definition, w});
  if (items.empty()) {
    err << "kindex bench: no workloads selected (--workloads " << options.workloads << ")\n";
    return 0;
  }
  // Each run is appended to <out>/runs.jsonl the moment it ends, so a bench that is killed keeps what it did.
  std::ofstream progress_log;
  if (!options.output.out_dir.empty()) {
    std::filesystem::create_directories(options.output.out_dir);
    progress_log.open(std::filesystem::path(options.output.out_dir) / "runs.jsonl", std::ios::app);
    if (!progress_log) throw Error("kindex bench", "--out", options.output.out_dir, "cannot write runs.jsonl there");
  }
  // Traces, manifests and store rows are written per run too (RecordWriter).
  RecordWriter writer(items, options.output);
  BenchReport report = run_bench(items, options.bench, [&](const RunResult& r, const Environment& env) {
    if (progress_log)
      progress_log << r.to_json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
    writer.add(r, env);
  });
  writer.finish(report);
  const OutputSummary& written = writer.summary();
  if (options.json) {
    nlohmann::json j = report.to_json();
    j["outputs"] = {{"files", written.files},
                    {"runs_recorded", written.runs_recorded},
                    {"runs_already_stored", written.runs_already_stored}};
    out << j.dump(2) << "\n";
  } else {
    const Environment& env = report.environment;
    out << "kindex bench on "
        << (env.has_gpu ? env.gpu_name + " (" + env.architecture + ")" : env.cpu_model + " (no GPU: CPU path)")
        << ", kindex " << env.kindex_version << "\n\n";
    out << results_table(report);
    if (!options.output.out_dir.empty())
      out << "\nwrote " << written.files.size() << " files under " << options.output.out_dir << "/";
    if (!options.output.store_uri.empty())
      out << "; store " << options.output.store_uri << ": " << written.runs_recorded << " runs recorded, "
          << written.runs_already_stored << " already there";
    out << "\n";
  }
  return report.any_correctness_failure() ? 1 : 0;
}

}  // namespace kindex::bench
