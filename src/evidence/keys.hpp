#pragma once
// KernelIndex comparison keys (established against every row of the public export slice; docs/evidence.md):
//   protocolKey     = digest of the BenchmarkProtocol manifest (= the run's spec.protocolDigest)
//   environmentKey  = digest of the ExecutionEnvironment manifest (= the run's spec.environmentDigest)
//   correctnessKey  = sha256(JCS({"correctness": workload.spec.correctness}))
//   metric          = "latency:<primaryStatistic>:ns" for a run with timing, "none" without
//   comparisonKey   = sha256(JCS({v:1, operation, workload, protocol, environment, correctness, metric}))
//                     with operation = OperationSpec digest, workload = WorkloadCase/Suite digest and the keys above.
#include <string>

#include <nlohmann/json.hpp>

namespace kindex::evidence {

std::string correctness_key(const nlohmann::json& workload_correctness);
std::string metric_key(const std::string& primary_statistic);  // "" -> "none"
// The metric of a BenchmarkRun manifest: from spec.timing.primaryStatistic, "none" when it has no timing.
std::string run_metric_key(const nlohmann::json& run_manifest);

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
