// The runs' read model: one workload, implementation or run, reruns linked, and two runs compared.
#include "store/query.hpp"

#include <algorithm>
#include <memory>
#include <cmath>
#include <set>
#include <tuple>
#include <unordered_map>

#include "core/error.hpp"
#include "evidence/manifest.hpp"
#include "store/attestations.hpp"
#include "store/rows.hpp"
#include "store/schema.hpp"
#include "store/query_internal.hpp"

namespace kindex::store {

using nlohmann::json;
using namespace query_internal;

namespace {

// Reruns and the runs they reproduce (run_reruns), as {"original": run, "rerun": run, "sameImplementation"}
// (false: the rerun ran another implementation, given with --impl) and ratioToOriginal (the rerun's latency over the
// original's, null without both); each run is
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
    const json rerun = side(r, 0);
    // The rerun's latency over the original's (each its own statistic, on its own machine).
    const json ratio = rerun["latencyNs"].is_number() && original.value("latencyNs", json()).is_number() &&
                               original["latencyNs"].get<double>() > 0
                           ? json(rerun["latencyNs"].get<double>() / original["latencyNs"].get<double>())
                           : json();
    out.push_back({{"original", original}, {"rerun", rerun}, {"sameImplementation", r.integer(18) != 0},
                   {"ratioToOriginal", ratio}});
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
           }()},
          // Signed attestations of its reruns, or of this run as a rerun, each checked (store/attestations.hpp).
          {"attestations", attestations_of(store, run["runDigest"].get<std::string>())}};
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
