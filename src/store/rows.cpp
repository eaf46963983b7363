#include "store/rows.hpp"

#include <algorithm>
#include <map>

#include "core/error.hpp"
#include "evidence/digest.hpp"

namespace kindex::store {
namespace {

const std::map<std::string, std::vector<std::string>>& all_tables() {
  static const std::map<std::string, std::vector<std::string>> tables = {
      {"manifests", {"digest", "kind", "document"}},
      {"sources", {"id", "slug", "kind", "name", "policy", "createdAt"}},
      {"projects",
       {"id", "slug", "name", "normalizedName", "canonicalUrl", "licenseExpression", "manifest", "createdAt"}},
      {"operations",
       {"id", "slug", "family", "name", "schemaVersion", "semanticDigest", "manifest", "tags", "createdAt",
        "supersedesId"}},
      {"operation_aliases", {"operationId", "alias"}},
      {"workloads",
       {"id", "operationId", "workloadDigest", "kind", "schemaVersion", "manifest", "shapeSummary", "dtypes",
        "layoutKeys", "createdAt"}},
      {"implementations",
       {"id", "projectId", "operationId", "slug", "implementationDigest", "sourceRevision", "language", "framework",
        "targetArchitectures", "licenseExpression", "sourceAvailable", "installable", "title", "installKind",
        "installCommand", "licenseDeclared", "manifest", "createdAt", "supersedesId"}},
      {"protocols", {"digest", "manifest"}},
      {"environments", {"digest", "manifest"}},
      {"benchmark_runs",
       {"id", "runDigest", "implementationId", "workloadId", "sourceId", "status", "observedAt", "publishedAt",
        "hardwareVendor", "hardwareModel", "hardwareArchitecture", "driverMajor", "cudaMajor", "protocolKey",
        "environmentKey", "correctnessKey", "comparisonKey", "primaryMetric", "primaryValue", "primaryUnit",
        "sampleCount", "uncertaintyLow", "uncertaintyHigh", "reported", "reproducedByKernelindex",
        "independentReplicationCount", "sourceAvailable", "installable", "licenseExpression", "primaryStatistic",
        "hasRawEvidence", "sourceNative", "environmentSummary", "supersedesId", "retractedAt",
        "retractionReason", "origin", "realGpu", "kindexFloorNs"}},
      {"run_manifests", {"runId", "manifest"}},
      {"run_reruns", {"runId", "reproducesRunDigest", "sameImplementation"}},
      {"measurements", {"id", "runId", "metric", "statistic", "unit", "value", "sampleCount"}},
      {"run_samples", {"runId", "idx", "valueNs"}},
      {"record_events",
       {"id", "comparisonKey", "runId", "previousRunId", "policyVersion", "cause", "at", "createdAt"}},
      {"run_attestations", {"id", "rerunDigest", "originalRunDigest", "keyId", "document", "createdAt"}},
      {"attestation_keys", {"keyId", "publicKey", "name", "createdAt"}},
      {"artifacts", {"id", "contentDigest", "kind", "mediaType", "sizeBytes", "storage", "uri", "license", "createdAt"}},
      {"model_revisions",
       {"id", "slug", "modelDigest", "name", "parameterCount", "contextLength", "tokenizer", "license", "schemaVersion",
        "manifest", "createdAt"}},
      {"serving_stack_revisions",
       {"id", "projectId", "slug", "stackDigest", "name", "version", "schemaVersion", "manifest", "createdAt"}},
      {"serving_configurations",
       {"id", "stackRevisionId", "configurationDigest", "dtype", "quantization", "tensorParallel", "summary",
        "schemaVersion", "manifest", "createdAt"}},
      {"serving_workloads",
       {"id", "workloadDigest", "slug", "name", "streaming", "loadGeneration", "schemaVersion", "manifest", "createdAt"}},
      {"serving_runs",
       {"id", "runDigest", "modelRevisionId", "configurationId", "workloadId", "sourceId", "status", "observedAt",
        "publishedAt", "cohortKey", "protocolKey", "qualityPolicy", "metricSetKey", "scenario", "acceleratorVendor",
        "acceleratorModel", "acceleratorCount", "nodeCount", "totalAccelerators", "reported", "schemaVersion",
        "manifest", "supersedesId", "retractedAt", "retractionReason", "createdAt"}},
      {"serving_measurements", {"id", "runId", "metric", "statistic", "unit", "value", "sampleCount"}},
  };
  return tables;
}

Value to_value(const nlohmann::json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::null: return std::monostate{};
    case nlohmann::json::value_t::boolean: return static_cast<int64_t>(v.get<bool>() ? 1 : 0);
    case nlohmann::json::value_t::number_integer: return v.get<int64_t>();
    case nlohmann::json::value_t::number_unsigned: return static_cast<int64_t>(v.get<uint64_t>());
    case nlohmann::json::value_t::number_float: return v.get<double>();
    case nlohmann::json::value_t::string: return v.get<std::string>();
    default: return v.dump();
  }
}

// Columns whose value is a number stored as DOUBLE PRECISION even when the export writes an integer.
bool is_real_column(const std::string& key) {
  return key == "primaryValue" || key == "uncertaintyLow" || key == "uncertaintyHigh" || key == "value" ||
         key == "valueNs" || key == "kindexFloorNs";
}

// Columns whose JSON defaults (NOT NULL DEFAULT 0) apply when the key is absent.
bool has_default(const std::string& key) {
  return key == "sourceAvailable" || key == "installable" || key == "reported" || key == "reproducedByKernelindex" ||
         key == "streaming" ||
         key == "independentReplicationCount" || key == "hasRawEvidence" || key == "sourceNative" || key == "realGpu";
}

struct Prepared {
  std::string sql;
  std::vector<std::string> keys;
};

const Prepared& insert_sql(const std::string& table) {
  static std::map<std::string, Prepared> cache = [] {
    std::map<std::string, Prepared> out;
    for (const auto& [name, keys] : all_tables()) {
      std::string cols, marks;
      for (const auto& k : keys) {
        cols += (cols.empty() ? "" : ", ") + snake_case(k);
        marks += marks.empty() ? "?" : ", ?";
      }
      out[name] = {"INSERT INTO " + name + " (" + cols + ") VALUES (" + marks + ") ON CONFLICT DO NOTHING", keys};
    }
    return out;
  }();
  return cache.at(table);
}

}  // namespace

std::string snake_case(const std::string& camel) {
  std::string out;
  for (char c : camel) {
    if (c >= 'A' && c <= 'Z') {
      out += '_';
      out += static_cast<char>(c - 'A' + 'a');
    } else {
      out += c;
    }
  }
  return out;
}

const std::vector<std::string>& table_keys(const std::string& table) {
  auto it = all_tables().find(table);
  if (it == all_tables().end()) throw Error("store", "table", table, "unknown table");
  return it->second;
}

std::optional<Reproduction> reproduction_of(const nlohmann::json& run_manifest, const std::string& where) {
  const nlohmann::json& labels = member_or_empty(member_or_empty(member_or_empty(run_manifest, "run"), "metadata"), "labels");
  auto label = [&](const char* key) -> std::optional<std::string> {
    const auto it = labels.find(key);
    if (it == labels.end()) return std::nullopt;
    return it->is_string() ? it->get<std::string>() : it->dump();
  };
  const auto digest = label(kReproducesRunLabel);
  if (!digest) return std::nullopt;
  if (!evidence::is_sha256_digest(*digest))
    throw Error(where, std::string("run.metadata.labels.") + kReproducesRunLabel, *digest,
                "names the run this one reproduces: expected its runDigest, sha256:<64 lowercase hex>");
  const std::string same = label(kSameImplementationLabel).value_or("true");
  if (same != "true" && same != "false")
    throw Error(where, std::string("run.metadata.labels.") + kSameImplementationLabel, same, "expected true or false");
  return Reproduction{*digest, same == "true"};
}

bool insert_row(Db& db, const std::string& table, const nlohmann::json& row, const std::string& where) {
  if (!row.is_object()) throw Error(where, table, row.dump().substr(0, 80), "a row must be a JSON object");
  // A run's manifest is kept in run_manifests (see schema.hpp); the export shape carries it on the run row.
  const auto manifest = table == "benchmark_runs" ? row.find("manifest") : row.end();
  const auto& keys = table_keys(table);
  for (auto it = row.begin(); it != row.end(); ++it) {
    if (it != manifest && std::find(keys.begin(), keys.end(), it.key()) == keys.end()) {
      throw Error(where, table + "." + it.key(), it->dump().substr(0, 80), "unknown column for table " + table);
    }
  }
  const Prepared& p = insert_sql(table);
  std::vector<Value> params;
  params.reserve(p.keys.size());
  for (const auto& key : p.keys) {
    auto it = row.find(key);
    if (it == row.end() || it->is_null()) {
      params.emplace_back(has_default(key) ? Value(int64_t{0}) : Value(std::monostate{}));
      if (key == "reported" && it == row.end()) params.back() = int64_t{1};
      continue;
    }
    if (is_real_column(key)) {
      if (!it->is_number()) throw Error(where, table + "." + key, it->dump(), "expected a number");
      params.emplace_back(it->get<double>());
    } else {
      params.push_back(to_value(*it));
    }
  }
  const bool inserted = db.execute(p.sql, params) > 0;
  if (inserted && manifest != row.end()) {
    db.execute(insert_sql("run_manifests").sql, {to_value(row.at("id")), manifest->dump()});
    if (auto original = reproduction_of(*manifest, where))
      db.execute(insert_sql("run_reruns").sql,
                 {to_value(row.at("id")), original->run_digest, int64_t{original->same_implementation ? 1 : 0}});
  }
  return inserted;
}

}  // namespace kindex::store
