#include "runner/session.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <iostream>

#include "runner/measurement.hpp"
#include "runner/record/sinks.hpp"
#include "runner/execute/solution.hpp"
#include "catalog/builtin.hpp"
#include "core/error.hpp"

namespace kindex::runner {

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
    s.bench.peers = peer_names();  // each where it is its harness's baseline, if installed
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
  // Every run goes to the sinks the moment it ends (runs.jsonl, traces, manifests, store row); the terminal gets
  // the table or the JSON report at the end.
  RecordWriter writer(items, options.output);
  writer.add_sink(make_console_sink(out, options.json, options.output, writer.summary()));
  BenchReport report = run_bench(items, options.bench, [&](const RunResult& r, const Environment& env) {
    writer.add(r, env);
  });
  writer.finish(report);
  return report.any_correctness_failure() ? 1 : 0;
}

}  // namespace kindex::runner
