#pragma once
// One `kindex bench` invocation from start to finish: resolve the problems and workloads, run, write the outputs,
// print the table (or JSON) and choose the exit code. The CLI only parses arguments into SessionOptions; `kindex`
// with no subcommand runs main_job_options().
#include <iosfwd>
#include <string>
#include <vector>

#include "runner/record/sinks.hpp"

namespace kindex::runner {

struct SessionOptions {
  std::vector<std::string> problems;  // bundled names or definition paths / dataset directories
  std::string workloads = "all";
  BenchOptions bench;
  OutputOptions output;
  bool json = false;  // machine-readable report on `out` instead of the table
};

// The problems `options` names and the work items selected in them (pointing into `problems`, which must stay
// unchanged while they are used); `problem_specs` (optional) gets each item's --problem argument. Throws
// kindex::Error naming --problem or --workloads.
std::vector<WorkItem> select_items(const SessionOptions& options, std::vector<catalog::Problem>& problems,
                                   std::vector<std::string>* problem_specs = nullptr);

// Runs the session; returns 0 when every run passed, 1 when any did not. Bad arguments throw kindex::Error.
int run_session(const SessionOptions& options, std::ostream& out, std::ostream& err);

// Whether this machine has a usable GPU, asked in a child process so the caller never initialises CUDA.
bool probe_gpu();
// How many GPUs this process would see (CUDA_VISIBLE_DEVICES applies), asked the same way; 0 without
// (gpus.hpp checks --gpus against it).
int probe_gpu_count();

// The main job: the three seed problems (gqa_paged_decode_h32_kv4_d128_ps1, gqa_paged_decode_h24_kv4_d128_ps64,
// SOL L2/003). With a GPU: kindex's kernels on every bundled workload, judged against and timed beside the GPU
// reference, and the installed peers where each is its harness's baseline (FlashInfer's decode wrapper in both
// variants on the decode problems, torch.compile on L2/003; the table gives kindex beside the fastest, and names
// the peers not installed). Without: the CPU reference on the small workloads, each round checked against a second
// independent call on fresh inputs (a determinism check), timed with the wall clock.
SessionOptions main_job_options(bool gpu);  // on catalog::seed_problems()

}  // namespace kindex::runner
