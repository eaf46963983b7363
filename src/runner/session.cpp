#include "runner/session.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <iostream>

#include "runner/measurement.hpp"
#include "runner/record/sinks.hpp"
#include "runner/execute/solution.hpp"
#include "catalog/builtin.hpp"
#include "core/error.hpp"

namespace kindex::runner {

bool probe_gpu() { return probe_gpu_count() > 0; }

int probe_gpu_count() {
  if (!device::built_with_cuda()) return 0;
  std::cout.flush();
  std::cerr.flush();
  pid_t pid = fork();
  if (pid < 0) return 0;
  if (pid == 0) _exit(std::min(device::count(), 255));
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 0;
}

SessionOptions main_job_options(bool gpu) {
  SessionOptions s;
  s.problems = catalog::seed_problems();
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

std::vector<WorkItem> select_items(const SessionOptions& options, std::vector<catalog::Problem>& problems,
                                   std::vector<std::string>* problem_specs) {
  if (options.problems.empty()) throw Error("kindex bench", "--problem", "", "give at least one problem");
  std::vector<std::string> specs;  // per problem
  for (const auto& spec : options.problems)
    for (auto& p : resolve_problems(spec)) {
      problems.push_back(std::move(p));
      specs.push_back(spec);
    }
  std::vector<WorkItem> items;
  for (size_t i = 0; i < problems.size(); ++i)
    for (const auto* w : select_workloads(problems[i], options.workloads)) {
      items.push_back({&problems[i].definition, w});
      if (problem_specs) problem_specs->push_back(specs[i]);
    }
  return items;
}

int run_session(const SessionOptions& options, std::ostream& out, std::ostream& err) {
  std::vector<catalog::Problem> problems;
  const std::vector<WorkItem> items = select_items(options, problems);
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
