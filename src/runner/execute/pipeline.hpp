#pragma once
// One run in this process (a worker), as the runner (runner.cpp) sequences it: execute_run; then, in the runner,
// derive (runner/record/derive.hpp).
#include <optional>
#include <string>

#include "runner/runner.hpp"

namespace kindex::runner {

// A result naming its definition, workload, implementation and comparator, stamped now, with nothing run yet.
RunResult new_run_result(const WorkItem& item, const std::string& impl_spec);

// Runs the whole pipeline of (implementation, workload) in this process: inputs, reference and implementation over
// the source's rounds, the comparator, timing. Sets *sticky when the CUDA context is no longer usable.
// `shared_reference`: the timing reference's samples from an earlier run of the same workload in this bench (the
// runner keeps the first and hands them to the next implementations): used instead of timing the reference again
// when they are of the reference this run would time.
struct SharedReferenceTiming {
  std::string reference;       // gpu-reference | cpu-reference
  std::string implementation;  // the run that timed it
  TimingResult timing;

  nlohmann::json to_json() const;  // as the runner hands it to a worker with a run
  static SharedReferenceTiming from_json(const nlohmann::json& j);
};
RunResult execute_run(const WorkItem& item, const std::string& impl_spec, const BenchOptions& options, bool gpu,
                      bool* sticky, const SharedReferenceTiming* shared_reference = nullptr);

}  // namespace kindex::runner
