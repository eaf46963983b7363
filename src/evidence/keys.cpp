#include "evidence/keys.hpp"

#include "evidence/digest.hpp"

namespace kindex::evidence {

std::string correctness_key(const nlohmann::json& workload_correctness) {
  return sha256_digest({{"correctness", workload_correctness}});
}

std::string metric_key(const std::string& primary_statistic) {
  return primary_statistic.empty() ? "none" : "latency:" + primary_statistic + ":ns";
}

std::string run_metric_key(const nlohmann::json& run_manifest) {
  const auto ptr = nlohmann::json::json_pointer("/spec/timing/primaryStatistic");
  if (!run_manifest.contains(ptr) || !run_manifest.at(ptr).is_string()) return metric_key("");
  return metric_key(run_manifest.at(ptr).get<std::string>());
}

std::string comparison_key(const ComparisonParts& parts) {
  return sha256_digest({{"v", 1},
                        {"operation", parts.operation},
                        {"workload", parts.workload},
                        {"protocol", parts.protocol},
                        {"environment", parts.environment},
                        {"correctness", parts.correctness},
                        {"metric", parts.metric}});
}

}  // namespace kindex::evidence
