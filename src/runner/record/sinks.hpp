#pragma once
// Where a run goes once it ends. As google/benchmark's BenchmarkReporter, each sink is fed every RunResult the
// moment its run ends (so a bench that is killed keeps what it finished) and the whole report at the end:
//   sink_results_json.cpp  runs.jsonl (a line per run) and results.json (the report)
//   sink_trace.cpp         the FlashInfer-Bench / SOL-ExecBench trace line, traces/<definition>.jsonl
//   records.cpp            the KernelIndex manifests with digests and the raw samples, manifests/ and samples/
//   sink_store.cpp         the store row (the same manifests, one transaction per run)
//   sink_console.cpp       the human table (or the JSON report) on the terminal
// Every sink reads only the RunResult (which carries the implementation's description), its work item and the
// environment: none loads an implementation or regenerates anything.
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runner/runner.hpp"

namespace kindex::runner {

struct OutputOptions {
  std::string out_dir;    // "" = no files
  std::string store_uri;  // "" = no store
};
struct OutputSummary {
  std::vector<std::string> files;
  int runs_recorded = 0, runs_already_stored = 0;
};

class RunSink {
 public:
  virtual ~RunSink() = default;
  virtual void add(const RunResult& r, const WorkItem& item, const Environment& env) = 0;
  virtual void finish(const BenchReport& report) { (void)report; }
};

// Each sink records what it wrote into `summary` (which must outlive it).
std::unique_ptr<RunSink> make_results_json_sink(const std::string& out_dir, OutputSummary& summary);
std::unique_ptr<RunSink> make_trace_sink(const std::string& out_dir, OutputSummary& summary);
std::unique_ptr<RunSink> make_manifest_sink(const std::string& out_dir, OutputSummary& summary);
// `samples_in_files`: the raw samples are also written under an --out directory (the run manifest then points at
// them there; else at the store's copy), so the store row and the manifest files carry the same digests.
std::unique_ptr<RunSink> make_store_sink(const std::string& uri, bool samples_in_files, OutputSummary& summary);
// The table (or, with `json`, the report with the summary of what was written) on `out` at the end.
std::unique_ptr<RunSink> make_console_sink(std::ostream& out, bool json, const OutputOptions& output,
                                           const OutputSummary& summary);

// The file and store sinks `out` asks for, fed in order (results, trace, manifests, store), plus any added.
class RecordWriter {
 public:
  // `items` supplies the definitions and workloads the results refer to.
  RecordWriter(const std::vector<WorkItem>& items, const OutputOptions& out);
  void add_sink(std::unique_ptr<RunSink> sink) { sinks_.push_back(std::move(sink)); }
  void add(const RunResult& result, const Environment& environment);
  void finish(const BenchReport& report);
  const OutputSummary& summary() const { return *summary_; }

 private:
  std::vector<WorkItem> items_;
  std::unique_ptr<OutputSummary> summary_;  // stable address for the sinks
  std::vector<std::unique_ptr<RunSink>> sinks_;
};
// All of a finished report at once (a RecordWriter fed every result).
OutputSummary write_outputs(const BenchReport& report, const std::vector<WorkItem>& items, const OutputOptions& out);

// FlashInfer-Bench trace line (SOL-ExecBench uses the same shape) of one result.
nlohmann::json trace_line(const RunResult& r, const catalog::Workload& workload, const Environment& env);

// The human table: problem, workload, implementation, status, latency, speedup, floor ratios.
std::string results_table(const BenchReport& report);
// kindex beside the fastest peer that passed on each workload, with the ratio, and the peers not available
// ("" when the report has no peer and none was missing). Part of results_table.
std::string peer_table(const BenchReport& report);
// One line: each solution's or peer's set-up (BenchReport::set_up), its wall time and what it was ("" when none).
// Part of results_table.
std::string set_up_summary(const BenchReport& report);

// Writes `text` to `path` (creating its directory) and lists it in `files`. Throws Error naming --out.
void write_output_file(const std::string& path, const std::string& text, std::vector<std::string>& files);

}  // namespace kindex::runner
