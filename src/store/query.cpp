#include "store/query.hpp"

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

namespace kindex::store {

using nlohmann::json;

namespace {

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

struct OperationRow {
  std::string id, slug, family, name, digest;
  json manifest, tags;
};

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
  if (!members.empty()) {
    const Ranked& holder = members.front();
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

// A cohort's view, kept until the store changes: the operation page, resolve and the run pages of one workload
// all show the same cohorts. The comparison key names the operation, workload, protocol, environment and metric,
// so it (with the number of runs shown) determines the view.
json cohort_view(Store& store, const std::string& ck, const json& op, const json& wl, size_t limit = 100) {
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

}  // namespace

std::string workload_label(const json& m) {
  const json& spec = m.at("spec");
  if (m.value("kind", "") == "WorkloadSuite") {
    return "suite of " + std::to_string(spec.value("cases", json::array()).size()) + " cases";
  }
  std::string out;
  for (const auto& [k, v] : member_or_empty(spec, "axes").items()) {
    out += (out.empty() ? "" : " · ") + k + " = " + format_number(v);
  }
  std::set<std::string> dtypes = workload_dtypes(m);
  dtypes.erase("int32");
  dtypes.erase("int64");
  for (const auto& d : dtypes) out += (out.empty() ? "" : " · ") + d;
  return out;
}

json search(Store& store, const std::string& text, int limit) {
  std::string needle = "%" + text + "%";
  auto rows = store.db().query(
      "SELECT o.id, o.slug, o.name, o.family, o.manifest, "
      "(SELECT COUNT(*) FROM workloads w WHERE w.operation_id = o.id), "
      "(SELECT COUNT(*) FROM benchmark_runs r JOIN workloads w ON w.id = r.workload_id WHERE w.operation_id = o.id) "
      "FROM operations o WHERE LOWER(o.name) LIKE LOWER(?) OR LOWER(o.slug) LIKE LOWER(?) OR LOWER(o.family) LIKE "
      "LOWER(?) OR LOWER(o.manifest) LIKE LOWER(?) OR EXISTS (SELECT 1 FROM operation_aliases a WHERE "
      "a.operation_id = o.id AND LOWER(a.alias) LIKE LOWER(?)) ORDER BY o.name LIMIT ?",
      {needle, needle, needle, needle, needle, static_cast<int64_t>(limit)});
  json out = json::array();
  for (const auto& r : rows) {
    json m = json::parse(r.text(4));
    out.push_back({{"id", r.text(0)}, {"slug", r.text(1)}, {"name", r.text(2)}, {"family", r.text(3)},
                   {"description", m.value("metadata", json::object()).value("description", "")},
                   {"workloads", r.integer(5)}, {"runs", r.integer(6)}});
  }
  return out;
}

namespace {

// What every page of an operation shows whatever workload is selected: its workloads with their run counts, the
// eligible runs across them, each implementation's workloads and strongest evidence, and the best value per
// (implementation, workload) and (workload, GPU) for the plots.
struct OperationFacts {
  struct Implementation {
    std::set<uint32_t> workloads;  // numbered as operation_facts met them: only their count is used
    bool reproduced = false, source_and_raw = false;
    int64_t replications = 0;
  };
  json workloads;
  int64_t all_eligible = 0;
  std::map<std::string, Implementation> stats;
  std::map<std::pair<std::string, std::string>, double> best_per_workload_gpu, best_per_impl_workload;
};

std::shared_ptr<const OperationFacts> compute_operation_facts(Store& store, const OperationRow& op) {
  auto made = std::make_shared<OperationFacts>();
  OperationFacts& f = *made;
  f.workloads = workloads_of(store, op);
  // One pass over the operation's runs (covered by ix_runs_workload, no run rows read) gives the eligible count,
  // each implementation's workloads and strongest evidence, and the best values.
  // Per run only small numbers are looked up (implementation, workload and GPU names numbered as they come): the
  // pass reads every run of the operation, and string-keyed maps made it the page's largest cost.
  std::unordered_map<std::string, uint32_t> numbers;
  std::vector<const std::string*> names;
  auto number = [&](const std::string& name) {
    auto [it, fresh] = numbers.try_emplace(name, static_cast<uint32_t>(names.size()));
    if (fresh) names.push_back(&it->first);
    return it->second;
  };
  std::unordered_map<uint32_t, OperationFacts::Implementation> stats_by_number;
  std::map<std::tuple<uint32_t, uint32_t, uint32_t>, double> fastest;  // (implementation, workload, GPU) -> value
  int64_t& all_eligible = f.all_eligible;
  for (const auto& r : store.db().query(
           "SELECT r.implementation_id, r.workload_id, r.hardware_model, r.status, r.retracted_at IS NULL, r.primary_value, "
           "r.reproduced_by_kernelindex, r.independent_replication_count, r.source_available * r.has_raw_evidence "
           "FROM benchmark_runs r JOIN workloads w ON w.id = r.workload_id WHERE w.operation_id = ?",
           {op.id})) {
    const uint32_t impl = number(text_of(r, 0)), workload_number = number(text_of(r, 1));
    OperationFacts::Implementation& st = stats_by_number[impl];
    st.workloads.insert(workload_number);
    st.reproduced = st.reproduced || r.integer(6) != 0;
    st.replications = std::max(st.replications, r.integer(7));
    st.source_and_raw = st.source_and_raw || r.integer(8) != 0;
    if (text_of(r, 3) != "passed" || r.integer(4) == 0 || r.is_null(5)) continue;
    const double v = r.real(5);
    ++all_eligible;
    auto [it, fresh] = fastest.try_emplace({impl, workload_number, number(text_of(r, 2))}, v);
    if (!fresh) it->second = std::min(it->second, v);
  }
  for (auto& [n, st] : stats_by_number) f.stats[*names[n]] = std::move(st);
  // The evidence reruns add (schema.hpp): only the few runs some rerun names, so the pass above stays covered.
  for (const auto& r : store.db().query(std::string("SELECT DISTINCT r.implementation_id, ") + kDerivedReproducedSql +
                                            ", " + kDerivedReplicationsSql +
                                            " FROM run_reruns p CROSS JOIN benchmark_runs r CROSS JOIN workloads w "
                                            "WHERE r.run_digest = p.reproduces_run_digest AND w.id = r.workload_id AND "
                                            "w.operation_id = ?",
                                        {op.id})) {
    OperationFacts::Implementation& st = f.stats[r.text(0)];
    st.reproduced = st.reproduced || r.integer(1) != 0;
    st.replications = std::max(st.replications, r.integer(2));
  }
  auto& best_per_workload_gpu = f.best_per_workload_gpu;
  auto& best_per_impl_workload = f.best_per_impl_workload;
  for (const auto& [k, v] : fastest) {
    const auto& [impl, workload_number, gpu] = k;
    auto [w, fresh_w] = best_per_workload_gpu.try_emplace({*names[workload_number], *names[gpu]}, v);
    if (!fresh_w) w->second = std::min(w->second, v);
    auto [i, fresh_i] = best_per_impl_workload.try_emplace({*names[impl], *names[workload_number]}, v);
    if (!fresh_i) i->second = std::min(i->second, v);
  }
  // Eligible runs across all workloads (what KernelIndex's operation page counts): valid runs no run supersedes.
  auto superseded = store.db().query(
      // From the few superseding runs (ix_runs_supersedes) to what they supersede; CROSS JOIN keeps SQLite in that order.
      "SELECT COUNT(DISTINCT s.supersedes_id) FROM benchmark_runs s CROSS JOIN benchmark_runs r CROSS JOIN workloads w "
      "WHERE s.supersedes_id IS NOT NULL AND r.id = s.supersedes_id AND w.id = r.workload_id AND w.operation_id = ? AND "
      "r.status = 'passed' AND r.retracted_at IS NULL AND r.primary_value IS NOT NULL",
      {op.id});
  if (!superseded.empty()) all_eligible -= superseded[0].integer(0);
  return made;
}

std::shared_ptr<const OperationFacts> operation_facts(Store& store, const OperationRow& op) {
  return std::static_pointer_cast<const OperationFacts>(
      store.remembered_or("operation-facts:" + op.id, [&] { return compute_operation_facts(store, op); }));
}

}  // namespace

json operation_view(Store& store, const std::string& operation, const std::string& workload) {
  OperationRow op = find_operation(store, operation);
  json aliases = json::array();
  for (const auto& r : store.db().query("SELECT alias FROM operation_aliases WHERE operation_id = ? ORDER BY alias", {op.id})) {
    aliases.push_back(r.text(0));
  }
  const auto operation_facts_ptr = operation_facts(store, op);
  const json& workloads = operation_facts_ptr->workloads;
  // The selected workload: asked for, else the one with the most runs.
  int selected = -1;
  for (size_t i = 0; i < workloads.size(); ++i) {
    const json& w = workloads[i];
    if (!workload.empty()) {
      if (w["id"] == workload || w["digest"] == workload ||
          (workload.size() >= 8 && (w["id"].get<std::string>().rfind(workload, 0) == 0 ||
                                    w["digest"].get<std::string>().rfind(workload, 0) == 0))) {
        selected = static_cast<int>(i);
      }
    } else if (selected < 0 || w["runs"].get<int64_t>() > workloads[selected]["runs"].get<int64_t>()) {
      selected = static_cast<int>(i);
    }
  }
  if (!workload.empty() && selected < 0) throw Error("index", "workload", workload, "not a workload of " + op.name);
  json cohorts = json::array();
  json impls = json::array();
  int64_t eligible = 0;
  if (selected >= 0) {
    const json& w = workloads[selected];
    for (const auto& r : store.db().query(
             "SELECT DISTINCT comparison_key FROM benchmark_runs WHERE workload_id = ? ORDER BY comparison_key",
             {w["id"].get<std::string>()})) {
      json c = cohort_view(store, r.text(0), op.manifest, w["manifest"]);
      eligible += c["members"].get<int64_t>();
      cohorts.push_back(std::move(c));
    }
    std::stable_sort(cohorts.begin(), cohorts.end(), [](const json& a, const json& b) { return a["members"] > b["members"]; });
  }
  // The operation-wide facts (shared by all its pages, kept until the store changes).
  const OperationFacts& facts = *operation_facts_ptr;
  const int64_t all_eligible = facts.all_eligible;
  const auto& best_per_workload_gpu = facts.best_per_workload_gpu;
  const auto& best_per_impl_workload = facts.best_per_impl_workload;
  const std::string selected_id = selected >= 0 ? workloads[selected]["id"].get<std::string>() : std::string();
  auto impl_rows = store.db().query(
      "SELECT i.id, i.slug, i.title, p.name, i.language, i.license_expression FROM implementations i "
      "LEFT JOIN projects p ON p.id = i.project_id WHERE i.operation_id = ? ORDER BY i.slug",
      {op.id});
  // Each implementation's best valid value on the selected workload (any GPU), and the best of those.
  auto best_on_selected = [&](const std::string& impl) -> std::optional<double> {
    auto it = best_per_impl_workload.find({impl, selected_id});
    return it == best_per_impl_workload.end() ? std::nullopt : std::optional<double>(it->second);
  };
  double best = 0;
  for (const auto& r : impl_rows) {
    if (auto v = best_on_selected(text_of(r, 0)); v && (best == 0 || *v < best)) best = *v;
  }
  static const OperationFacts::Implementation no_runs;
  for (const auto& r : impl_rows) {
    auto found = facts.stats.find(text_of(r, 0));
    const OperationFacts::Implementation& st = found == facts.stats.end() ? no_runs : found->second;
    // The strongest evidence across the implementation's runs (KernelIndex's bestEvidence).
    EvidenceLevel level = evidence_level({st.reproduced, st.replications, st.source_and_raw, st.source_and_raw});
    const std::optional<double> mine = best_on_selected(text_of(r, 0));
    json best_ns = mine ? json(*mine) : json();
    impls.push_back({{"id", r.text(0)}, {"slug", r.text(1)}, {"title", r.is_null(2) ? r.text(1) : r.text(2)},
                     {"project", opt_text(r, 3)}, {"language", opt_text(r, 4)}, {"license", opt_text(r, 5)},
                     {"bestLatencyNs", best_ns}, {"xOfBest", !mine || best == 0 ? json() : json(*mine / best)},
                     {"workloadsRun", st.workloads.size()}, {"evidence", to_string(level)}});
  }
  std::stable_sort(impls.begin(), impls.end(), [](const json& a, const json& b) {
    if (a["bestLatencyNs"].is_null() != b["bestLatencyNs"].is_null()) return b["bestLatencyNs"].is_null();
    return !a["bestLatencyNs"].is_null() && a["bestLatencyNs"].get<double>() < b["bestLatencyNs"].get<double>();
  });
  // Plot data: the best latency per (implementation, workload) gives each implementation's line, and each
  // workload's record per GPU the floor plot.
  std::map<std::string, const json*> wl_by_id;
  for (const auto& w : workloads) wl_by_id[w["id"]] = &w;
  json latency_points = json::array();
  for (const auto& [k, v] : best_per_impl_workload) {
    latency_points.push_back({{"implementationId", k.first}, {"workloadId", k.second}, {"latencyNs", v}});
  }
  json floor_points = json::array();
  for (const auto& [k, v] : best_per_workload_gpu) {
    auto it = wl_by_id.find(k.first);
    if (it == wl_by_id.end()) continue;
    if (auto f = headroom_v1(op.manifest, (*it->second)["manifest"], k.second)) {
      floor_points.push_back({{"workloadId", k.first}, {"gpu", k.second}, {"recordNs", v}, {"floorNs", f->floor_ns},
                              {"ratio", v / f->floor_ns}});
    }
  }
  json workload_list = json::array();
  for (size_t i = 0; i < workloads.size(); ++i) {
    json w = workloads[i];
    w["selected"] = static_cast<int>(i) == selected;
    w.erase("manifest");
    workload_list.push_back(std::move(w));
  }
  const json meta = op.manifest.value("metadata", json::object());
  return {{"operation",
           {{"id", op.id}, {"slug", op.slug}, {"name", op.name}, {"title", meta.value("title", op.name)},
            {"family", op.family}, {"digest", op.digest}, {"description", meta.value("description", "")},
            {"tags", op.tags}, {"aliases", aliases}}},
          {"workloads", workload_list},
          {"selectedWorkload", selected >= 0 ? workload_list[selected] : json()},
          {"eligibleRuns", eligible},
          {"eligibleRunsAllWorkloads", all_eligible},
          {"cohorts", cohorts},
          {"implementations", impls},
          {"semantics", semantics_of(op.manifest)},
          {"plots", {{"latency", latency_points}, {"floors", floor_points}}}};
}

namespace {

// Reruns and the runs they reproduce (run_reruns), as {"original": run, "rerun": run, "sameImplementation"}
// (false: the rerun ran another implementation, given with --impl); each run is
// {id, runDigest, status, latencyNs, statistic, gpu, observedAt, implementation, workloadId}, the original only its
// runDigest when it is not in this store. `condition` is over the rerun `x` and the original `o`.
json rerun_links(Store& store, const std::string& condition, const std::vector<Value>& params) {
  auto side = [](const Row& r, size_t at) {
    return json{{"id", r.text(at)},           {"runDigest", r.text(at + 1)},
                {"status", r.text(at + 2)},   {"latencyNs", opt(r, at + 3)},
                {"statistic", opt_text(r, at + 4)}, {"gpu", opt_text(r, at + 5)},
                {"observedAt", opt_text(r, at + 6)}, {"implementation", opt_text(r, at + 7)},
                {"workloadId", r.text(at + 8)}};
  };
  json out = json::array();
  for (const auto& r : store.db().query(
           "SELECT x.id, x.run_digest, x.status, x.primary_value, x.primary_statistic, x.hardware_model, x.observed_at, "
           "COALESCE(xi.title, xi.slug), x.workload_id, o.id, p.reproduces_run_digest, o.status, o.primary_value, "
           "o.primary_statistic, o.hardware_model, o.observed_at, COALESCE(oi.title, oi.slug), o.workload_id, "
           "p.same_implementation "
           "FROM run_reruns p JOIN benchmark_runs x ON x.id = p.run_id "
           "JOIN implementations xi ON xi.id = x.implementation_id "
           "LEFT JOIN benchmark_runs o ON o.run_digest = p.reproduces_run_digest "
           "LEFT JOIN implementations oi ON oi.id = o.implementation_id WHERE " + condition +
               " ORDER BY x.observed_at, x.id",
           params)) {
    json original = r.is_null(9) ? json{{"runDigest", r.text(10)}, {"inStore", false}} : side(r, 9);
    if (!r.is_null(9)) original["inStore"] = true;
    out.push_back({{"original", original}, {"rerun", side(r, 0)}, {"sameImplementation", r.integer(18) != 0}});
  }
  return out;
}

}  // namespace

json workload_view(Store& store, const std::string& key) {
  std::string id = find_id(store, "workloads", "workload_digest", key, "workload");
  auto rows = store.db().query(
      "SELECT w.id, w.workload_digest, w.manifest, o.slug, o.name, o.manifest FROM workloads w JOIN operations o ON "
      "o.id = w.operation_id WHERE w.id = ?",
      {id});
  json m = json::parse(rows[0].text(2));
  json op = json::parse(rows[0].text(5));
  json cohorts = json::array();
  // In one order on every backend (its reruns often add cohorts to a workload).
  for (const auto& r : store.db().query(
           "SELECT DISTINCT comparison_key FROM benchmark_runs WHERE workload_id = ? ORDER BY comparison_key", {id})) {
    cohorts.push_back(cohort_view(store, r.text(0), op, m));
  }
  return {{"id", id}, {"digest", rows[0].text(1)}, {"operation", rows[0].text(3)}, {"operationName", rows[0].text(4)},
          {"label", workload_label(m)}, {"manifest", m}, {"cohorts", cohorts},
          // Reruns of this workload's runs, and reruns recorded on it (kindex rerun).
          {"reruns", rerun_links(store, "(o.workload_id = ? OR x.workload_id = ?)", {id, id})}};
}

json implementation_view(Store& store, const std::string& key) {
  auto found = store.db().query("SELECT id FROM implementations WHERE slug = ? ORDER BY created_at LIMIT 1", {key});
  std::string id = found.empty() ? find_id(store, "implementations", "implementation_digest", key, "implementation")
                                 : found[0].text(0);
  auto rows = store.db().query(
      "SELECT i.id, i.slug, i.title, i.implementation_digest, i.manifest, p.name, o.slug, o.name, i.language, "
      "i.license_expression FROM implementations i LEFT JOIN projects p ON p.id = i.project_id JOIN operations o ON "
      "o.id = i.operation_id WHERE i.id = ?",
      {id});
  const Row& r = rows[0];
  json runs = json::array();
  for (const auto& rr : store.db().query(std::string("SELECT ") + kRunColumns + kRunJoins +
                                         "WHERE r.implementation_id = ? ORDER BY r.observed_at DESC", {id})) {
    runs.push_back(run_summary(rr));
  }
  return {{"id", r.text(0)}, {"slug", r.text(1)}, {"title", opt_text(r, 2)}, {"digest", r.text(3)},
          {"manifest", json::parse(r.text(4))}, {"project", opt_text(r, 5)}, {"operation", r.text(6)},
          {"operationName", r.text(7)}, {"language", opt_text(r, 8)}, {"license", opt_text(r, 9)}, {"runs", runs}};
}

json run_view(Store& store, const std::string& key) {
  std::string id = find_id(store, "benchmark_runs", "run_digest", key, "run");
  auto rows = store.db().query(std::string("SELECT ") + kRunColumns + ", rm.manifest, w.manifest, o.manifest, o.slug, "
                               "o.name, w.id " + kRunJoins +
                               "JOIN run_manifests rm ON rm.run_id = r.id JOIN workloads w ON w.id = r.workload_id "
                               "JOIN operations o ON o.id = w.operation_id WHERE r.id = ?",
                               {id});
  const Row& r = rows[0];
  json run = run_summary(r);
  const size_t base = 35;
  json manifest = json::parse(r.text(base));
  json wl = json::parse(r.text(base + 1));
  json op = json::parse(r.text(base + 2));
  const json& spec = manifest.at("run").at("spec");
  bool native = false;
  auto members = store.cohort(run["comparisonKey"], &native);
  json rank = json(), first = json();
  for (const auto& m : members) {
    if (m.id == id) rank = m.rank;
  }
  if (!members.empty()) first = {{"id", members.front().id}, {"latencyNs", members.front().value}};
  json native_metrics = spec.value("sourceNative", json::object()).value("metrics", json::object());
  json measurements = json::array();
  for (const auto& m : store.db().query(
           "SELECT metric, statistic, unit, value, sample_count FROM measurements WHERE run_id = ? ORDER BY metric, "
           "statistic",
           {id})) {
    measurements.push_back({{"metric", m.text(0)}, {"statistic", m.text(1)}, {"unit", m.text(2)}, {"value", m.real(3)},
                            {"sampleCount", m.is_null(4) ? json() : json(m.integer(4))}});
  }
  json samples = json::array();
  for (const auto& s : store.db().query("SELECT value_ns FROM run_samples WHERE run_id = ? ORDER BY idx", {id})) {
    samples.push_back(s.real(0));
  }
  json tensors = json::array();
  for (const auto& [name, t] : member_or_empty(wl.at("spec"), "tensors").items()) {
    tensors.push_back({{"name", name}, {"dtype", t.value("dtype", "")}, {"shape", t.value("shape", json::array())}});
  }
  json floor;
  if (auto f = headroom_v1(op, wl, run["gpu"])) {
    floor = {{"ns", f->floor_ns}, {"bytes", f->bytes}, {"bound", f->bound}, {"gpu", f->gpu}, {"policy", "headroom-v1"}};
  }
  std::string title = run["implementation"].get<std::string>() + " · " + r.text(base + 4) + " · " + run["gpu"].get<std::string>();
  std::string citation = "kindex run " + id.substr(0, 8) + ": " + title + ", " +
                         (run["latencyNs"].is_number() ? std::to_string(std::llround(run["latencyNs"].get<double>())) + " ns " +
                                                              run.value("statistic", json("")).get<std::string>()
                                                        : std::string("no latency")) +
                         ", observed " + run["observedAt"].get<std::string>().substr(0, 10) + ", " +
                         run["runDigest"].get<std::string>() + ", accessed " +
                         evidence::utc_timestamp_now().substr(0, 10) + ".";
  return {{"run", run},
          {"title", title},
          {"operation", {{"slug", r.text(base + 3)}, {"name", r.text(base + 4)}}},
          {"workloadId", r.text(base + 5)},
          {"rank", rank},
          {"cohortSize", members.size()},
          {"sourceNativeCohort", native},
          {"first", first},
          {"xOfFirst", first.is_null() || !run["latencyNs"].is_number() ? json()
                                                                        : json(run["latencyNs"].get<double>() / first["latencyNs"].get<double>())},
          {"sourceMetrics", native_metrics},
          {"speedupFactor", native_metrics.value("speedup_factor", json())},
          {"solScore", native_metrics.value("sol_score", json())},
          {"avgSpeedup", native_metrics.value("avg_speedup", json())},
          {"fast1", native_metrics.contains("fast_1_count")
                        ? json{{"count", native_metrics["fast_1_count"]}, {"total", native_metrics.value("fast_1_total", json())}}
                        : json()},
          {"externalId", spec.value("sourceNative", json::object()).value("externalId", json())},
          {"correctness", spec.value("correctness", json())},
          {"workload", {{"label", workload_label(wl)}, {"axes", wl.at("spec").value("axes", json::object())},
                        {"tensors", tensors}, {"comparator", wl.at("spec").value("correctness", json::object()).value("comparator", "")},
                        {"kind", wl.value("kind", "")}}},
          {"measurements", measurements},
          {"samplesNs", samples},
          {"protocol", manifest.at("protocol").at("spec")},
          {"environment", manifest.at("environment").at("spec")},
          {"manifest", manifest},
          {"floor", floor},
          {"citation", citation},
          // kindex rerun: the reruns that re-measured this run, and the run this one re-measured (null if none).
          {"reruns", rerun_links(store, "o.id = ?", {id})},
          {"rerunOf", [&] {
             json of = rerun_links(store, "x.id = ?", {id});
             return of.empty() ? json() : of[0]["original"];
           }()}};
}

namespace {

// A cohort's GPU and its first-ranked run, exactly as cohort_view reports them ("gpu", "runs"[0]; null when no
// member is ranked), without building the rest of the view.
std::pair<json, json> cohort_leader(Store& store, const std::string& ck) {
  auto members = store.cohort(ck);
  auto meta = store.db().query("SELECT hardware_model FROM benchmark_runs WHERE comparison_key = ? LIMIT 1", {ck});
  json best;
  if (!members.empty()) {
    auto rows =
        store.db().query(std::string("SELECT ") + kRunColumns + kRunJoins + "WHERE r.id = ?", {members.front().id});
    best = run_summary(rows[0]);
    best["rank"] = members.front().rank;
    best["xOfFirst"] = 1.0;  // the leader over itself
  }
  return {meta.empty() ? "" : meta[0].text(0), std::move(best)};
}

}  // namespace

json resolve(Store& store, const ResolveQuery& q, int near_limit) {
  OperationRow op = find_operation(store, q.operation);
  // An axis the operation does not have is named, with the axes it has.
  const json& op_axes = member_or_empty(member_or_empty(op.manifest, "spec"), "axes");
  for (const auto& [k, want] : q.axes) {
    if (op_axes.contains(k)) continue;
    std::string known;
    for (const auto& [name, _] : op_axes.items()) known += (known.empty() ? "" : ", ") + name;
    throw Error("resolve", "axis", k, "not an axis of " + op.name + " (its axes: " + known + ")");
  }
  // The operation's workloads with their axes and dtypes, parsed once until the store changes.
  struct WorkloadFacts {
    std::string id, digest;
    json manifest;
    std::map<std::string, int64_t> axes;
    std::set<std::string> dtypes;
  };
  using AllWorkloads = std::vector<WorkloadFacts>;
  auto all_workloads = std::static_pointer_cast<const AllWorkloads>(store.remembered("resolve-workloads:" + op.id));
  if (!all_workloads) {
    auto made = std::make_shared<AllWorkloads>();
    for (const auto& r : store.db().query(
             "SELECT id, manifest, workload_digest FROM workloads WHERE operation_id = ? AND kind = 'WorkloadCase'", {op.id})) {
      WorkloadFacts f{r.text(0), r.text(2), json::parse(r.text(1)), {}, {}};
      f.axes = workload_axes(op.manifest, f.manifest);
      f.dtypes = workload_dtypes(f.manifest);
      made->push_back(std::move(f));
    }
    store.remember("resolve-workloads:" + op.id, made);
    all_workloads = std::move(made);
  }
  struct Candidate {
    const WorkloadFacts* w;
    json differs = json::array();
    double distance = 0;
  };
  std::vector<Candidate> candidates;
  for (const auto& w : *all_workloads) {
    Candidate c{&w};
    const auto& axes = w.axes;
    for (const auto& [k, want] : q.axes) {
      auto it = axes.find(k);
      if (it == axes.end()) {
        c.differs.push_back({{"facet", "axis " + k}, {"want", want}, {"have", nullptr}});
        c.distance += 10;
      } else if (it->second != want) {
        c.differs.push_back({{"facet", "axis " + k}, {"want", want}, {"have", it->second}});
        c.distance += 1 + std::fabs(std::log((1.0 + it->second) / (1.0 + want)));
      }
    }
    if (!q.dtype.empty() && !w.dtypes.count(q.dtype)) {
      c.differs.push_back({{"facet", "dtype"}, {"want", q.dtype}, {"have", *w.dtypes.begin()}});
      c.distance += 5;
    }
    candidates.push_back(std::move(c));
  }
  auto gpu_matches = [&](const std::string& model) {
    if (q.gpu.empty()) return true;
    std::string a = model, b = q.gpu;
    std::transform(a.begin(), a.end(), a.begin(), ::tolower);
    std::transform(b.begin(), b.end(), b.begin(), ::tolower);
    return a.find(b) != std::string::npos;
  };
  // The exact workload's cohorts and their GPUs (read once: both the exact answer and its other-GPU near matches
  // use them).
  auto cohort_gpus = [&](const Candidate& c) {
    return store.db().query(
        "SELECT comparison_key, MIN(hardware_model) FROM benchmark_runs WHERE workload_id = ? GROUP BY comparison_key",
        {c.w->id});
  };
  auto cohorts_of = [&](const Candidate& c, const std::vector<Row>& groups) {
    json out = json::array();
    for (const auto& r : groups) {
      if (!gpu_matches(r.text(1))) continue;
      out.push_back(cohort_view(store, r.text(0), op.manifest, c.w->manifest, 50));
    }
    return out;
  };
  json exact = json();
  json near = json::array();
  std::stable_sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) { return a.distance < b.distance; });
  // Axes that match several workloads do not pick one: every matching workload is listed instead.
  json ambiguous = json::array();
  if (std::count_if(candidates.begin(), candidates.end(), [](const Candidate& c) { return c.differs.empty(); }) > 1) {
    for (const auto& c : candidates) {
      if (c.differs.empty()) {
        json axes = json::object();
        for (const auto& [k, v] : c.w->axes) axes[k] = v;
        ambiguous.push_back({{"workloadId", c.w->id}, {"label", workload_label(c.w->manifest)}, {"axes", std::move(axes)}});
      }
    }
  }
  for (const auto& c : candidates) {
    if (c.differs.empty() && !ambiguous.empty()) continue;
    if (c.differs.empty() && exact.is_null()) {
      const auto groups = cohort_gpus(c);
      json cohorts = cohorts_of(c, groups);
      // Across the exact workload's cohorts: kindex-verified evidence first, then latency; one entry per
      // implementation.
      // Sorts lightweight references and copies only each implementation's best run (copying every run's JSON
      // dominated the resolve time).
      struct Entry {
        const json* run;
        const json* comparison_key;
        int level;
        double latency;
      };
      std::vector<Entry> all;
      for (const auto& co : cohorts) {
        for (const auto& r : co["runs"]) {
          const std::string& l = r["evidence"].get_ref<const std::string&>();
          int level = l == "replicated" ? 3 : l == "verified" ? 2 : l == "reproducible" ? 1 : 0;
          all.push_back({&r, &co["comparisonKey"], level, r["latencyNs"].get<double>()});
        }
      }
      std::stable_sort(all.begin(), all.end(), [](const Entry& a, const Entry& b) {
        if (a.level != b.level) return a.level > b.level;
        return a.latency < b.latency;
      });
      json ranked = json::array();
      std::set<std::string> seen;
      for (const auto& e : all) {
        if (!seen.insert((*e.run)["implementationId"].get<std::string>()).second) continue;
        json best = *e.run;
        best["cohortRank"] = (*e.run)["rank"];
        best["comparisonKey"] = *e.comparison_key;
        ranked.push_back(std::move(best));
      }
      exact = {{"workloadId", c.w->id}, {"digest", c.w->digest}, {"label", workload_label(c.w->manifest)},
               {"cohorts", std::move(cohorts)}, {"ranked", std::move(ranked)}};
      if (!q.gpu.empty()) {
        // The exact workload measured on other GPUs: only each cohort's GPU and leader are shown, so the full
        // cohort views are not built.
        for (const auto& r : groups) {
          if (static_cast<int>(near.size()) >= near_limit) break;
          if (gpu_matches(r.text(1))) continue;
          auto [gpu, best] = cohort_leader(store, r.text(0));
          near.push_back({{"workloadId", c.w->id}, {"label", workload_label(c.w->manifest)},
                          {"differs", json::array({{{"facet", "gpu"}, {"want", q.gpu}, {"have", std::move(gpu)}}})},
                          {"best", std::move(best)}});
        }
      }
      continue;
    }
    if (static_cast<int>(near.size()) >= near_limit) continue;
    auto cos = store.db().query(
        std::string("SELECT ") + kRunColumns + kRunJoins +
            "WHERE r.workload_id = ? AND r.status = 'passed' AND r.retracted_at IS NULL AND r.primary_value IS NOT NULL "
            "ORDER BY r.primary_value LIMIT 5",
        {c.w->id});
    json best;
    for (const auto& r : cos) {
      if (gpu_matches(r.text(6))) {
        best = run_summary(r);
        break;
      }
    }
    json differs = c.differs;
    if (best.is_null() && !cos.empty()) {
      best = run_summary(cos[0]);
      differs.push_back({{"facet", "gpu"}, {"want", q.gpu}, {"have", best["gpu"]}});
    }
    if (best.is_null()) continue;
    near.push_back({{"workloadId", c.w->id}, {"label", workload_label(c.w->manifest)}, {"differs", std::move(differs)},
                    {"best", std::move(best)}});
  }
  return {{"operation", {{"slug", op.slug}, {"name", op.name}}},
          {"query", {{"axes", q.axes}, {"dtype", q.dtype}, {"gpu", q.gpu}}},
          {"exact", std::move(exact)},
          {"ambiguous", std::move(ambiguous)},
          {"near", std::move(near)}};
}

namespace {

std::string lowercase(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
bool contains_folded(const std::string& text, const std::string& needle) {
  return needle.empty() || lowercase(text).find(lowercase(needle)) != std::string::npos;
}

// Minimum, quartiles (linear interpolation between order statistics) and maximum.
json distribution(std::vector<double> v) {
  if (v.empty()) return {{"count", 0}};
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    double pos = q * static_cast<double>(v.size() - 1);
    size_t i = static_cast<size_t>(pos);
    double frac = pos - static_cast<double>(i);
    return i + 1 < v.size() ? v[i] + frac * (v[i + 1] - v[i]) : v[i];
  };
  return {{"count", v.size()}, {"minNs", v.front()}, {"q1Ns", at(0.25)}, {"medianNs", at(0.5)},
          {"q3Ns", at(0.75)}, {"maxNs", v.back()}, {"valuesNs", v}};
}

}  // namespace

json leaderboard(Store& store, const LeaderboardQuery& q) {
  OperationRow op = find_operation(store, q.operation);
  struct Entry {
    std::string id, slug, title;
    json project, authors = json::array();
    bool shown = true;
    int64_t runs = 0, passed = 0;
    std::set<std::string> workloads;
    std::map<std::string, double> best_per_cohort;  // comparison key -> fastest passed value
    std::map<std::pair<std::string, std::string>, double> latency_per_workload_gpu;  // ns
  };
  std::vector<Entry> entries;
  std::map<std::string, size_t> index;
  std::set<std::string> authors, devices;
  for (const auto& r : store.db().query(
           "SELECT i.id, i.slug, i.title, p.name, i.manifest FROM implementations i LEFT JOIN projects p ON "
           "p.id = i.project_id WHERE i.operation_id = ? ORDER BY i.slug, i.id",
           {op.id})) {
    Entry en;
    en.id = r.text(0);
    en.slug = r.text(1);
    en.title = r.is_null(2) ? en.slug : r.text(2);
    en.project = opt_text(r, 3);
    // FlashInfer-Bench's solution author is the implementation manifest's metadata.authors (KernelIndex keeps it
    // there); the project stands in when no author is named.
    json m = json::parse(r.text(4));
    for (const auto& a : m.value("metadata", json::object()).value("authors", json::array())) {
      if (!a.is_object()) continue;
      for (const char* field : {"name", "github"}) {  // KernelIndex names an author, or gives their GitHub handle
        if (a.value(field, json()).is_string()) {
          en.authors.push_back(a[field]);
          break;
        }
      }
    }
    if (en.authors.empty() && en.project.is_string()) en.authors.push_back(en.project);
    if (!q.author.empty()) {
      en.shown = false;
      for (const auto& a : en.authors) en.shown = en.shown || contains_folded(a.get<std::string>(), q.author);
    }
    for (const auto& a : en.authors) authors.insert(a.get<std::string>());
    index[en.id] = entries.size();
    entries.push_back(std::move(en));
  }
  for (const auto& r : store.db().query(
           "SELECT r.implementation_id, r.workload_id, r.hardware_model, r.status, r.primary_value, r.comparison_key, "
           "r.primary_metric, r.primary_unit FROM benchmark_runs r JOIN workloads w ON w.id = r.workload_id "
           "WHERE w.operation_id = ? AND r.retracted_at IS NULL AND NOT EXISTS "
           "(SELECT 1 FROM benchmark_runs s WHERE s.supersedes_id = r.id)",
           {op.id})) {
    const std::string gpu = r.is_null(2) ? "" : r.text(2);
    if (!gpu.empty()) devices.insert(gpu);
    auto it = index.find(r.text(0));
    if (it == index.end() || !contains_folded(gpu, q.device)) continue;
    Entry& en = entries[it->second];
    ++en.runs;
    en.workloads.insert(r.text(1));
    if (r.text(3) != "passed" || r.is_null(4)) continue;
    ++en.passed;
    const double v = r.real(4);
    auto [c, fresh] = en.best_per_cohort.emplace(r.text(5), v);
    if (!fresh) c->second = std::min(c->second, v);
    if (!r.is_null(6) && r.text(6) == "latency" && !r.is_null(7) && r.text(7) == "ns") {
      auto [l, first] = en.latency_per_workload_gpu.emplace(std::make_pair(r.text(1), gpu), v);
      if (!first) l->second = std::min(l->second, v);
    }
  }
  // The baseline: asked for by id, id prefix or slug; else the implementation with passed runs in the most cohorts.
  const Entry* baseline = nullptr;
  if (!q.baseline.empty()) {
    for (const auto& en : entries) {
      if (en.id == q.baseline || en.slug == q.baseline || (q.baseline.size() >= 8 && en.id.rfind(q.baseline, 0) == 0)) {
        baseline = &en;
        break;
      }
    }
    if (!baseline) throw Error("index", "baseline", q.baseline, "no such implementation of " + op.name);
  } else {
    for (const auto& en : entries) {
      if (!en.best_per_cohort.empty() && (!baseline || en.best_per_cohort.size() > baseline->best_per_cohort.size()))
        baseline = &en;
    }
  }
  json rows = json::array();
  for (const auto& en : entries) {
    if (!en.shown || en.runs == 0) continue;
    std::vector<double> speedups;
    if (baseline) {
      for (const auto& [ck, v] : en.best_per_cohort) {
        auto b = baseline->best_per_cohort.find(ck);
        if (b != baseline->best_per_cohort.end() && v > 0) speedups.push_back(b->second / v);
      }
    }
    json avg, geomean, lo, hi;
    if (!speedups.empty()) {
      double sum = 0, logs = 0;
      for (double x : speedups) sum += x, logs += std::log(x);
      avg = sum / static_cast<double>(speedups.size());
      geomean = std::exp(logs / static_cast<double>(speedups.size()));
      lo = *std::min_element(speedups.begin(), speedups.end());
      hi = *std::max_element(speedups.begin(), speedups.end());
    }
    std::vector<double> latencies;
    for (const auto& [k, v] : en.latency_per_workload_gpu) latencies.push_back(v);
    rows.push_back({{"id", en.id}, {"slug", en.slug}, {"title", en.title}, {"project", en.project}, {"authors", en.authors},
                    {"baseline", baseline == &en}, {"runs", en.runs}, {"passed", en.passed},
                    {"passRate", static_cast<double>(en.passed) / static_cast<double>(en.runs)},
                    {"workloads", en.workloads.size()}, {"cohortsCompared", speedups.size()}, {"avgSpeedup", avg},
                    {"geomeanSpeedup", geomean}, {"minSpeedup", lo}, {"maxSpeedup", hi},
                    {"latency", distribution(std::move(latencies))}});
  }
  // Highest average speedup first (implementations with no comparable cohort last), then pass rate, then slug.
  std::stable_sort(rows.begin(), rows.end(), [](const json& a, const json& b) {
    if (a["avgSpeedup"].is_null() != b["avgSpeedup"].is_null()) return b["avgSpeedup"].is_null();
    if (!a["avgSpeedup"].is_null() && a["avgSpeedup"] != b["avgSpeedup"]) return a["avgSpeedup"].get<double>() > b["avgSpeedup"].get<double>();
    return a["passRate"].get<double>() > b["passRate"].get<double>();
  });
  for (size_t i = 0; i < rows.size(); ++i) rows[i]["position"] = i + 1;
  const json meta = op.manifest.value("metadata", json::object());
  return {{"operation", {{"id", op.id}, {"slug", op.slug}, {"name", op.name}, {"title", meta.value("title", op.name)}}},
          {"filters", {{"device", q.device}, {"author", q.author}, {"baseline", q.baseline}}},
          {"devices", devices},
          {"authors", authors},
          {"baseline", baseline ? json{{"id", baseline->id}, {"slug", baseline->slug}, {"title", baseline->title},
                                       {"chosenBy", q.baseline.empty() ? "most cohorts with a passed run" : "asked"}}
                                : json()},
          {"entries", std::move(rows)}};
}

json records(Store& store, const std::string& operation) {
  std::vector<Value> params;
  // The distinct (workload, cohort) pairs come from the runs index alone; each workload's operation and label are
  // read once, not once per run.
  std::string filter;
  if (!operation.empty()) {
    filter = " WHERE w.operation_id = ?";
    params.push_back(find_operation(store, operation).id);
  }
  struct WorkloadInfo {
    std::string op_slug, op_name, label;
  };
  std::map<std::string, WorkloadInfo> workload_info;
  for (const auto& r : store.db().query(
           "SELECT w.id, o.slug, o.name, w.manifest FROM workloads w JOIN operations o ON o.id = w.operation_id" + filter, params)) {
    workload_info[r.text(0)] = {r.text(1), r.text(2), workload_label(json::parse(r.text(3)))};
  }
  struct Group {
    std::string op_slug, workload_id, comparison_key;
    const WorkloadInfo* info;
  };
  std::vector<Group> groups;
  for (const auto& r : store.db().query(
           "SELECT DISTINCT r.workload_id, r.comparison_key FROM benchmark_runs r" +
               std::string(operation.empty() ? "" : " JOIN workloads w ON w.id = r.workload_id") + filter,
           params)) {
    auto it = workload_info.find(r.text(0));
    if (it == workload_info.end()) continue;
    groups.push_back({it->second.op_slug, r.text(0), r.text(1), &it->second});
  }
  std::sort(groups.begin(), groups.end(), [](const Group& a, const Group& b) {
    return std::tie(a.op_slug, a.workload_id, a.comparison_key) < std::tie(b.op_slug, b.workload_id, b.comparison_key);
  });
  json out = json::array();
  for (const Group& g : groups) {
    auto members = store.cohort(g.comparison_key);
    json holder;
    if (!members.empty()) {
      // The holder is the fastest run (the earliest of equals), whatever order its tie chain is listed in.
      const Ranked* best = &members.front();
      for (const auto& m : members)
        if (m.value < best->value || (m.value == best->value && m.observed_at < best->observed_at)) best = &m;
      auto h = store.db().query(std::string("SELECT ") + kRunColumns + kRunJoins + "WHERE r.id = ?", {best->id});
      holder = run_summary(h[0]);
    }
    json history = json::array();
    for (const auto& e : store.db().query(
             "SELECT id, run_id, previous_run_id, policy_version, cause, at, created_at FROM record_events WHERE "
             "comparison_key = ? ORDER BY created_at, at, id",
             {g.comparison_key})) {
      history.push_back({{"id", e.text(0)}, {"runId", opt_text(e, 1)}, {"previousRunId", opt_text(e, 2)},
                         {"policyVersion", e.text(3)}, {"cause", e.text(4)}, {"at", e.text(5)},
                         {"createdAt", opt_text(e, 6)}});
    }
    out.push_back({{"comparisonKey", g.comparison_key}, {"operation", g.op_slug}, {"operationName", g.info->op_name},
                   {"workloadId", g.workload_id}, {"workload", g.info->label},
                   {"record", holder}, {"members", members.size()}, {"history", history}});
  }
  return out;
}

json compare(Store& store, const std::string& a, const std::string& b) {
  json ra = run_view(store, a), rb = run_view(store, b);
  json differs = json::array();
  auto facet = [&](const std::string& name, const json& x, const json& y) {
    if (x != y) differs.push_back({{"facet", name}, {"a", x}, {"b", y}});
  };
  facet("implementation", ra["run"]["implementation"], rb["run"]["implementation"]);
  facet("operation", ra["operation"]["name"], rb["operation"]["name"]);
  facet("workload", ra["workload"]["label"], rb["workload"]["label"]);
  facet("gpu", ra["run"]["gpu"], rb["run"]["gpu"]);
  facet("protocol", ra["run"]["protocolKey"], rb["run"]["protocolKey"]);
  facet("environment", ra["run"]["environmentKey"], rb["run"]["environmentKey"]);
  facet("correctness", ra["run"]["correctnessKey"], rb["run"]["correctnessKey"]);
  facet("statistic", ra["run"]["statistic"], rb["run"]["statistic"]);
  bool comparable = ra["run"]["comparisonKey"] == rb["run"]["comparisonKey"];
  json ratio;
  if (ra["run"]["latencyNs"].is_number() && rb["run"]["latencyNs"].is_number()) {
    ratio = rb["run"]["latencyNs"].get<double>() / ra["run"]["latencyNs"].get<double>();
  }
  ra.erase("manifest");
  rb.erase("manifest");
  ra.erase("samplesNs");
  rb.erase("samplesNs");
  return {{"a", ra}, {"b", rb}, {"sameCohort", comparable}, {"differs", differs}, {"ratioBOverA", ratio}};
}

}  // namespace kindex::store
