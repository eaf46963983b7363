#pragma once
// A run's KernelIndex records (records.cpp), shared by the manifest files and the store row so both carry the
// same digests.
#include <string>
#include <vector>

#include "runner/runner.hpp"
#include "evidence/manifest.hpp"

namespace kindex::runner {

struct RunRecords {
  evidence::Manifest environment, operation, workload, implementation, protocol, run;
  std::vector<double> samples;  // every timed sample, trials concatenated
  std::string samples_text, samples_uri, samples_digest;  // empty without samples
};

// `samples_in_files`: the run manifest points at samples/<hex>.json under --out, else at the store's copy.
RunRecords run_records(const RunResult& r, const WorkItem& item, const Environment& environment,
                       bool samples_in_files);

}  // namespace kindex::runner
