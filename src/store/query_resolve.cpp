// Resolving a workload of an operation by its axes: the exact case, the ambiguous ones, the nearest.
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

// Longer than ~150 lines for now: the resolver's steps (axes named, the exact workload, then the nearest by axis
// distance, each with its cohort leader) share the operation's rows and axes.
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

}  // namespace kindex::store
