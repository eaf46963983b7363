#pragma once
// The evidence store: KernelIndex's model (sources, projects, operations + aliases, workloads, implementations,
// protocols, environments, runs, measurements, raw samples, record events) over one Db seam, SQLite by default
// and PostgreSQL for a shared index. Everything is content-addressed by KernelIndex digest, so recording or
// importing the same thing twice inserts nothing. Runs are append-only; records move only by appended events.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "store/db.hpp"
#include "store/ranking.hpp"

namespace kindex::store {

struct Measurement {
  std::string metric = "latency";
  std::string statistic = "mean";  // mean, median, min, p05, p95, mad ...
  std::string unit = "ns";
  double value = 0;
  std::optional<int64_t> sample_count;
};

// A run kindex measured itself (`kindex bench`): the KernelIndex manifests the runner wrote (full envelopes
// {apiVersion, kind, metadata, spec}), its measurements and raw samples. The run manifest's stated digests
// (operationSpecDigest in the workload, protocolDigest, workloadDigest, environmentDigest,
// implementationDigest in the run) must match the manifests given; record_run checks them.
struct OwnRun {
  nlohmann::json operation;       // OperationSpec
  nlohmann::json workload;        // WorkloadCase (or WorkloadSuite)
  nlohmann::json implementation;  // ImplementationRevision
  std::optional<nlohmann::json> project;  // SoftwareProject (defaults to a "kindex" project)
  nlohmann::json protocol;        // BenchmarkProtocol
  nlohmann::json environment;     // ExecutionEnvironment
  nlohmann::json run;             // BenchmarkRun
  std::string definition_name;    // alias users search by, e.g. "gqa_paged_decode_h24_kv4_d128_ps64"
  std::vector<Measurement> measurements = {};  // empty: taken from run.spec.timing.latencyNs
  std::vector<double> samples_ns = {};         // raw per-iteration times, in order (all trials concatenated)
  bool real_gpu = false;                       // measured on a GPU (false: the CPU path)
  std::optional<double> kindex_floor_ns = {};  // kindex's tighter floor (bytes referenced / measured BW ...)
  std::optional<double> interval_low_ns = {}, interval_high_ns = {};  // 95% interval of the primary statistic
  // Who measured it: "kindex" (this runner), or the source an importer read it from ("flashinfer-bench",
  // "sol-execbench", "manifest"). Anything but "kindex" is stored as reported by its source.
  std::string origin = "kindex";
};

// The JSON form of an OwnRun (a line of a kindex bench records file, `kindex import` reads it back):
// {"kindexRun": 1, "operation": {...}, "workload": {...}, "implementation": {...}, "project": {...}?,
//  "protocol": {...}, "environment": {...}, "run": {...}, "definitionName": "...", "measurements": [...],
//  "samplesNs": [...], "realGpu": bool, "kindexFloorNs": n?, "intervalNs": [low, high]?}
nlohmann::json to_json(const OwnRun& run);
OwnRun own_run_from_json(const nlohmann::json& j, const std::string& where);

struct RecordResult {
  std::string run_id;
  std::string run_digest;
  std::string comparison_key;
  bool inserted = false;    // false: the same run (same runDigest) was already stored
  bool new_record = false;  // the run became its cohort's record (a new_run record event was appended)
};

struct PutResult {
  std::string digest;
  bool inserted = false;
};

class Store {
 public:
  // "sqlite:PATH", a plain PATH, ":memory:", or "postgresql://..." / "postgres://...". Creates the schema.
  static std::unique_ptr<Store> open(const std::string& uri);
  explicit Store(std::unique_ptr<Db> db);
  ~Store();

  Db& db() { return *db_; }
  const std::string& backend() const { return backend_; }

  // Validates a manifest strictly, computes its digest, and keeps it (idempotent).
  PutResult put_manifest(const nlohmann::json& manifest, const std::string& where = "manifest");
  std::optional<nlohmann::json> manifest(const std::string& digest);

  // Records one of kindex's own runs with its manifests, measurements and samples, in one transaction.
  RecordResult record_run(const OwnRun& run);
  // Appends a retraction: the run leaves its cohort's ranking; if it held the record, a `retraction` event
  // names the new holder. The run row itself stays (append-only).
  void retract_run(const std::string& run_id, const std::string& reason, const std::string& at);

  // Appends a record event when the cohort's best valid run is no longer the holder of its last event
  // (cause new_run, retraction or supersession). Importers call it after inserting runs; idempotent.
  bool update_record(const std::string& comparison_key);

  // The valid members of a cohort (passed, not retracted, not superseded), ranked by ranking-v1.
  std::vector<Ranked> cohort(const std::string& comparison_key, bool* source_native = nullptr);

  // SQLite "PRAGMA integrity_check" (or a trivial query on PostgreSQL): "ok" when healthy.
  std::string integrity_check();
  // Row counts per table, for import reports and tests.
  nlohmann::json counts();

 private:
  void create_schema();
  std::unique_ptr<Db> db_;
  std::string backend_;

 public:
  // A value computed from the store's content, kept until the content changes (Db::content_version); null when
  // absent or stale. Lets the pages of one operation share what they all compute.
  std::shared_ptr<const void> remembered(const std::string& key);
  void remember(const std::string& key, std::shared_ptr<const void> value);
  // remembered(key), else compute() and remember it; callers asking at once wait for one computation instead of
  // each computing it (the first requests of a server all ask for the same operation).
  std::shared_ptr<const void> remembered_or(const std::string& key, const std::function<std::shared_ptr<const void>()>& compute);

 private:
  struct Memo;
  std::unique_ptr<Memo> memo_;
};

// Whether a store URI names a PostgreSQL server ("postgresql://...", "postgres://..." or a "dbname=..." string).
bool is_postgres_uri(const std::string& uri);

// A stable UUID-shaped id derived from a digest ("sha256:abcd..." -> "abcd....-...."), for rows kindex creates.
std::string id_from_digest(const std::string& digest);

}  // namespace kindex::store
