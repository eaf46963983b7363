#pragma once
// `kindex bench`: for each (implementation, workload) generate the inputs, run the reference and the
// implementation, apply the source's comparator over the source's trial count, time with the source's protocol,
// capture the environment and compute the floors, giving one RunResult per run (run_result.hpp) that the sinks
// write out (sinks.hpp). Files: selection.cpp (which runs), pipeline.cpp (one run), worker.cpp (the processes),
// runner.cpp (the loop), derive.cpp (floors), progress.cpp.
//
// Every run happens in a worker process forked from the runner before CUDA is touched: a crash, a hang (killed
// at the per-workload timeout) or a sticky CUDA error ends that run with its status and a fresh worker takes
// the next one. The runner process itself never initialises CUDA. A solution or peer has a worker of its own, which
// prepares its runs (RoundRunner::prepare) while the other implementations' runs are measured; runs stay one at a
// time.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "runner/record/run_result.hpp"
#include "catalog/loader.hpp"

namespace kindex::runner {

struct BenchOptions {
  std::vector<std::string> implementations = {"kindex"};
  // Peers run beside the implementations only where they are the harness's own baseline (peer_is_baseline_for:
  // FlashInfer on FlashInfer-Bench's decode definitions, torch.compile on SOL-ExecBench's); a peer whose package is
  // not installed is listed in the report's not_available and not run.
  std::vector<std::string> peers;
  std::string reference = "auto";    // auto | cpu-reference | gpu-reference: what outputs are judged against
  std::optional<int> trials;         // correctness rounds of fresh inputs (FIB 3, SOL 10)
  std::optional<int> timing_trials;  // timed trials (FIB 3 = one per round, SOL 1)
  std::optional<int> iterations;     // timed iterations per trial (50; 5 on the CPU path)
  std::optional<int> warmup;         // warm-up calls (10; 1 on the CPU path)
  std::optional<uint64_t> seed;      // base seed (FIB 1, SOL 200); trial t uses seed + t
  double timeout_s = 900;            // per (implementation, workload)
  bool prefer_cupti = true;          // false: CUDA events
  bool progress = false;             // a progress bar on stderr
  bool isolate = true;               // run in worker processes (false: in this process, for debugging)
  // Processes that compile a solution's workloads at its set-up when its first one missed the compiler's on-disk
  // cache (the solution's own worker included): 0 = one per 2 cores (torch.compile's tracing is single-threaded
  // Python: more processes, each with fewer of Inductor's compile threads, finish a cold set-up sooner).
  int set_up_processes = 0;
  std::optional<BaselineTimes> baseline;  // L2/003 T_b measured on this machine (--baseline), else the published
  // The GPUs to spread the bench over (--gpus; their host ordinals): one runner process per GPU, pinned to it
  // (CUDA_VISIBLE_DEVICES, which its workers and Python processes inherit), runs the work items dealt to it in turn
  // (item i to GPU i mod n, so a workload's runs share one device and its timing reference, as on one GPU) exactly
  // as a bench of those items would. Empty: one runner, not pinned. The ordinals are not checked here
  // (gpu_ordinals does); on a machine without a GPU they are logical workers, which is how the dealing is tested.
  std::vector<int> gpus;
};

// One (definition, workload) to run, with its definition.
struct WorkItem {
  const catalog::Definition* definition = nullptr;
  const catalog::Workload* workload = nullptr;
};

// Parses --workloads against a problem's workloads: "all", "small" (catalog::is_small), a comma list of uuids
// (or unique uuid prefixes) and 0-based index ranges ("0-3,7"). Throws kindex::Error naming --workloads.
std::vector<const catalog::Workload*> select_workloads(const catalog::Problem& problem, const std::string& spec);
// A bundled problem name or a definition file / dataset directory. Throws kindex::Error naming --problem.
std::vector<catalog::Problem> resolve_problems(const std::string& spec);

// One run of a bench: a work item (its index) and an implementation spec.
struct Job {
  size_t item = 0;
  std::string impl;
};
// The bench's runs in their order (part of the contract, docs/runner.md): per work item, the implementations as
// given, then each peer that is the item's harness baseline (and not also named as an implementation). Checks the
// options first: throws kindex::Error naming --impl, --reference or --peer.
std::vector<Job> plan_jobs(const std::vector<WorkItem>& items, const BenchOptions& options);

// Runs every implementation on every work item. `on_result` (optional) sees each result as it completes, with
// the run's environment (with BenchOptions::gpus, the environment of the GPU it ran on; it may be called with the
// results of several GPUs in the order they end, never at once). The report lists the results in the jobs' order
// whatever the GPUs.
using OnResult = std::function<void(const RunResult&, const Environment&)>;
BenchReport run_bench(const std::vector<WorkItem>& items, const BenchOptions& options, const OnResult& on_result = {});

}  // namespace kindex::runner
