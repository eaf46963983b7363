#pragma once
// KernelIndex comparison keys and the run facts its publication derives from a BenchmarkRun manifest
// (established against every row of the public export; docs/evidence.md):
//   protocolKey     = digest of the BenchmarkProtocol manifest (= the run's spec.protocolDigest)
//   environmentKey  = digest of the ExecutionEnvironment manifest (= the run's spec.environmentDigest)
//   correctnessKey  = sha256(JCS({"correctness": workload.spec.correctness}))
//   primary         = from spec.timing when it has a central latency ("latency", timing.primaryStatistic, "ns";
//                     the mean when the statistic is "mean", else the median, each falling back to the other),
//                     otherwise the first of spec.measurements (its metric, statistic, unit, value), else none
//   metric          = "<metric>:<statistic>:<unit>" of the primary (e.g. "latency:mean:ns", "score:geomean:s"),
//                     "none" without one
//   comparisonKey   = sha256(JCS({v:1, operation, workload, protocol, environment, correctness, metric}))
//                     with operation = OperationSpec digest, workload = WorkloadCase/Suite digest and the keys above.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "evidence/manifest.hpp"  // RunMeasurement

namespace kindex::evidence {

std::string correctness_key(const nlohmann::json& workload_correctness);

// The primary measurement of a BenchmarkRun manifest (normalised: latencies in integer ns), nullopt for none.
std::optional<RunMeasurement> run_primary(const nlohmann::json& run_manifest);
// Every measurement row KernelIndex expands from a run: the timing statistics (latency, ns: median, mean, p05,
// p95, min, max, mad) followed by spec.measurements.
std::vector<RunMeasurement> run_measurements(const nlohmann::json& run_manifest);

std::string metric_key(const std::optional<RunMeasurement>& primary);  // nullopt -> "none"
std::string run_metric_key(const nlohmann::json& run_manifest);

// The benchmark_runs columns that restate the run manifest ({run, protocol, environment}, normalised), with the
// values KernelIndex's publication writes: status, observedAt (UTC, milliseconds), primaryMetric, primaryValue,
// primaryUnit, primaryStatistic, sampleCount, uncertaintyLow/High, hasRawEvidence, sourceNative, hardwareVendor,
// hardwareModel, hardwareArchitecture. Absent facts are null.
std::vector<std::pair<std::string, nlohmann::json>> run_row_facts(const nlohmann::json& run_manifest,
                                                                  const nlohmann::json& environment_manifest);

// The serving tables (ServingWorkload, ServingConfiguration, ServingStackRevision, ServingRun, ModelRevision
// manifests): the columns a row of `table` restates from the manifest it carries, as KernelIndex's export writes
// them (checked against every row of the public serving export): model_revisions slug, name (spec.model),
// parameterCount, contextLength, license, schemaVersion; serving_stack_revisions slug, version; serving_configurations
// dtype, quantization, tensorParallel; serving_workloads slug, name (metadata.title), streaming, loadGeneration;
// serving_runs status, observedAt, qualityPolicy, scenario (spec.sourceNative.scenario), acceleratorVendor,
// acceleratorModel, acceleratorCount (per node), nodeCount, totalAccelerators (nodes x per node). The manifest
// digest column of each table, and the digests a run or configuration names, are checked by the importer. A
// ServingRun's measurement rows are run_measurements (its spec.measurements). {} for another table.
std::vector<std::pair<std::string, nlohmann::json>> serving_row_facts(const std::string& table,
                                                                      const nlohmann::json& manifest);
// The column of a serving table that holds its manifest's digest ("modelDigest", ..., "runDigest"); "" for another.
std::string serving_digest_column(const std::string& table);

// Whether a stated column value equals the recomputed one (numbers by value, a missing key as null, observedAt
// and other instants by the instant they name).
bool same_fact(const std::string& column, const nlohmann::json& stated, const nlohmann::json& computed);

struct ComparisonParts {
  std::string operation;    // OperationSpec digest (semanticDigest)
  std::string workload;     // workload digest
  std::string protocol;     // protocolKey
  std::string environment;  // environmentKey
  std::string correctness;  // correctnessKey
  std::string metric;       // metric key
};
std::string comparison_key(const ComparisonParts& parts);

}  // namespace kindex::evidence
