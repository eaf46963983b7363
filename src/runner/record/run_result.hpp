#pragma once
// The outcome of one (implementation, workload) run, as the pipeline produces it and every sink consumes it, and
// its JSON codec (the worker's reply, runs.jsonl and results.json).
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "runner/record/environment.hpp"
#include "runner/record/floors.hpp"
#include "runner/measurement.hpp"

namespace kindex::runner {

// How a run ended (RunStatus, RunFailure: src/measure/run_failure.hpp), in KernelIndex's spelling: "passed",
// "incorrect_numerical", ...
std::string_view status_name(RunStatus s);
// FlashInfer-Bench / SOL-ExecBench trace spelling ("PASSED", "RUNTIME_ERROR", ...; resource_exceeded is a
// RUNTIME_ERROR there, its log says why).
std::string_view trace_status_name(RunStatus s);

// What an implementation is, as its records describe it. Filled where the implementation is loaded (a worker),
// so nothing else needs to load it again.
struct ImplementationInfo {
  std::string name;         // "kindex", "gpu-reference", "cpu-reference", "external:<path>", "solution:<path>", a peer
  std::string language;     // "cuda", "cpp", or "c_abi" for an external library (KernelIndex spelling)
  std::string version;      // kindex_version() or the external library's
  std::string path;         // the shared library (external)
  std::string symbol;       // entry point(s)
  std::string description;  // one line for humans
  bool on_device = true;    // takes device pointers (false: host pointers)
  std::string interface{};  // how kindex calls it, for its manifest: "" (kindex_internal or kindex_c_abi by path),
                            // flashinfer_bench_solution, sol_execbench_solution, kindex_peer
  std::string not_installed{};  // a peer whose package this machine lacks: why (its runs are skipped, not failed)
  bool compile_cache_empty = false;  // a compiling peer found its on-disk cache empty: its set-up compiles every shape

  nlohmann::json to_json() const;
  static ImplementationInfo from_json(const nlohmann::json& j);
};

// A timing protocol as records and the Python worker's "time" request spell it: untimed, warmup, iterations, cold_l2.
nlohmann::json protocol_json(const TimingProtocol& p);

struct TimingResult {
  std::string timer;  // cupti_activity | cuda_events | wall_clock
  std::string note;
  std::vector<std::vector<double>> trials_ns;  // samples per timed trial
  std::optional<TrialSummary> summary;

  nlohmann::json to_json(bool with_samples) const;
  static TimingResult from_json(const nlohmann::json& j);  // timer, note, samples (the summary is derived)
};

// Where a run's wall time went, in seconds summed over its rounds (the pipeline's clock, in the process that ran it):
// the evidence for what to make faster. wall_s less their sum is the run's own bookkeeping.
struct PhaseTimes {
  double setup = 0;           // loading the implementations, before the first round
  double inputs = 0;          // each round's inputs generated and placed on the device
  double reference = 0;       // the correctness reference's call: outputs allocated and poisoned, the call, waited for
  double implementation = 0;  // the implementation's call, likewise (out of process: its whole round)
  double compare = 0;         // the comparator, with the outputs copied to the host when it runs there
  double timing = 0;          // the implementation's timing trials
  double reference_timing = 0;  // the timing reference's trials
  // In the runner, after the run: its floors and ratios and its records (runs.jsonl, trace, manifests, store row,
  // console). Known only once those are written, so only results.json (written at the end) carries it.
  double record = 0;
  std::string compared_on;      // "device" (kindex_gpu_reference_compare) | "host" (some output on the host) | ""
};

// The outcome of one (implementation, workload).
struct RunResult {
  std::string definition, source, workload_uuid, implementation, reference_implementation, timing_reference;
  std::map<std::string, int64_t> axes;
  // The implementation's description, set by the runner for every run (also one whose worker died); not part of
  // to_json(): results.json names the implementation, its manifest describes it.
  ImplementationInfo implementation_info;
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
  std::string t_baseline_source;  // where T_b came from: "published" table or the --baseline file
  // Host time of the implementation's own untimed setup in the first round (a peer's plan(), torch.compile's
  // compilation): outside every timed call, recorded beside them.
  std::optional<double> plan_host_s;
  uint64_t seed = 0;
  std::string observed_at;
  // Labels for the run manifest's metadata (outside its digest) that the caller adds: `kindex rerun`'s link to the
  // run it re-measured (store/rows.hpp kReproducesRunLabel) and how it obtained the implementation and workload.
  std::map<std::string, std::string> labels;
  double wall_s = 0;
  PhaseTimes phases;

  double latency_ns() const { return timing.summary ? timing.summary->latency : 0; }
  nlohmann::json to_json() const;
  static RunResult from_json(const nlohmann::json& j);
};

// An out-of-process implementation's one-time set-up (a peer's JIT build, torch.compile of each shape), done in
// its own worker before its runs while the other implementations are measured, so no run's time includes it.
struct SetUpRecord {
  std::string status;  // "prepared" | "failed" (its runs still ran) | "timeout" (its runs were not run)
  double wall_s = 0;   // from the request to the reply (a timeout: until the worker was ended)
  int workloads = 0;   // calls prepared, one per workload it will run
  int planned = 0;     // of which its plan step saw (0: it has none; loading it was the set-up)
  int compile_cache_hits = 0, compile_cache_misses = 0;  // torch.compile's on-disk cache, one per graph
  int warm_up_processes = 0;  // extra processes that compiled later workloads into the on-disk cache meanwhile
  std::string message;        // why it failed or was ended
  nlohmann::json to_json() const;
  static SetUpRecord from_json(const nlohmann::json& j);
};

struct BenchReport {
  Environment environment;
  // BenchOptions::gpus: the environment of each GPU the bench was spread over, in that order (`environment` is
  // the first one's); each run's manifests carry its own GPU's, and its labels the GPU's ordinal and UUID.
  std::vector<Environment> gpus;
  double start_s = 0;  // the runner's start before the first run: worker, environment, calibration, peer probes
  std::optional<MeasuredRates> measured_rates;
  std::vector<RunResult> results;
  // Implementations (peers) whose runs were skipped because this machine lacks their package: spec -> why.
  std::map<std::string, std::string> not_available;
  std::map<std::string, SetUpRecord> set_up;  // by implementation spec: the solutions' and peers' preparations
  bool any_correctness_failure() const;  // a run that is not passed
  nlohmann::json to_json() const;
};

}  // namespace kindex::runner
