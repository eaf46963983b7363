#pragma once
// Importers: every input kindex accepts becomes rows of the store, idempotently (a second import inserts
// nothing) and only after every digest it states has been recomputed and matched.
//   - KernelIndex export (.jsonl.zst or .jsonl of {"table","row"})
//   - KernelIndex manifests (YAML/JSON, strictly validated); a BenchmarkRun whose referenced manifests are all
//     present becomes a run
//   - FlashInfer-Bench / SOL-ExecBench traces (JSONL) with their definitions (and FIB solutions)
//   - kindex's own bench records (JSONL of OwnRun, see store.hpp)
//   - signed rerun attestations (JSONL of evidence/attestation.hpp documents; a signature that does not verify
//     refuses the import)
#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

#include "store/store.hpp"

namespace kindex::store {

struct ImportReport {
  std::map<std::string, int64_t> inserted;  // per table
  std::map<std::string, int64_t> skipped;   // already present
  int64_t record_events = 0;                // events appended by kindex's record keeping
  std::vector<std::string> warnings;        // e.g. rows of an export table this version does not know, skipped
  int64_t total_inserted() const;
  nlohmann::json to_json() const;
};

struct ImportOptions {
  std::vector<std::string> definitions;  // FIB/SOL definition files or directories (for traces)
  std::vector<std::string> solutions;    // FIB solution files or directories (for traces)
  std::string source;                    // force "flashinfer-bench" or "sol-execbench" for traces ("" = guess)
  // An export that inserts this many runs drops the run and measurement indexes (schema.hpp kRunIndexes) and
  // builds them again once its rows are in, in the same transaction: one sort per index instead of an insertion
  // into each for every row. 0: never.
  int64_t build_indexes_after_runs = 4096;
};

// Detects the format of each file (by name and first line) and imports it.
ImportReport import_files(Store& store, const std::vector<std::string>& paths, const ImportOptions& options = {});

ImportReport import_export(Store& store, const std::string& path, const ImportOptions& options = {});
ImportReport import_manifests(Store& store, const std::vector<std::string>& paths);
ImportReport import_traces(Store& store, const std::string& path, const ImportOptions& options);
ImportReport import_own_records(Store& store, const std::string& path);
ImportReport import_attestations(Store& store, const std::string& path);

}  // namespace kindex::store
