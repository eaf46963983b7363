#include "evidence/keys.hpp"

#include "evidence/digest.hpp"
#include "evidence/manifest.hpp"

namespace kindex::evidence {

using nlohmann::json;

namespace {

const json& member(const json& j, const char* key) {
  static const json null_value;
  if (!j.is_object()) return null_value;
  const auto it = j.find(key);
  return it == j.end() ? null_value : *it;
}

std::optional<int64_t> integer_member(const json& j, const char* key) {
  const json& v = member(j, key);
  if (v.is_number_integer()) return v.get<int64_t>();
  return std::nullopt;
}

RunMeasurement measured(std::string metric, std::string statistic, std::string unit, double value,
                        std::optional<int64_t> sample_count) {
  RunMeasurement m;
  m.metric = std::move(metric);
  m.statistic = std::move(statistic);
  m.unit = std::move(unit);
  m.value = value;
  m.sample_count = sample_count;
  return m;
}

}  // namespace

std::string correctness_key(const json& workload_correctness) {
  return sha256_digest({{"correctness", workload_correctness}});
}

std::optional<RunMeasurement> run_primary(const json& run_manifest) {
  const json& spec = member(run_manifest, "spec");
  const json& timing = member(spec, "timing");
  if (timing.is_object()) {
    const json& latency = member(timing, "latencyNs");
    const std::string statistic = member(timing, "primaryStatistic").is_string()
                                      ? member(timing, "primaryStatistic").get<std::string>()
                                      : std::string();
    const json& mean = member(latency, "mean");
    const json& median = member(latency, "median");
    const json& central = statistic == "mean" ? (mean.is_number() ? mean : median) : (median.is_number() ? median : mean);
    if (central.is_number()) return measured("latency", statistic, "ns", central.get<double>(), integer_member(timing, "samples"));
  }
  const json& measurements = member(spec, "measurements");
  if (measurements.is_array() && !measurements.empty()) {
    const json& first = measurements[0];
    return measured(member(first, "metric").get<std::string>(), member(first, "statistic").get<std::string>(),
                    member(first, "unit").get<std::string>(), member(first, "value").get<double>(),
                    integer_member(first, "sampleCount"));
  }
  return std::nullopt;
}

std::vector<RunMeasurement> run_measurements(const json& run_manifest) {
  std::vector<RunMeasurement> out;
  const json& spec = member(run_manifest, "spec");
  const json& timing = member(spec, "timing");
  if (timing.is_object()) {
    const json& latency = member(timing, "latencyNs");
    static const std::pair<const char*, const char*> stats[] = {{"median", "median"}, {"mean", "mean"},
                                                                {"p05", "p05"},       {"p95", "p95"},
                                                                {"min", "minimum"},   {"max", "maximum"},
                                                                {"mad", "mad"}};
    for (const auto& [statistic, key] : stats) {
      const json& v = member(latency, key);
      if (v.is_number()) out.push_back(measured("latency", statistic, "ns", v.get<double>(), integer_member(timing, "samples")));
    }
  }
  const json& extra = member(spec, "measurements");
  if (extra.is_array()) {
    for (const json& m : extra) {
      out.push_back(measured(member(m, "metric").get<std::string>(), member(m, "statistic").get<std::string>(),
                             member(m, "unit").get<std::string>(), member(m, "value").get<double>(),
                             integer_member(m, "sampleCount")));
    }
  }
  return out;
}

std::string metric_key(const std::optional<RunMeasurement>& primary) {
  return primary ? primary->metric + ":" + primary->statistic + ":" + primary->unit : "none";
}

std::string run_metric_key(const json& run_manifest) { return metric_key(run_primary(run_manifest)); }

std::vector<std::pair<std::string, json>> run_row_facts(const json& run_manifest, const json& environment_manifest) {
  const json& spec = member(run_manifest, "spec");
  const json& timing = member(spec, "timing");
  const json& interval = member(member(timing, "latencyNs"), "confidence95");
  const json& evidence = member(spec, "evidence");
  const json& hardware = member(member(environment_manifest, "spec"), "hardware");
  const auto primary = run_primary(run_manifest);
  const auto or_null = [](const auto& opt) { return opt ? json(*opt) : json(); };
  return {
      {"status", member(spec, "status")},
      {"observedAt", member(spec, "observedAt").is_string()
                         ? json(utc_instant(member(spec, "observedAt").get<std::string>(), "run", "observedAt"))
                         : json()},
      {"primaryMetric", primary ? json(primary->metric) : json("none")},
      {"primaryValue", primary ? json(primary->value) : json()},
      {"primaryUnit", primary ? json(primary->unit) : json()},
      {"primaryStatistic", primary ? json(primary->statistic) : json()},
      {"sampleCount", primary ? or_null(primary->sample_count) : json()},
      {"uncertaintyLow", interval.is_array() && interval.size() == 2 ? interval[0] : json()},
      {"uncertaintyHigh", interval.is_array() && interval.size() == 2 ? interval[1] : json()},
      {"hasRawEvidence", !member(timing, "rawSamples").is_null() || !member(evidence, "rawSamples").is_null() ||
                             !member(evidence, "logs").is_null()},
      {"sourceNative", !member(spec, "sourceNative").is_null()},
      {"hardwareVendor", member(hardware, "vendor")},
      {"hardwareModel", member(hardware, "product")},
      {"hardwareArchitecture", member(hardware, "architecture")},
  };
}

std::vector<std::pair<std::string, json>> serving_row_facts(const std::string& table, const json& manifest) {
  const json& spec = member(manifest, "spec");
  const json& metadata = member(manifest, "metadata");
  const json& schema_version = member(manifest, "apiVersion");
  if (table == "model_revisions")
    return {{"slug", member(metadata, "name")},
            {"name", member(spec, "model")},
            {"parameterCount", member(spec, "parameterCount")},
            {"contextLength", member(spec, "contextLength")},
            {"license", member(spec, "license")},
            {"schemaVersion", schema_version}};
  if (table == "serving_stack_revisions")
    return {{"slug", member(metadata, "name")},
            {"version", member(member(spec, "revision"), "version")},
            {"schemaVersion", schema_version}};
  if (table == "serving_configurations")
    return {{"dtype", member(spec, "dtype")},
            {"quantization", member(spec, "quantization")},
            {"tensorParallel", member(member(spec, "parallelism"), "tensor")},
            {"schemaVersion", schema_version}};
  if (table == "serving_workloads")
    return {{"slug", member(metadata, "name")},
            {"name", member(metadata, "title")},
            {"streaming", member(spec, "streaming")},
            {"loadGeneration", member(spec, "loadGeneration")},
            {"schemaVersion", schema_version}};
  if (table == "serving_runs") {
    const json& topology = member(spec, "topology");
    const json& per_node = member(topology, "acceleratorsPerNode");
    const json& nodes = member(topology, "nodeCount");
    json total;
    if (per_node.is_number_integer()) total = per_node.get<int64_t>() * (nodes.is_number_integer() ? nodes.get<int64_t>() : 1);
    const json& observed = member(spec, "observedAt");
    return {{"status", member(spec, "status")},
            {"observedAt", observed.is_string() ? json(utc_instant(observed.get<std::string>(), "run", "observedAt")) : json()},
            {"qualityPolicy", member(spec, "qualityPolicy")},
            {"scenario", member(member(spec, "sourceNative"), "scenario")},
            {"acceleratorVendor", member(topology, "acceleratorVendor")},
            {"acceleratorModel", member(topology, "acceleratorModel")},
            {"acceleratorCount", per_node},
            {"nodeCount", nodes},
            {"totalAccelerators", total},
            {"schemaVersion", schema_version}};
  }
  return {};
}

std::string serving_digest_column(const std::string& table) {
  if (table == "model_revisions") return "modelDigest";
  if (table == "serving_stack_revisions") return "stackDigest";
  if (table == "serving_configurations") return "configurationDigest";
  if (table == "serving_workloads") return "workloadDigest";
  if (table == "serving_runs") return "runDigest";
  return "";
}

bool same_fact(const std::string& column, const json& stated, const json& computed) {
  if (stated.is_null() || computed.is_null()) return stated.is_null() && computed.is_null();
  if (stated.is_number() && computed.is_number()) return stated.get<double>() == computed.get<double>();
  if (column == "observedAt" && stated.is_string() && computed.is_string()) {
    try {
      return utc_instant(stated.get<std::string>(), column, column) == computed.get<std::string>();
    } catch (const std::exception&) {
      return false;
    }
  }
  return stated == computed;
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
