#pragma once
// `kindex rerun <run>`: re-measure a run of the store on this machine and record the rerun linked to it.
//
// The run's operation must be one of the bundled problems (its OperationSpec digest equals the bundled definition's,
// or its axes, inputs and outputs do)
// and its workload one of that problem's workloads (the same WorkloadCase digest, else the same axes: a
// KernelIndex workload's captured index arrays are not public, so kindex's own page table of that shape is used).
// Its implementation is mapped to one kindex can obtain here (plan_rerun: kindex's kernels and references, a
// built-in peer for FlashInfer's wrapper or SOL-ExecBench's torch.compile baseline, or a solution file / library
// whose bytes match the recorded digest), or given with --impl. The rerun is `kindex bench` on that one
// (implementation, workload) under the protocol of the bundled problem's source, which must be the source the run
// was measured under. It is a BenchmarkRun of its own (this environment) whose manifest names the original by
// the label reproduces_run (its runDigest); the store derives the original's evidence from it (store/schema.hpp).
#include <iosfwd>
#include <map>
#include <optional>
#include <string>

#include "runner/runner.hpp"
#include "runner/record/sinks.hpp"

namespace kindex::store { class Store; }

namespace kindex::runner {

struct RerunOptions {
  std::string run;             // id, unique id prefix (8+ characters) or runDigest
  std::string implementation;  // --impl: what to run instead of the mapped implementation ("" = map)
  std::string workload;        // --workload: the bundled workload (uuid, prefix or index) when the axes match several
  BenchOptions bench;          // trials, iterations, timeout ... (its implementations and peers are ignored)
  OutputOptions output;        // the store the rerun is recorded in (the run's own) and the files under --out
  bool json = false;           // the bench's JSON report instead of its table
};

// What a rerun will measure, found from the store.
struct RerunPlan {
  std::string original_id, original_digest, original_implementation, source;
  std::string problem;          // the bundled definition
  std::string workload_uuid;    // its workload
  std::string workload_match;   // "same_workload" (digest) | "same_axes"
  std::string implementation;   // the --impl spec that runs
  std::string implementation_how;  // how it was chosen, for the rerun's labels and the terminal
  // Whether it is the run's own implementation: mapped, or given with --impl as the spec the run maps to or a file
  // holding the source the run's manifest recorded. A rerun of another one is linked but verifies nothing.
  bool same_implementation = true;
  std::map<std::string, std::string> labels() const;  // the rerun manifest's metadata labels
};

// Finds the run and maps it; kindex::Error naming the run, operation, workload or implementation when it cannot.
RerunPlan plan_rerun(store::Store& store, const RerunOptions& options);

struct RerunOutcome {
  RerunPlan plan;
  BenchReport report;
};
// Runs the plan with the bench's sinks (files under --out, the store row, the table or JSON on `out`). A peer
// that is not installed here is an Error naming it (nothing is recorded).
RerunOutcome run_rerun(const RerunPlan& plan, const RerunOptions& options, std::ostream& out);

}  // namespace kindex::runner
