// The operations' read model: search, workload labels and the operation page's view (operation_view).
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
#include "store/query_internal.hpp"

namespace kindex::store {

using nlohmann::json;
using namespace query_internal;

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

}  // namespace kindex::store
