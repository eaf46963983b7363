// Records: each cohort's current record and its history.
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

json records(Store& store, const std::string& operation) {
  std::vector<Value> params;
  // The distinct (workload, cohort) pairs come from the runs index alone; each workload's operation and label are
  // read once, not once per run.
  std::string filter;
  if (!operation.empty()) {
    filter = " WHERE w.operation_id = ?";
    const std::string operation_id = find_operation(store, operation).id;
    params.emplace_back(operation_id);
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
    if (const Ranked* best = record_holder(members)) {
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

}  // namespace kindex::store
