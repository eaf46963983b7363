#include "store/store.hpp"

#include <cmath>
#include <map>
#include <mutex>
#include <set>

#include "core/error.hpp"
#include "evidence/digest.hpp"
#include "evidence/keys.hpp"
#include "evidence/manifest.hpp"
#include "store/rows.hpp"
#include "store/schema.hpp"

namespace kindex::store {

using nlohmann::json;

std::string id_from_digest(const std::string& digest) {
  std::string hex = digest.rfind("sha256:", 0) == 0 ? digest.substr(7) : evidence::sha256_hex(digest);
  if (hex.size() < 32) hex = evidence::sha256_hex(digest);
  return hex.substr(0, 8) + "-" + hex.substr(8, 4) + "-" + hex.substr(12, 4) + "-" + hex.substr(16, 4) + "-" +
         hex.substr(20, 12);
}

bool is_postgres_uri(const std::string& uri) {
  return uri.rfind("postgresql://", 0) == 0 || uri.rfind("postgres://", 0) == 0 || uri.find("dbname=") != std::string::npos;
}

std::unique_ptr<Store> Store::open(const std::string& uri) {
  if (is_postgres_uri(uri)) {
    return std::make_unique<Store>(open_postgres(uri));
  }
  std::string path = uri.rfind("sqlite:", 0) == 0 ? uri.substr(7) : uri;
  if (path.empty()) throw Error("store", "uri", uri, "empty SQLite path");
  return std::make_unique<Store>(open_sqlite(path));
}

struct Store::Memo {
  std::mutex mutex;
  std::mutex computing;  // held while a remembered_or value is computed
  std::optional<std::string> version;
  std::map<std::string, std::shared_ptr<const void>> values;
};

Store::Store(std::unique_ptr<Db> db) : db_(std::move(db)), backend_(db_->backend()), memo_(std::make_unique<Memo>()) {
  create_schema();
}
Store::~Store() = default;

std::shared_ptr<const void> Store::remembered(const std::string& key) {
  auto now = db_->content_version();
  std::lock_guard lock(memo_->mutex);
  if (!now || now != memo_->version) {
    memo_->values.clear();
    memo_->version = now;
    return nullptr;
  }
  auto it = memo_->values.find(key);
  return it == memo_->values.end() ? nullptr : it->second;
}

std::shared_ptr<const void> Store::remembered_or(const std::string& key,
                                                 const std::function<std::shared_ptr<const void>()>& compute) {
  if (auto kept = remembered(key)) return kept;
  if (!db_->content_version()) return compute();  // nothing is kept on this backend: no reason to wait for another
  std::lock_guard one_at_a_time(memo_->computing);
  if (auto kept = remembered(key)) return kept;  // computed while this caller waited
  auto made = compute();
  remember(key, made);
  return made;
}

void Store::remember(const std::string& key, std::shared_ptr<const void> value) {
  auto now = db_->content_version();
  std::lock_guard lock(memo_->mutex);
  if (!now || now != memo_->version) return;  // computed from content that has changed since
  if (memo_->values.size() >= 256) memo_->values.clear();
  memo_->values[key] = std::move(value);
}

void Store::create_schema() {
  db_->script(kSchema);
  db_->script(kRunIndexes);
}

PutResult Store::put_manifest(const json& manifest, const std::string& where) {
  evidence::Manifest m = evidence::make_manifest(manifest, where);
  bool inserted = insert_row(*db_, "manifests", {{"digest", m.digest}, {"kind", m.kind()}, {"document", m.document.dump()}},
                             where);
  return {m.digest, inserted};
}

std::optional<json> Store::manifest(const std::string& digest) {
  auto rows = db_->query("SELECT document FROM manifests WHERE digest = ?", {digest});
  if (rows.empty()) return std::nullopt;
  return json::parse(rows[0].text(0));
}

namespace {
// "YYYY-MM-DDTHH:MM:SS.mmmZ", the form evidence::utc_instant writes.
bool in_utc_instant_form(const std::string& t) {
  if (t.size() != 24) return false;
  for (std::size_t i = 0; i < t.size(); ++i) {
    const char want = i == 4 || i == 7 ? '-' : i == 10 ? 'T' : i == 13 || i == 16 ? ':' : i == 19 ? '.' : i == 23 ? 'Z' : '0';
    if (want == '0' ? (t[i] < '0' || t[i] > '9') : t[i] != want) return false;
  }
  return true;
}
}  // namespace

std::vector<Ranked> Store::cohort(const std::string& comparison_key, bool* source_native) {
  // Evidence as derived with the members' reruns (schema.hpp), which rank_v1 orders tie chains by: read for the few
  // members some rerun names, so the query of the cohort stays covered by its index (ix_runs_cohort).
  std::map<std::string, std::pair<int64_t, int64_t>> rerun_evidence;
  for (const auto& r : db_->query(std::string("SELECT r.id, ") + kDerivedReproducedSql + ", " + kDerivedReplicationsSql +
                                      " FROM benchmark_runs r WHERE r.comparison_key = ? AND r.run_digest IN "
                                      "(SELECT reproduces_run_digest FROM run_reruns)",
                                  {comparison_key}))
    rerun_evidence[r.text(0)] = {r.integer(1), r.integer(2)};
  auto rows = db_->query(
      "SELECT id, primary_value, uncertainty_low, uncertainty_high, reproduced_by_kernelindex, "
      "independent_replication_count, source_available, has_raw_evidence, observed_at, source_native "
      "FROM benchmark_runs r WHERE comparison_key = ? AND status = 'passed' AND retracted_at IS NULL "
      "AND primary_value IS NOT NULL AND NOT EXISTS (SELECT 1 FROM benchmark_runs s WHERE s.supersedes_id = r.id)",
      {comparison_key});
  std::vector<Ranked> out;
  for (const auto& r : rows) {
    Ranked k;
    k.id = r.text(0);
    k.value = r.real(1);
    k.low = r.maybe_real(2);
    k.high = r.maybe_real(3);
    const auto derived = rerun_evidence.find(k.id);
    const bool reproduced = derived != rerun_evidence.end() ? derived->second.first != 0 : r.integer(4) != 0;
    const int64_t replications = derived != rerun_evidence.end() ? derived->second.second : r.integer(5);
    k.evidence = evidence_level({reproduced, replications, r.integer(6) != 0, r.integer(7) != 0});
    k.observed_at = r.text(8);
    // One form (UTC, milliseconds) so that "newer first" compares instants. Text already in that form is kept as
    // it is: utc_instant would give it back unchanged, or refuse it and keep it too (most stored times).
    if (!in_utc_instant_form(k.observed_at)) {
      try {
        k.observed_at = evidence::utc_instant(k.observed_at, "benchmark_runs", "observed_at");
      } catch (const std::exception&) {
      }
    }
    k.source_native = r.integer(9) != 0;
    out.push_back(std::move(k));
  }
  const bool native = cohort_is_source_native(out);
  rank_v1(out, native);
  if (source_native) *source_native = native;
  return out;
}

bool Store::update_record(const std::string& comparison_key) {
  const auto members = cohort(comparison_key);
  // The record is the running minimum of the value (KernelIndex's record events), not the first of the ranked
  // list, which orders a tie chain by evidence and recency.
  const Ranked* best = record_holder(members);
  auto last = db_->query(
      "SELECT e.run_id, r.primary_value, r.status, r.retracted_at, "
      "(SELECT COUNT(*) FROM benchmark_runs s WHERE s.supersedes_id = r.id), e.created_at "
      "FROM record_events e LEFT JOIN benchmark_runs r ON r.id = e.run_id WHERE e.comparison_key = ? "
      "ORDER BY e.created_at DESC, e.at DESC, e.id DESC LIMIT 1",
      {comparison_key});
  std::string cause = "new_run";
  std::string previous;
  if (!last.empty()) {
    previous = last[0].text(0);
    bool retracted = !last[0].is_null(3);
    bool superseded = last[0].integer(4) > 0;
    if (!retracted && !superseded) {
      // The holder is still valid: only a strictly faster run takes the record.
      if (!best || best->id == previous || best->value >= last[0].real(1)) return false;
    } else {
      cause = retracted ? "retraction" : "supersession";
    }
  }
  if (!best && last.empty()) return false;
  std::string holder = best ? best->id : std::string();
  if (holder == previous) return false;
  // The record's events are ordered by when they were written: one written within the millisecond of the last (a
  // run recorded and then retracted at once) is stamped after it, or its place would fall to the ids' order.
  std::string now = evidence::utc_timestamp_now();
  if (!last.empty() && !last[0].is_null(5)) now = evidence::utc_timestamp_after(last[0].text(5), now);
  json key = {{"comparisonKey", comparison_key}, {"runId", holder}, {"previousRunId", previous}, {"cause", cause}};
  json event = {{"id", id_from_digest(evidence::sha256_digest(key))},
                {"comparisonKey", comparison_key},
                {"runId", holder.empty() ? json() : json(holder)},
                {"previousRunId", previous.empty() ? json() : json(previous)},
                {"policyVersion", "ranking-v1"},
                {"cause", cause},
                {"at", now},
                {"createdAt", now}};
  return insert_row(*db_, "record_events", event, "record_events");
}

void Store::retract_run(const std::string& run_id, const std::string& reason, const std::string& at) {
  Transaction tx(*db_);
  auto rows = db_->query("SELECT comparison_key FROM benchmark_runs WHERE id = ?", {run_id});
  if (rows.empty()) throw Error("store", "run", run_id, "no such run");
  db_->execute("UPDATE benchmark_runs SET retracted_at = ?, retraction_reason = ? WHERE id = ? AND retracted_at IS NULL",
               {at, reason, run_id});
  update_record(rows[0].text(0));
  tx.commit();
}

namespace {

// Finds a row id by a lookup query, or inserts `row` into `table` and returns its id.
std::string find_or_insert(Db& db, const std::string& lookup, const std::vector<Value>& params,
                           const std::string& table, const json& row) {
  auto rows = db.query(lookup, params);
  if (!rows.empty()) return rows[0].text(0);
  insert_row(db, table, row, "record_run");
  return row.at("id").get<std::string>();
}

}  // namespace

// Longer than ~150 lines on purpose: one transaction that writes a run's six manifests, its keys, measurements,
// samples and record events in the order the schema's foreign keys need; every step reads the ids the earlier ones
// wrote, and keeping them in one body keeps that order visible.
RecordResult Store::record_run(const OwnRun& in) {
  using evidence::make_manifest;
  auto op = make_manifest(in.operation, "record_run operation");
  auto wl = make_manifest(in.workload, "record_run workload");
  auto impl = make_manifest(in.implementation, "record_run implementation");
  auto proto = make_manifest(in.protocol, "record_run protocol");
  auto env = make_manifest(in.environment, "record_run environment");
  auto run = make_manifest(in.run, "record_run run");
  json default_project = {{"apiVersion", evidence::kApiVersion},
                          {"kind", "SoftwareProject"},
                          {"metadata", {{"name", "kindex"}}},
                          {"spec", {{"name", "kindex"}}}};
  auto project = make_manifest(in.project.value_or(default_project), "record_run project");

  auto expect = [](const std::string& field, const std::string& stated, const std::string& actual) {
    if (stated != actual) throw Error("record_run", field, stated, "does not match the manifest given (" + actual + ")");
  };
  const json& rs = run.spec();
  expect("workload.spec.operationSpecDigest", wl.spec().value("operationSpecDigest", ""), op.digest);
  expect("run.spec.workloadDigest", rs.value("workloadDigest", ""), wl.digest);
  expect("run.spec.implementationDigest", rs.value("implementationDigest", ""), impl.digest);
  expect("run.spec.protocolDigest", rs.value("protocolDigest", ""), proto.digest);
  expect("run.spec.environmentDigest", rs.value("environmentDigest", ""), env.digest);

  std::string correctness = evidence::correctness_key(wl.spec().value("correctness", json::object()));
  std::string metric = evidence::run_metric_key(run.document);
  std::string ck = evidence::comparison_key({op.digest, wl.digest, proto.digest, env.digest, correctness, metric});
  std::string run_id = id_from_digest(run.digest);
  std::string now = evidence::utc_timestamp_now();

  Transaction tx(*db_);
  Db& db = *db_;
  const bool own = in.origin == "kindex";
  std::string source_name = own ? "kindex bench"
                            : in.origin == "flashinfer-bench" ? "FlashInfer-Bench"
                            : in.origin == "sol-execbench"    ? "NVIDIA SOL-ExecBench"
                                                              : in.origin;
  std::string source_id = find_or_insert(
      db, "SELECT id FROM sources WHERE slug = ?", {in.origin}, "sources",
      {{"id", id_from_digest(evidence::sha256_digest("source:" + in.origin))}, {"slug", in.origin},
       {"kind", in.origin == "sol-execbench" ? "leaderboard" : "benchmark"}, {"name", source_name}, {"createdAt", now}});
  std::string project_slug = project.document["metadata"].value("name", "kindex");
  std::string project_id = find_or_insert(
      db, "SELECT id FROM projects WHERE slug = ?", {project_slug}, "projects",
      {{"id", id_from_digest(project.digest)}, {"slug", project_slug}, {"name", project.spec().value("name", project_slug)},
       {"manifest", project.document}, {"createdAt", now}});

  std::string op_name = in.definition_name.empty() ? op.document["metadata"].value("name", "") : in.definition_name;
  auto existing_op = db.query(
      "SELECT o.id FROM operations o LEFT JOIN operation_aliases a ON a.operation_id = o.id AND a.alias = ? "
      "WHERE o.semantic_digest = ? ORDER BY (CASE WHEN a.alias IS NULL THEN 1 ELSE 0 END), o.created_at LIMIT 1",
      {op_name, op.digest});
  std::string op_id;
  if (!existing_op.empty()) {
    op_id = existing_op[0].text(0);
  } else {
    op_id = id_from_digest(op.digest);
    std::string slug = op.document["metadata"].value("name", op_name);
    if (!db.query("SELECT id FROM operations WHERE slug = ?", {slug}).empty()) slug += "-" + op.digest.substr(7, 8);
    insert_row(db, "operations",
               {{"id", op_id}, {"slug", slug}, {"family", op.spec().value("family", "")}, {"name", op_name},
                {"schemaVersion", evidence::kApiVersion}, {"semanticDigest", op.digest}, {"manifest", op.document},
                {"tags", json::array()}, {"createdAt", now}},
               "record_run");
  }
  if (!op_name.empty()) insert_row(db, "operation_aliases", {{"operationId", op_id}, {"alias", op_name}}, "record_run");

  json dtypes = json::array();
  for (const auto& [name, t] : member_or_empty(wl.spec(), "tensors").items()) {
    if (std::find(dtypes.begin(), dtypes.end(), t.value("dtype", "")) == dtypes.end()) dtypes.push_back(t.value("dtype", ""));
  }
  std::string wl_id = find_or_insert(
      db, "SELECT id FROM workloads WHERE operation_id = ? AND workload_digest = ?", {op_id, wl.digest}, "workloads",
      {{"id", id_from_digest(evidence::sha256_digest(op_id + wl.digest))}, {"operationId", op_id},
       {"workloadDigest", wl.digest}, {"kind", wl.kind()}, {"schemaVersion", evidence::kApiVersion},
       {"manifest", wl.document}, {"dtypes", dtypes}, {"layoutKeys", json::array({"contiguous"})}, {"createdAt", now}});

  const json& is = impl.spec();
  json callable = is.value("callable", json::object());
  json support = is.value("support", json::object());
  std::string impl_slug = impl.document["metadata"].value("name", "kindex");
  std::string license = is.value("licensing", json::object()).value("declared", "");
  std::string impl_id = find_or_insert(
      db, "SELECT id FROM implementations WHERE operation_id = ? AND implementation_digest = ?", {op_id, impl.digest},
      "implementations",
      {{"id", id_from_digest(evidence::sha256_digest(op_id + impl.digest))}, {"projectId", project_id},
       {"operationId", op_id}, {"slug", impl_slug}, {"implementationDigest", impl.digest},
       {"sourceRevision", is.value("projectRevision", json::object()).value("commit", "")},
       {"language", callable.value("language", "")},
       {"targetArchitectures", support.value("hardwareArchitectures", json::array())},
       {"licenseExpression", license.empty() ? json() : json(license)}, {"sourceAvailable", own || is.contains("source")},
       {"installable", own}, {"title", impl.document["metadata"].value("title", impl_slug)},
       {"manifest", impl.document}, {"createdAt", now}});

  insert_row(db, "protocols", {{"digest", proto.digest}, {"manifest", proto.document}}, "record_run");
  insert_row(db, "environments", {{"digest", env.digest}, {"manifest", env.document}}, "record_run");

  // The row restates the run manifest exactly as KernelIndex's publication does (evidence/keys.hpp).
  json facts = json::object();
  for (auto& [column, value] : evidence::run_row_facts(run.document, env.document)) facts[column] = value;
  std::optional<double> low = in.interval_low_ns, high = in.interval_high_ns;
  if (!low && facts["uncertaintyLow"].is_number()) {
    low = facts["uncertaintyLow"].get<double>();
    high = facts["uncertaintyHigh"].get<double>();
  }
  const json sw = env.spec().value("software", json::object());
  std::string cuda = sw.value("cudaToolkit", "");
  json cuda_major = cuda.empty() ? json() : json(std::atoi(cuda.c_str()));
  json run_manifest = {{"run", run.document}, {"protocol", proto.document}, {"environment", env.document}};
  json row = {{"id", run_id},
              {"runDigest", run.digest},
              {"implementationId", impl_id},
              {"workloadId", wl_id},
              {"sourceId", source_id},
              {"status", facts["status"]},
              {"observedAt", facts["observedAt"].is_null() ? json(now) : facts["observedAt"]},
              {"publishedAt", now},
              {"hardwareVendor", facts["hardwareVendor"]},
              {"hardwareModel", facts["hardwareModel"]},
              {"hardwareArchitecture", facts["hardwareArchitecture"]},
              {"cudaMajor", cuda_major},
              {"protocolKey", proto.digest},
              {"environmentKey", env.digest},
              {"correctnessKey", correctness},
              {"comparisonKey", ck},
              {"primaryMetric", facts["primaryMetric"]},
              {"primaryValue", facts["primaryValue"]},
              {"primaryUnit", facts["primaryUnit"]},
              {"sampleCount", in.samples_ns.empty() ? facts["sampleCount"] : json(in.samples_ns.size())},
              {"uncertaintyLow", low ? json(*low) : json()},
              {"uncertaintyHigh", high ? json(*high) : json()},
              {"reported", !own},
              {"reproducedByKernelindex", own && in.real_gpu && !in.samples_ns.empty()},
              {"sourceAvailable", own || is.contains("source")},
              {"installable", own},
              {"primaryStatistic", facts["primaryStatistic"]},
              {"hasRawEvidence", !in.samples_ns.empty() || facts["hasRawEvidence"].get<bool>()},
              {"sourceNative", facts["sourceNative"]},
              {"environmentSummary", (cuda.empty() ? std::string() : "CUDA " + cuda + " · ") + source_name},
              {"manifest", run_manifest},
              {"origin", in.origin},
              {"realGpu", in.real_gpu},
              {"kindexFloorNs", in.kindex_floor_ns ? json(*in.kindex_floor_ns) : json()}};
  RecordResult result{run_id, run.digest, ck, false, false};
  result.inserted = insert_row(db, "benchmark_runs", row, "record_run");
  if (result.inserted) {
    std::vector<Measurement> ms = in.measurements;
    if (ms.empty()) {
      for (const auto& m : evidence::run_measurements(run.document))
        ms.push_back({m.metric, m.statistic, m.unit, m.value, m.sample_count});
    }
    for (const auto& m : ms) {
      insert_row(db, "measurements",
                 {{"id", id_from_digest(evidence::sha256_digest(run_id + m.metric + m.statistic + m.unit))},
                  {"runId", run_id}, {"metric", m.metric}, {"statistic", m.statistic}, {"unit", m.unit},
                  {"value", m.value}, {"sampleCount", m.sample_count ? json(*m.sample_count) : json()}},
                 "record_run");
    }
    for (size_t i = 0; i < in.samples_ns.size(); ++i) {
      insert_row(db, "run_samples", {{"runId", run_id}, {"idx", i}, {"valueNs", in.samples_ns[i]}}, "record_run");
    }
    result.new_record = update_record(ck);
  }
  tx.commit();
  return result;
}

json to_json(const OwnRun& r) {
  json j = {{"kindexRun", 1},           {"operation", r.operation}, {"workload", r.workload},
            {"implementation", r.implementation}, {"protocol", r.protocol},   {"environment", r.environment},
            {"run", r.run},             {"definitionName", r.definition_name}, {"samplesNs", r.samples_ns},
            {"realGpu", r.real_gpu},    {"origin", r.origin}};
  if (r.project) j["project"] = *r.project;
  if (r.kindex_floor_ns) j["kindexFloorNs"] = *r.kindex_floor_ns;
  if (r.interval_low_ns && r.interval_high_ns) j["intervalNs"] = {*r.interval_low_ns, *r.interval_high_ns};
  json ms = json::array();
  for (const auto& m : r.measurements) {
    json mj = {{"metric", m.metric}, {"statistic", m.statistic}, {"unit", m.unit}, {"value", m.value}};
    if (m.sample_count) mj["sampleCount"] = *m.sample_count;
    ms.push_back(mj);
  }
  j["measurements"] = ms;
  return j;
}

OwnRun own_run_from_json(const json& j, const std::string& where) {
  static const std::set<std::string> known = {"kindexRun", "operation", "workload", "implementation", "project",
                                              "protocol", "environment", "run", "definitionName", "measurements",
                                              "samplesNs", "realGpu", "kindexFloorNs", "intervalNs", "origin"};
  if (!j.is_object() || j.value("kindexRun", 0) != 1) throw Error(where, "kindexRun", j.dump().substr(0, 60), "not a kindex run record");
  for (const auto& [k, v] : j.items()) {
    if (!known.count(k)) throw Error(where, k, v.dump().substr(0, 60), "unknown key in a kindex run record");
  }
  OwnRun r;
  try {
    r.operation = j.at("operation");
    r.workload = j.at("workload");
    r.implementation = j.at("implementation");
    r.protocol = j.at("protocol");
    r.environment = j.at("environment");
    r.run = j.at("run");
    if (j.contains("project")) r.project = j["project"];
    r.definition_name = j.value("definitionName", "");
    r.samples_ns = j.value("samplesNs", std::vector<double>{});
    r.real_gpu = j.value("realGpu", false);
    r.origin = j.value("origin", "kindex");
    if (j.contains("kindexFloorNs")) r.kindex_floor_ns = j["kindexFloorNs"].get<double>();
    if (j.contains("intervalNs")) {
      r.interval_low_ns = j["intervalNs"].at(0).get<double>();
      r.interval_high_ns = j["intervalNs"].at(1).get<double>();
    }
    for (const auto& m : j.value("measurements", json::array())) {
      Measurement x{m.at("metric"), m.at("statistic"), m.at("unit"), m.at("value").get<double>(), std::nullopt};
      if (m.contains("sampleCount")) x.sample_count = m["sampleCount"].get<int64_t>();
      r.measurements.push_back(x);
    }
  } catch (const json::exception& e) {
    throw Error(where, "kindex run record", "", e.what());
  }
  return r;
}

std::string Store::integrity_check() {
  if (backend_ == "sqlite") return db_->query("PRAGMA integrity_check")[0].text(0);
  return db_->query("SELECT 'ok'")[0].text(0);
}

json Store::counts() {
  json out = json::object();
  for (const char* t : {"sources", "projects", "operations", "operation_aliases", "workloads", "implementations",
                        "protocols", "environments", "benchmark_runs", "run_manifests", "measurements", "run_samples", "record_events",
                        "artifacts", "manifests"}) {
    out[t] = db_->query(std::string("SELECT COUNT(*) FROM ") + t)[0].integer(0);
  }
  return out;
}

}  // namespace kindex::store
