// The read models' shared pieces (query_internal.hpp).
#include "store/query.hpp"

#include <cctype>

#include <algorithm>
#include <memory>
#include <cmath>
#include <set>
#include <tuple>
#include <unordered_map>

#include "core/error.hpp"
#include "evidence/manifest.hpp"
#include "store/rows.hpp"
#include "store/schema.hpp"
#include "store/query_internal.hpp"

namespace kindex::store::query_internal {

using nlohmann::json;

// Columns 16 and 17 are the evidence flags as derived with the run's reruns (schema.hpp).
const std::string kRunColumns =
    std::string("r.id, r.run_digest, r.implementation_id, r.workload_id, r.status, r.observed_at, r.hardware_model, "
                "r.hardware_architecture, r.protocol_key, r.environment_key, r.correctness_key, r.comparison_key, "
                "r.primary_value, r.primary_statistic, r.uncertainty_low, r.uncertainty_high, ") +
    kDerivedReproducedSql + ", " + kDerivedReplicationsSql +
    ", r.source_available, r.installable, r.source_native, r.environment_summary, "
    "r.origin, r.real_gpu, r.kindex_floor_ns, r.retracted_at, r.has_raw_evidence, i.slug, i.title, p.name, s.name, "
    "r.license_expression, i.source_revision, r.sample_count, r.supersedes_id ";
const char* kRunJoins =
    "FROM benchmark_runs r JOIN implementations i ON i.id = r.implementation_id "
    "LEFT JOIN projects p ON p.id = i.project_id LEFT JOIN sources s ON s.id = r.source_id ";

json opt(const Row& r, size_t i) { return r.is_null(i) ? json() : json(r.real(i)); }
// A text cell without copying it (empty for NULL).
const std::string& text_of(const Row& r, size_t i) {
  static const std::string empty;
  const auto* s = std::get_if<std::string>(&r.cells.at(i));
  return s ? *s : empty;
}
json opt_text(const Row& r, size_t i) { return r.is_null(i) ? json() : json(r.text(i)); }

json run_summary(const Row& r) {
  EvidenceLevel level = evidence_level({r.integer(16) != 0, r.integer(17), r.integer(18) != 0, r.integer(26) != 0});
  return {{"id", r.text(0)},
          {"shortId", r.text(0).substr(0, 8)},
          {"runDigest", r.text(1)},
          {"implementationId", r.text(2)},
          {"workloadId", r.text(3)},
          {"status", r.text(4)},
          {"observedAt", r.text(5)},
          {"gpu", r.text(6)},
          {"architecture", r.text(7)},
          {"protocolKey", r.text(8)},
          {"environmentKey", r.text(9)},
          {"correctnessKey", r.text(10)},
          {"comparisonKey", r.text(11)},
          {"latencyNs", opt(r, 12)},
          {"statistic", opt_text(r, 13)},
          {"intervalNs", r.is_null(14) ? json() : json::array({r.real(14), r.real(15)})},
          {"evidence", to_string(level)},
          {"sourceNative", r.integer(20) != 0},
          {"environmentSummary", opt_text(r, 21)},
          {"origin", r.text(22)},
          {"realGpu", r.integer(23) != 0},
          {"kindexFloorNs", opt(r, 24)},
          {"retractedAt", opt_text(r, 25)},
          {"hasRawEvidence", r.integer(26) != 0},
          {"implementationSlug", r.text(27)},
          {"implementation", r.is_null(28) ? r.text(27) : r.text(28)},
          {"project", opt_text(r, 29)},
          {"source", opt_text(r, 30)},
          {"license", opt_text(r, 31)},
          {"revision", opt_text(r, 32)},
          {"sampleCount", r.is_null(33) ? json() : json(r.integer(33))},
          {"supersedesId", opt_text(r, 34)}};
}

OperationRow find_operation(Store& store, const std::string& key) {
  auto rows = store.db().query(
      "SELECT o.id, o.slug, o.family, o.name, o.semantic_digest, o.manifest, o.tags FROM operations o "
      "WHERE o.slug = ? OR o.name = ? OR o.id = ? OR EXISTS "
      "(SELECT 1 FROM operation_aliases a WHERE a.operation_id = o.id AND a.alias = ?) ORDER BY o.created_at LIMIT 1",
      {key, key, key, key});
  if (rows.empty()) throw Error("index", "operation", key, "no such operation (try `kindex search`)");
  const Row& r = rows[0];
  return {r.text(0), r.text(1), r.text(2), r.text(3), r.text(4), json::parse(r.text(5)),
          r.is_null(6) ? json::array() : json::parse(r.text(6))};
}

bool id_like(const std::string& key) {
  if (key.size() < 8) return false;
  return std::all_of(key.begin(), key.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) || c == '-'; });
}

// Finds one row id of `table` by full id, digest column or a unique id prefix.
std::string find_id(Store& store, const std::string& table, const std::string& digest_column, const std::string& key,
                    const std::string& what) {
  auto rows = store.db().query("SELECT id FROM " + table + " WHERE id = ? OR " + digest_column + " = ?", {key, key});
  if (rows.empty() && id_like(key)) {
    rows = store.db().query("SELECT id FROM " + table + " WHERE id LIKE ? LIMIT 2", {key + "%"});
  }
  if (rows.empty()) throw Error("index", what, key, "no such " + what);
  if (rows.size() > 1) throw Error("index", what, key, "ambiguous prefix: give more characters");
  return rows[0].text(0);
}

std::string lowercase(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string format_number(const json& v) {
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  return v.dump();
}

// Axis values of a WorkloadCase, including the operation's constants (for resolving and near matches).
std::map<std::string, int64_t> workload_axes(const json& op, const json& wl) {
  std::map<std::string, int64_t> axes;
  for (const auto& [k, a] : member_or_empty(op.at("spec"), "axes").items()) {
    if (a.value("role", "") == "constant" && a.contains("value")) axes[k] = a["value"].get<int64_t>();
  }
  for (const auto& [k, v] : member_or_empty(wl.at("spec"), "axes").items()) {
    if (v.is_number_integer()) axes[k] = v.get<int64_t>();
  }
  return axes;
}

std::set<std::string> workload_dtypes(const json& wl) {
  std::set<std::string> out;
  for (const auto& [k, t] : member_or_empty(wl.at("spec"), "tensors").items()) out.insert(t.value("dtype", ""));
  return out;
}

json protocol_summary(Store& store, const std::string& key) {
  auto rows = store.db().query("SELECT manifest FROM protocols WHERE digest = ?", {key});
  if (rows.empty()) return json::object();
  json m = json::parse(rows[0].text(0));
  const json& s = m.at("spec");
  return {{"harness", s.value("harness", json::object()).value("name", "")},
          {"version", s.value("harness", json::object()).value("version", "")},
          {"statistic", s.value("measurement", json::object()).value("primaryStatistic", "")},
          {"timer", s.value("measurement", json::object()).value("timer", "")},
          {"family", s.value("comparability", json::object()).value("family", "")}};
}

namespace {

// One cohort, ranked (over all its valid members), with its floor; run details for the first `limit` members.
json compute_cohort_view(Store& store, const std::string& ck, const json& op, const json& wl, size_t limit) {
  bool native = false;
  auto members = store.cohort(ck, &native);
  const size_t shown = std::min(limit, members.size());
  std::map<std::string, json> by_id;
  auto fetch = [&](const std::string& sql, const std::vector<Value>& params) {
    for (const auto& r : store.db().query(std::string("SELECT ") + kRunColumns + kRunJoins + sql, params)) {
      by_id.emplace(r.text(0), run_summary(r));
    }
  };
  // The fastest rows by value (rank order differs from value order only inside a tie chain, so a little spare
  // covers most of it); any member still missing is fetched one by one below.
  fetch("WHERE r.comparison_key = ? AND r.status = 'passed' AND r.retracted_at IS NULL ORDER BY r.primary_value LIMIT ?",
        {ck, static_cast<int64_t>(shown + 2)});
  json runs = json::array();
  // The record (fastest value): the first listed run of a tie chain may be a slower, better-evidenced one.
  double first = 0;
  for (const auto& m : members) first = first == 0 ? m.value : std::min(first, m.value);
  std::string last_observed;
  std::optional<double> kindex_floor;
  for (size_t i = 0; i < shown; ++i) {
    const Ranked& m = members[i];
    if (!by_id.count(m.id)) fetch("WHERE r.id = ?", {m.id});
    json s = std::move(by_id[m.id]);  // member ids are unique
    s["rank"] = m.rank;
    s["xOfFirst"] = first > 0 ? m.value / first : 1.0;
    runs.push_back(std::move(s));
  }
  for (const auto& m : members) last_observed = std::max(last_observed, m.observed_at);
  // GPU, protocol and environment are part of the comparison key: any member tells them.
  auto meta = store.db().query(
      "SELECT (SELECT MAX(kindex_floor_ns) FROM benchmark_runs WHERE comparison_key = ?), hardware_model, protocol_key, "
      "environment_summary FROM benchmark_runs WHERE comparison_key = ? LIMIT 1",
      {ck, ck});
  if (!meta.empty() && !meta[0].is_null(0)) kindex_floor = meta[0].real(0);
  json failed = json::array();
  for (const auto& r : store.db().query(std::string("SELECT ") + kRunColumns + kRunJoins +
                                            "WHERE r.comparison_key = ? AND (r.status <> 'passed' OR r.retracted_at IS NOT NULL "
                                            "OR r.primary_value IS NULL) ORDER BY r.observed_at LIMIT 50",
                                        {ck})) {
    failed.push_back(run_summary(r));
  }
  // The record's timeline (its append-only events, oldest first) and how long the holder has stood: taken at its
  // last event; "unbeaten" by the ranked runs observed since; stale when the holder was observed more than a year
  // before the cohort's newest run.
  json timeline = json::array();
  for (const auto& e : store.db().query(
           "SELECT e.at, e.cause, e.run_id, r.primary_value, COALESCE(i.title, i.slug) FROM record_events e "
           "LEFT JOIN benchmark_runs r ON r.id = e.run_id LEFT JOIN implementations i ON i.id = r.implementation_id "
           "WHERE e.comparison_key = ? ORDER BY e.created_at, e.at, e.id",
           {ck})) {
    timeline.push_back({{"at", e.text(0)}, {"cause", e.text(1)}, {"runId", opt_text(e, 2)}, {"latencyNs", opt(e, 3)},
                        {"implementation", opt_text(e, 4)}});
  }
  json record_status;
  if (const Ranked* held = record_holder(members)) {
    // The record holder (the earliest of equal values), not the first listed: `kindex records` names the same run.
    const Ranked& holder = *held;
    std::string since = holder.observed_at;
    for (const auto& ev : timeline) {
      if (ev["runId"] == holder.id) since = ev["at"];
    }
    int64_t later = 0;
    for (const auto& m : members) later += m.id != holder.id && m.observed_at > since;
    // ISO 8601 times compare as text: the newest observation with its year lowered by one.
    std::string year_before = last_observed.size() >= 4 && std::isdigit(static_cast<unsigned char>(last_observed[0]))
                                  ? std::to_string(std::atoi(last_observed.substr(0, 4).c_str()) - 1) + last_observed.substr(4)
                                  : "";
    bool stale = !year_before.empty() && holder.observed_at < year_before;
    record_status = {{"holder", holder.id}, {"since", since}, {"laterRunsNotBeatingIt", later}, {"stale", stale}};
  }
  std::string gpu = meta.empty() ? "" : meta[0].text(1);
  json out = {{"comparisonKey", ck},
              {"recordTimeline", std::move(timeline)},
              {"recordStatus", std::move(record_status)},
              {"gpu", gpu},
              {"sourceNative", native},
              {"protocol", protocol_summary(store, meta.empty() ? "" : meta[0].text(2))},
              {"environmentSummary", meta.empty() ? "" : meta[0].text(3)},
              {"members", members.size()},
              {"runs", std::move(runs)},
              {"unranked", std::move(failed)},
              {"lastObserved", last_observed}};
  if (auto f = headroom_v1(op, wl, gpu)) {
    out["floor"] = {{"ns", f->floor_ns},       {"memoryNs", f->memory_ns}, {"computeNs", f->compute_ns},
                    {"bytes", f->bytes},       {"flops", f->flops},       {"bound", f->bound},
                    {"gpu", f->gpu},           {"dramGBps", f->dram_gbps}, {"tflops", f->tflops},
                    {"policy", "headroom-v1"}};
    if (first > 0) out["recordAboveFloor"] = first / f->floor_ns;
  }
  if (kindex_floor) {
    out["kindexFloorNs"] = *kindex_floor;
    if (first > 0) out["recordAboveKindexFloor"] = first / *kindex_floor;
  }
  return out;
}

}  // namespace

// A cohort's view, kept until the store changes: the operation page, resolve and the run pages of one workload
// all show the same cohorts. The comparison key names the operation, workload, protocol, environment and metric,
// so it (with the number of runs shown) determines the view.
json cohort_view(Store& store, const std::string& ck, const json& op, const json& wl, size_t limit) {
  const std::string key = "cohort-view:" + std::to_string(limit) + ":" + ck;
  if (auto kept = store.remembered(key)) return *std::static_pointer_cast<const json>(kept);
  auto made = std::make_shared<const json>(compute_cohort_view(store, ck, op, wl, limit));
  store.remember(key, made);
  return *made;
}

json workloads_of(Store& store, const OperationRow& op) {
  auto rows = store.db().query(
      "SELECT w.id, w.workload_digest, w.kind, w.manifest, "
      "(SELECT COUNT(*) FROM benchmark_runs r WHERE r.workload_id = w.id) "
      "FROM workloads w WHERE w.operation_id = ? ORDER BY w.created_at, w.id",
      {op.id});
  json out = json::array();
  for (const auto& r : rows) {
    json m = json::parse(r.text(3));
    out.push_back({{"id", r.text(0)}, {"digest", r.text(1)}, {"kind", r.text(2)}, {"label", workload_label(m)},
                   {"axes", m.at("spec").value("axes", json::object())}, {"runs", r.integer(4)}, {"manifest", m}});
  }
  return out;
}

json semantics_of(const json& op) {
  const json& s = op.at("spec");
  json inputs = json::array(), outputs = json::array(), axes = json::array();
  auto describe = [](const json& t) {
    if (t.contains("scalar")) return json{{"name", t["name"]}, {"dtype", t["scalar"].value("dtype", "")}, {"shape", "scalar"}};
    std::string shape = "[";
    for (const auto& d : t["tensor"]["shape"]) shape += (shape.size() > 1 ? ", " : "") + (d.is_string() ? d.get<std::string>() : d.dump());
    return json{{"name", t["name"]}, {"dtype", t["tensor"].value("dtype", "")}, {"shape", shape + "]"}};
  };
  for (const auto& t : s.value("inputs", json::array())) inputs.push_back(describe(t));
  for (const auto& t : s.value("outputs", json::array())) outputs.push_back(describe(t));
  for (const auto& [k, a] : member_or_empty(s, "axes").items()) {
    std::string role = a.value("role", "");
    std::string text = role == "constant" ? "constant = " + format_number(a.value("value", json()))
                       : role == "derived" ? "derived = " + a.value("expression", std::string())
                                           : "variable";
    axes.push_back({{"name", k}, {"role", role}, {"text", text}});
  }
  json sem = s.value("semantics", json::object());
  return {{"inputs", inputs}, {"outputs", outputs}, {"axes", axes},
          {"determinism", sem.value("determinism", "unspecified")}, {"mutation", sem.value("mutation", "none")}};
}

}  // namespace kindex::store::query_internal
