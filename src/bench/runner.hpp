#pragma once
// `kindex bench`: for each (implementation, workload) generate the inputs, run the reference and the
// implementation, apply the source's comparator over the source's trial count, time with the source's protocol,
// capture the environment, compute the floors, and write the result three ways (FlashInfer-Bench / SOL-ExecBench
// trace line, KernelIndex manifests with digests, a row in the local store).
//
// Every run happens in a worker process forked from the runner before CUDA is touched: a crash, a hang (killed
// at the per-workload timeout) or a sticky CUDA error ends that run with its status and a fresh worker takes
// the next one. The runner process itself never initialises CUDA.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/device.hpp"
#include "bench/environment.hpp"
#include "bench/floors.hpp"
#include "bench/statistics.hpp"
#include "bench/timer.hpp"
#include "catalog/loader.hpp"

namespace kindex::bench {

struct BenchOptions {
  std::vector<std::string> implementations = {"kindex"};
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

struct TimingResult {
  std::string timer;  // cupti_activity | cuda_events | wall_clock
  std::string note;
  std::vector<std::vector<double>> trials_ns;  // samples per timed trial
  std::optional<TrialSummary> summary;
};

// The outcome of one (implementation, workload).
struct RunResult {
  std::string definition, source, workload_uuid, implementation, reference_implementation, timing_reference;
  std::map<std::string, int64_t> axes;
  RunStatus status = RunStatus::passed;
  std::string message;  // the log: why it failed, and notes (reduced rounds, timer fallback, ...)
  // correctness
  std::string comparator;  // flashinfer_bench_eval | sol_execbench_eval
  std::string check;       // "reference" | "determinism" (implementation and reference are the same code)
  int rounds_requested = 0, rounds_run = 0;
  double max_abs_error = 0, max_rel_error = 0, matched_ratio = 1;
  nlohmann::json reports = nlohmann::json::array();  // per round and output
  // timing
  TimingProtocol protocol;
  bool timed_on_device = false;
  TimingResult timing, reference_timing;
  std::optional<double> speedup;  // reference latency / latency
  // work and floors (computed by the runner from the environment)
  WorkCount work;
  std::optional<Floor> headroom, kindex_floor;
  std::optional<double> headroom_ratio, kindex_ratio;  // latency / floor
  std::optional<double> sol_score, t_sol_s, t_baseline_s;
  uint64_t seed = 0;
  std::string observed_at;
  double wall_s = 0;

  double latency_ns() const { return timing.summary ? timing.summary->latency : 0; }
  nlohmann::json to_json() const;
  static RunResult from_json(const nlohmann::json& j);
};

struct BenchReport {
  Environment environment;
  std::optional<MeasuredRates> measured_rates;
  std::vector<RunResult> results;
  bool any_correctness_failure() const;  // a run that is not passed
  nlohmann::json to_json() const;
};

// Runs every implementation on every work item. `on_result` (optional) sees each result as it completes, with
// the run's environment.
BenchReport run_bench(const std::vector<WorkItem>& items, const BenchOptions& options,
                      const std::function<void(const RunResult&, const Environment&)>& on_result = {});

// Output: the trace lines, the KernelIndex manifests (+ digests) and the store rows.
struct OutputOptions {
  std::string out_dir;    // "" = no files
  std::string store_uri;  // "" = no store
};
struct OutputSummary {
  std::vector<std::string> files;
  int runs_recorded = 0, runs_already_stored = 0;
};
// Writes each result the moment it is added: its trace line, its manifests and raw samples, and its store row
// (one transaction), so a bench that is killed keeps every run it finished; finish() writes results.json.
class RecordWriter {
 public:
  // `items` supplies the definitions and workloads the results refer to.
  RecordWriter(const std::vector<WorkItem>& items, const OutputOptions& out);
  ~RecordWriter();
  void add(const RunResult& result, const Environment& environment);
  void finish(const BenchReport& report);
  const OutputSummary& summary() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};
// All of a finished report at once (a RecordWriter fed every result).
OutputSummary write_outputs(const BenchReport& report, const std::vector<WorkItem>& items, const OutputOptions& out);

// FlashInfer-Bench trace line (SOL-ExecBench uses the same shape) of one result.
nlohmann::json trace_line(const RunResult& r, const catalog::Workload& workload, const Environment& env);

// The human table: problem, workload, implementation, status, latency, speedup, floor ratios.
std::string results_table(const BenchReport& report);

}  // namespace kindex::bench
