#pragma once
// The store's tables: the KernelIndex export's tables and columns (snake_case), plus what kindex adds for its
// own runs (raw samples, whether a real GPU measured it, kindex's floor) and content-addressed manifests.
// Portable DDL: SQLite and PostgreSQL both accept it.
namespace kindex::store {

inline constexpr const char* kSchema = R"SQL(
CREATE TABLE IF NOT EXISTS manifests (
  digest TEXT PRIMARY KEY, kind TEXT NOT NULL, document TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sources (
  id TEXT PRIMARY KEY, slug TEXT NOT NULL UNIQUE, kind TEXT, name TEXT, policy TEXT, created_at TEXT);
CREATE TABLE IF NOT EXISTS projects (
  id TEXT PRIMARY KEY, slug TEXT NOT NULL UNIQUE, name TEXT, normalized_name TEXT, canonical_url TEXT,
  license_expression TEXT, manifest TEXT, created_at TEXT);
CREATE TABLE IF NOT EXISTS operations (
  id TEXT PRIMARY KEY, slug TEXT NOT NULL UNIQUE, family TEXT, name TEXT, schema_version TEXT,
  semantic_digest TEXT NOT NULL, manifest TEXT NOT NULL, tags TEXT, created_at TEXT, supersedes_id TEXT);
CREATE TABLE IF NOT EXISTS operation_aliases (
  operation_id TEXT NOT NULL REFERENCES operations(id), alias TEXT NOT NULL, PRIMARY KEY (operation_id, alias));
CREATE TABLE IF NOT EXISTS workloads (
  id TEXT PRIMARY KEY, operation_id TEXT NOT NULL REFERENCES operations(id), workload_digest TEXT NOT NULL,
  kind TEXT NOT NULL, schema_version TEXT, manifest TEXT NOT NULL, shape_summary TEXT, dtypes TEXT,
  layout_keys TEXT, created_at TEXT, UNIQUE (operation_id, workload_digest));
CREATE TABLE IF NOT EXISTS implementations (
  id TEXT PRIMARY KEY, project_id TEXT REFERENCES projects(id), operation_id TEXT NOT NULL REFERENCES operations(id),
  slug TEXT NOT NULL, implementation_digest TEXT NOT NULL, source_revision TEXT, language TEXT, framework TEXT,
  target_architectures TEXT, license_expression TEXT, source_available BIGINT NOT NULL DEFAULT 0,
  installable BIGINT NOT NULL DEFAULT 0, title TEXT, install_kind TEXT, install_command TEXT,
  license_declared TEXT, manifest TEXT NOT NULL, created_at TEXT, supersedes_id TEXT,
  UNIQUE (operation_id, implementation_digest));
CREATE TABLE IF NOT EXISTS protocols (digest TEXT PRIMARY KEY, manifest TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS environments (digest TEXT PRIMARY KEY, manifest TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS benchmark_runs (
  id TEXT PRIMARY KEY, run_digest TEXT NOT NULL UNIQUE,
  implementation_id TEXT NOT NULL REFERENCES implementations(id), workload_id TEXT NOT NULL REFERENCES workloads(id),
  source_id TEXT REFERENCES sources(id), status TEXT NOT NULL, observed_at TEXT, published_at TEXT,
  hardware_vendor TEXT, hardware_model TEXT, hardware_architecture TEXT, driver_major BIGINT, cuda_major BIGINT,
  protocol_key TEXT NOT NULL REFERENCES protocols(digest), environment_key TEXT NOT NULL REFERENCES environments(digest),
  correctness_key TEXT NOT NULL, comparison_key TEXT NOT NULL,
  primary_metric TEXT, primary_value DOUBLE PRECISION, primary_unit TEXT, sample_count BIGINT,
  uncertainty_low DOUBLE PRECISION, uncertainty_high DOUBLE PRECISION,
  reported BIGINT NOT NULL DEFAULT 1, reproduced_by_kernelindex BIGINT NOT NULL DEFAULT 0,
  independent_replication_count BIGINT NOT NULL DEFAULT 0, source_available BIGINT NOT NULL DEFAULT 0,
  installable BIGINT NOT NULL DEFAULT 0, license_expression TEXT, primary_statistic TEXT,
  has_raw_evidence BIGINT NOT NULL DEFAULT 0, source_native BIGINT NOT NULL DEFAULT 0, environment_summary TEXT,
  supersedes_id TEXT, retracted_at TEXT, retraction_reason TEXT,
  origin TEXT NOT NULL, real_gpu BIGINT NOT NULL DEFAULT 0, kindex_floor_ns DOUBLE PRECISION);
-- The run's canonical manifest ({run, protocol, environment}) lives apart so that ranking queries read slim rows.
CREATE TABLE IF NOT EXISTS run_manifests (
  run_id TEXT PRIMARY KEY REFERENCES benchmark_runs(id), manifest TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS measurements (
  id TEXT PRIMARY KEY, run_id TEXT NOT NULL REFERENCES benchmark_runs(id), metric TEXT NOT NULL,
  statistic TEXT NOT NULL, unit TEXT NOT NULL, value DOUBLE PRECISION NOT NULL, sample_count BIGINT);
CREATE TABLE IF NOT EXISTS run_samples (
  run_id TEXT NOT NULL REFERENCES benchmark_runs(id), idx BIGINT NOT NULL, value_ns DOUBLE PRECISION NOT NULL,
  PRIMARY KEY (run_id, idx));
CREATE TABLE IF NOT EXISTS record_events (
  id TEXT PRIMARY KEY, comparison_key TEXT NOT NULL, run_id TEXT REFERENCES benchmark_runs(id),
  previous_run_id TEXT, policy_version TEXT NOT NULL, cause TEXT NOT NULL, at TEXT NOT NULL, created_at TEXT);
-- Reruns (`kindex rerun`): a run whose manifest's metadata.labels.reproduces_run names another run's runDigest
-- re-measured that run; same_implementation is 0 when its label rerun_same_implementation says it ran another
-- implementation (an --impl override). Derived from the manifest as the row is inserted (rows.cpp insert_row),
-- never written otherwise; by digest, so the original may arrive later than its rerun (an export's row order) or
-- not at all.
CREATE TABLE IF NOT EXISTS run_reruns (
  run_id TEXT PRIMARY KEY REFERENCES benchmark_runs(id), reproduces_run_digest TEXT NOT NULL,
  same_implementation BIGINT NOT NULL);
CREATE INDEX IF NOT EXISTS ix_reruns_original ON run_reruns(reproduces_run_digest);
-- Signed rerun attestations (evidence/attestation.hpp, store/attestations.hpp): the document as signed, filed by the
-- digests its statement names so that either run may arrive later. Kept only when its signature verifies; whether
-- it is shown as verified (trusted key, statement matching the store) is decided when read.
CREATE TABLE IF NOT EXISTS run_attestations (
  id TEXT PRIMARY KEY, rerun_digest TEXT NOT NULL, original_run_digest TEXT NOT NULL, key_id TEXT NOT NULL,
  document TEXT NOT NULL, created_at TEXT);
CREATE INDEX IF NOT EXISTS ix_attestations_original ON run_attestations(original_run_digest);
CREATE INDEX IF NOT EXISTS ix_attestations_rerun ON run_attestations(rerun_digest);
-- The signers this store trusts (`kindex attest trust`, or the key `kindex rerun --sign` signed with here).
CREATE TABLE IF NOT EXISTS attestation_keys (
  key_id TEXT PRIMARY KEY, public_key TEXT NOT NULL, name TEXT, created_at TEXT);
-- What this store's user follows (store/feed.hpp): an operation id, a comparisonKey, GPU text, a model name or a
-- project id, with the text it was given as.
CREATE TABLE IF NOT EXISTS follows (
  kind TEXT NOT NULL, target TEXT NOT NULL, label TEXT NOT NULL, created_at TEXT, PRIMARY KEY (kind, target));
-- Content-addressed evidence objects (kernel sources, logs) as the export lists them: digest and location, no body.
CREATE TABLE IF NOT EXISTS artifacts (
  id TEXT PRIMARY KEY, content_digest TEXT NOT NULL UNIQUE, kind TEXT NOT NULL, media_type TEXT NOT NULL,
  size_bytes BIGINT, storage TEXT NOT NULL, uri TEXT, license TEXT, created_at TEXT);
-- Serving evidence (end-to-end serving results: a model on a serving stack's configuration under a workload), the
-- export's serving tables. Each row keeps the manifest it was digested from; a stack's project_id is the export's
-- and may name a project no export row carries (KernelIndex files MLPerf submitters that way), so it is no foreign key.
CREATE TABLE IF NOT EXISTS model_revisions (
  id TEXT PRIMARY KEY, slug TEXT NOT NULL, model_digest TEXT NOT NULL UNIQUE, name TEXT, parameter_count BIGINT,
  context_length BIGINT, tokenizer TEXT, license TEXT, schema_version TEXT, manifest TEXT NOT NULL, created_at TEXT);
CREATE TABLE IF NOT EXISTS serving_stack_revisions (
  id TEXT PRIMARY KEY, project_id TEXT, slug TEXT NOT NULL, stack_digest TEXT NOT NULL UNIQUE, name TEXT, version TEXT,
  schema_version TEXT, manifest TEXT NOT NULL, created_at TEXT);
CREATE TABLE IF NOT EXISTS serving_configurations (
  id TEXT PRIMARY KEY, stack_revision_id TEXT NOT NULL REFERENCES serving_stack_revisions(id),
  configuration_digest TEXT NOT NULL UNIQUE, dtype TEXT, quantization TEXT, tensor_parallel BIGINT, summary TEXT,
  schema_version TEXT, manifest TEXT NOT NULL, created_at TEXT);
CREATE TABLE IF NOT EXISTS serving_workloads (
  id TEXT PRIMARY KEY, workload_digest TEXT NOT NULL UNIQUE, slug TEXT NOT NULL, name TEXT,
  streaming BIGINT NOT NULL DEFAULT 0, load_generation TEXT, schema_version TEXT, manifest TEXT NOT NULL, created_at TEXT);
CREATE TABLE IF NOT EXISTS serving_runs (
  id TEXT PRIMARY KEY, run_digest TEXT NOT NULL UNIQUE, model_revision_id TEXT NOT NULL REFERENCES model_revisions(id),
  configuration_id TEXT NOT NULL REFERENCES serving_configurations(id),
  workload_id TEXT NOT NULL REFERENCES serving_workloads(id), source_id TEXT REFERENCES sources(id),
  status TEXT NOT NULL, observed_at TEXT, published_at TEXT, cohort_key TEXT, protocol_key TEXT, quality_policy TEXT,
  metric_set_key TEXT, scenario TEXT, accelerator_vendor TEXT, accelerator_model TEXT, accelerator_count BIGINT,
  node_count BIGINT, total_accelerators BIGINT, reported BIGINT NOT NULL DEFAULT 1, schema_version TEXT,
  manifest TEXT NOT NULL, supersedes_id TEXT, retracted_at TEXT, retraction_reason TEXT, created_at TEXT);
CREATE TABLE IF NOT EXISTS serving_measurements (
  id TEXT PRIMARY KEY, run_id TEXT NOT NULL REFERENCES serving_runs(id), metric TEXT NOT NULL, statistic TEXT NOT NULL,
  unit TEXT NOT NULL, value DOUBLE PRECISION NOT NULL, sample_count BIGINT);
CREATE INDEX IF NOT EXISTS ix_serving_runs_model ON serving_runs(model_revision_id, accelerator_model);
CREATE INDEX IF NOT EXISTS ix_serving_meas_run ON serving_measurements(run_id);
CREATE INDEX IF NOT EXISTS ix_alias ON operation_aliases(alias);
CREATE INDEX IF NOT EXISTS ix_workloads_op ON workloads(operation_id);
CREATE INDEX IF NOT EXISTS ix_impl_op ON implementations(operation_id);
CREATE INDEX IF NOT EXISTS ix_events_cohort ON record_events(comparison_key);
)SQL";

// The secondary indexes of runs and measurements, apart from kSchema: a large import builds them once after its
// rows are in (Store::defer_run_indexes) instead of inserting every row into each of them.
inline constexpr const char* kRunIndexNames[] = {"ix_runs_workload", "ix_runs_cohort", "ix_runs_by_impl",
                                                 "ix_runs_supersedes", "ix_meas_run"};
inline constexpr const char* kRunIndexes = R"SQL(
-- Covers the per-workload questions (ranked lists, best per implementation, plots, the operation page's pass over
-- its runs with their evidence flags) without reading run rows. (ix_runs_by_workload, its earlier form, had no
-- evidence flags.)
DROP INDEX IF EXISTS ix_runs_by_workload;
CREATE INDEX IF NOT EXISTS ix_runs_workload ON benchmark_runs(workload_id, status, primary_value, implementation_id,
  hardware_model, retracted_at, comparison_key, reproduced_by_kernelindex, independent_replication_count,
  source_available, has_raw_evidence);
-- Covers ranking a cohort (Store::cohort) without reading run rows.
-- (ix_runs_ranking, its earlier form, covered installable instead of has_raw_evidence.)
DROP INDEX IF EXISTS ix_runs_ranking;
CREATE INDEX IF NOT EXISTS ix_runs_cohort ON benchmark_runs(comparison_key, status, primary_value, retracted_at, id,
  uncertainty_low, uncertainty_high, reproduced_by_kernelindex, independent_replication_count, source_available,
  has_raw_evidence, observed_at, source_native, kindex_floor_ns);
CREATE INDEX IF NOT EXISTS ix_runs_by_impl ON benchmark_runs(implementation_id, workload_id, status, primary_value,
  retracted_at, reproduced_by_kernelindex);
CREATE INDEX IF NOT EXISTS ix_meas_run ON measurements(run_id);
CREATE INDEX IF NOT EXISTS ix_runs_supersedes ON benchmark_runs(supersedes_id);
)SQL";

// A run's evidence as KernelIndex derives it from the reruns that reproduce it, over `benchmark_runs r`: the stored
// flags (what the source published) plus the reruns of the same implementation by kindex's controlled runner that
// passed on a real GPU with raw samples (their own reproduced_by_kernelindex) and are not retracted. Any such rerun makes the original
// reproduced by the index (verified); each distinct environment (GPU, driver, CUDA, libraries) they ran in counts
// as one independent replication (replicated from two). Computed when read: the original's row is never rewritten.
#define KINDEX_VALID_RERUNS_OF_R                                                                                      \
  "FROM run_reruns rp JOIN benchmark_runs rx ON rx.id = rp.run_id WHERE rp.reproduces_run_digest = r.run_digest " \
  "AND rp.same_implementation <> 0 AND rx.status = 'passed' AND rx.reproduced_by_kernelindex <> 0 AND rx.retracted_at IS NULL"
inline constexpr const char* kDerivedReproducedSql =
    "(CASE WHEN r.reproduced_by_kernelindex <> 0 OR EXISTS (SELECT 1 " KINDEX_VALID_RERUNS_OF_R ") THEN 1 ELSE 0 END)";
inline constexpr const char* kDerivedReplicationsSql =
    "(r.independent_replication_count + (SELECT COUNT(DISTINCT rx.environment_key) " KINDEX_VALID_RERUNS_OF_R "))";
#undef KINDEX_VALID_RERUNS_OF_R

}  // namespace kindex::store
