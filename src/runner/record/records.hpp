#pragma once
// A run's KernelIndex records (records.cpp), shared by the manifest files and the store row so both carry the
// same digests.
#include <cstdint>
#include <string>
#include <vector>

#include "runner/runner.hpp"
#include "evidence/manifest.hpp"
#include "store/store.hpp"

namespace kindex::runner {

struct RunRecords {
  evidence::Manifest environment, operation, workload, implementation, protocol, run;
  std::vector<double> samples;  // every timed sample, trials concatenated
  std::string samples_text, samples_uri, samples_digest;  // empty without samples
};

// How an implementation given by a file (a library, a solution) is identified in its ImplementationRevision: the
// file's "sha256:<hex>" and size, computed once per (path, size, modification time) in a process. A file that cannot
// be read has the digest of no bytes.
struct FileDigest {
  std::string digest;
  int64_t size = 0;
};
FileDigest file_digest(const std::string& path);

// `samples_in_files`: the run manifest points at samples/<hex>.json under --out, else at the store's copy.
RunRecords run_records(const RunResult& r, const WorkItem& item, const Environment& environment,
                       bool samples_in_files);
// The run as the store records it (store::Store::record_run): its records, samples, floor and interval. Written by
// the store sink, and by `kindex worker` in the transaction that also closes its queued run (sink_store.cpp).
store::OwnRun own_run(const RunResult& r, const WorkItem& item, const Environment& environment, bool samples_in_files);

}  // namespace kindex::runner
