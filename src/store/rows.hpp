#pragma once
// Export-shaped rows: every writer (export import, trace import, manifest import, kindex's own runs) turns what
// it has into the KernelIndex export's row shape ({"id": ..., "runDigest": ..., camelCase keys}) and inserts it
// through insert_row, so there is one mapping from the export format to the tables.
#include <nlohmann/json.hpp>

#include <optional>
#include <string>

#include "store/db.hpp"

namespace kindex::store {

// Inserts one row of an export table (sources, projects, operations, operation_aliases, workloads,
// implementations, benchmark_runs, measurements, record_events, artifacts, and the serving tables model_revisions,
// serving_stack_revisions, serving_configurations, serving_workloads, serving_runs, serving_measurements) or of
// kindex's tables (protocols, environments, run_samples, manifests). Unknown keys are an error (naming `where`); a row whose key already exists inserts
// nothing. Returns whether a row was inserted.
bool insert_row(Db& db, const std::string& table, const nlohmann::json& row, const std::string& where);

// The columns (export keys, camelCase) of a table, in order.
const std::vector<std::string>& table_keys(const std::string& table);

// The member `key` of an object, or a shared empty object: safe to iterate with .items() (iterating the
// temporary that json::value() returns would dangle).
inline const nlohmann::json& member_or_empty(const nlohmann::json& j, const std::string& key) {
  static const nlohmann::json empty = nlohmann::json::object();
  if (!j.is_object()) return empty;
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? empty : *it;
}

// The label of a BenchmarkRun manifest (metadata.labels, outside its digest) by which a rerun names the run it
// re-measured: that run's runDigest. insert_row files it in run_reruns.
inline constexpr const char* kReproducesRunLabel = "reproduces_run";
// "false" when the rerun ran another implementation than the run it names (given with --impl): it is linked and
// shown, but adds nothing to that run's evidence. Absent or "true": the same implementation.
inline constexpr const char* kSameImplementationLabel = "rerun_same_implementation";
struct Reproduction {
  std::string run_digest;
  bool same_implementation = true;
};
// A run manifest's ({run, protocol, environment}) reproduction labels, if it names a run; a reproduces_run that is
// not a runDigest, or a rerun_same_implementation other than "true" / "false", is an Error naming `where` and the
// label.
std::optional<Reproduction> reproduction_of(const nlohmann::json& run_manifest, const std::string& where);

// "runDigest" -> "run_digest".
std::string snake_case(const std::string& camel);

}  // namespace kindex::store
