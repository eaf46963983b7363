// Serving evidence: end-to-end serving runs (a model served by a configuration of a serving stack under a serving
// workload, on some GPUs), their throughput-latency Pareto fronts per model and GPU, and resolve-serving.
#include "store/query.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "core/error.hpp"
#include "store/query_internal.hpp"

namespace kindex::store {

using nlohmann::json;
using namespace query_internal;

namespace {

constexpr const char* kThroughputMetric = "output_token_throughput_tps";
constexpr const char* kLatencyStatistic = "p99";

// One serving run as the views plot and rank it.
struct Point {
  json summary;  // the run as every serving view lists it
  std::string configuration_id;
  std::optional<double> throughput;           // output tokens/s of the whole system
  double accelerators = 0;                     // total accelerators (0: not stated)
  std::map<std::string, double> latency_ms;    // ttft_ms / tpot_ms at p99
  std::map<std::string, bool> latency_bound;   // true: the workload's SLO the run met, no published value
  std::optional<double> per_accelerator() const {
    if (!throughput) return std::nullopt;
    return accelerators > 0 ? *throughput / accelerators : *throughput;
  }
};

struct ModelRow {
  std::string id, slug, name, digest;
  json to_json() const { return {{"id", id}, {"slug", slug}, {"name", name}, {"modelDigest", digest}}; }
};

// A model by id, digest, slug or a unique case-insensitive part of its slug or name.
ModelRow find_model(Store& store, const std::string& key) {
  if (key.empty()) throw Error("serving", "model", key, "name a model (its slug, name or id)");
  const auto rows = store.db().query("SELECT id, slug, name, model_digest FROM model_revisions ORDER BY slug, id");
  std::vector<const Row*> matches;
  for (const auto& r : rows) {
    if (r.text(0) == key || r.text(1) == key || r.text(3) == key) return {r.text(0), r.text(1), r.text(2), r.text(3)};
    const std::string needle = lowercase(key);
    if (lowercase(r.text(1)).find(needle) != std::string::npos || lowercase(r.text(2)).find(needle) != std::string::npos)
      matches.push_back(&r);
  }
  if (matches.size() == 1) return {matches[0]->text(0), matches[0]->text(1), matches[0]->text(2), matches[0]->text(3)};
  std::string listed;
  for (const Row* r : matches) listed += (listed.empty() ? "" : ", ") + r->text(1);
  if (!matches.empty()) throw Error("serving", "model", key, "matches several models: " + listed);
  for (const auto& r : rows) listed += (listed.empty() ? "" : ", ") + r.text(1);
  throw Error("serving", "model", key, listed.empty() ? "no such model (no serving evidence stored)" : "no such model; models: " + listed);
}

const char* kPointColumns =
    "r.id, r.run_digest, r.status, r.observed_at, r.scenario, r.accelerator_model, r.total_accelerators, "
    "r.quality_policy, c.id, c.summary, c.dtype, c.manifest, s.name, s.version, w.id, w.slug, w.name, w.manifest, "
    "src.slug, r.manifest, m.slug ";
const char* kPointJoins =
    "FROM serving_runs r JOIN serving_configurations c ON c.id = r.configuration_id "
    "JOIN serving_stack_revisions s ON s.id = c.stack_revision_id JOIN serving_workloads w ON w.id = r.workload_id "
    "JOIN model_revisions m ON m.id = r.model_revision_id LEFT JOIN sources src ON src.id = r.source_id ";
// Runs that count: not retracted and not superseded by a later revision of their result.
const char* kCurrentRuns = "r.retracted_at IS NULL AND NOT EXISTS (SELECT 1 FROM serving_runs x WHERE x.supersedes_id = r.id)";

// A configuration's label: the export's summary, else its manifest's title or name.
std::string configuration_label(const Row& r) {
  if (!r.is_null(9) && !r.text(9).empty()) return r.text(9);
  const json m = json::parse(r.text(11));
  const json& meta = m.value("metadata", json::object());
  return meta.value("title", meta.value("name", std::string()));
}

Point point_of(const Row& r, const std::map<std::string, std::vector<json>>& measurements) {
  Point p;
  p.configuration_id = r.text(8);
  p.accelerators = r.is_null(6) ? 0 : static_cast<double>(r.integer(6));
  const json run_manifest = json::parse(r.text(19));
  const json workload_manifest = json::parse(r.text(17));
  p.summary = {{"id", r.text(0)},
               {"runDigest", r.text(1)},
               {"title", run_manifest.value("metadata", json::object()).value("title", r.text(0))},
               {"status", r.text(2)},
               {"observedAt", opt_text(r, 3)},
               {"scenario", opt_text(r, 4)},
               {"gpu", opt_text(r, 5)},
               {"accelerators", r.is_null(6) ? json() : json(r.integer(6))},
               {"qualityPolicy", opt_text(r, 7)},
               {"configurationId", r.text(8)},
               {"configuration", configuration_label(r)},
               {"dtype", opt_text(r, 10)},
               {"stack", r.text(12)},
               {"stackVersion", opt_text(r, 13)},
               {"workloadId", r.text(14)},
               {"workload", r.is_null(16) ? json(r.text(15)) : json(r.text(16))},
               {"workloadSlug", r.text(15)},
               {"source", opt_text(r, 18)},
               {"model", r.text(20)}};
  json measured = json::array();
  if (auto it = measurements.find(r.text(0)); it != measurements.end()) {
    for (const json& m : it->second) {
      measured.push_back(m);
      if (m["metric"] == kThroughputMetric && !p.throughput) p.throughput = m["value"].get<double>();
      const std::string metric = m["metric"];
      if ((metric == "ttft_ms" || metric == "tpot_ms") && m["statistic"] == kLatencyStatistic && m["unit"] == "ms") {
        p.latency_ms[metric] = m["value"].get<double>();
        p.latency_bound[metric] = false;
      }
    }
  }
  // A valid run met its workload's SLO: where it publishes no p99 latency, that bound is what is known of it.
  if (r.text(2) == "valid") {
    for (const auto& slo : workload_manifest.value("spec", json::object()).value("slo", json::array())) {
      const std::string metric = slo.value("metric", "");
      if (slo.value("statistic", "") != kLatencyStatistic || p.latency_ms.count(metric) || !slo["value"].is_number()) continue;
      if (metric != "ttft_ms" && metric != "tpot_ms") continue;
      p.latency_ms[metric] = slo["value"].get<double>();
      p.latency_bound[metric] = true;
    }
  }
  p.summary["measurements"] = std::move(measured);
  p.summary["outputTokensPerSecond"] = p.throughput ? json(*p.throughput) : json();
  p.summary["outputTokensPerSecondPerAccelerator"] = p.per_accelerator() ? json(*p.per_accelerator()) : json();
  json latency = json::object();
  for (const auto& [metric, ms] : p.latency_ms)
    latency[metric] = {{"statistic", kLatencyStatistic}, {"ms", ms}, {"bound", p.latency_bound.at(metric)}};
  p.summary["latency"] = std::move(latency);
  return p;
}

// The current runs of a model on the GPUs `gpu` names: the accelerator model spelled exactly (any case), else every
// one containing it; every GPU when empty. `gpus` receives the accelerator models matched.
std::vector<Point> points(Store& store, const ModelRow& model, const std::string& gpu, std::set<std::string>& gpus) {
  std::map<std::string, std::vector<json>> measurements;
  for (const auto& m : store.db().query(
           "SELECT sm.run_id, sm.metric, sm.statistic, sm.unit, sm.value, sm.sample_count FROM serving_measurements sm "
           "JOIN serving_runs r ON r.id = sm.run_id WHERE r.model_revision_id = ? ORDER BY sm.run_id, sm.metric, sm.statistic",
           {model.id})) {
    measurements[m.text(0)].push_back({{"metric", m.text(1)}, {"statistic", m.text(2)}, {"unit", m.text(3)},
                                       {"value", m.real(4)}, {"sampleCount", opt(m, 5)}});
  }
  const auto rows = store.db().query(std::string("SELECT ") + kPointColumns + kPointJoins + "WHERE r.model_revision_id = ? AND " +
                                         kCurrentRuns + " ORDER BY r.accelerator_model, r.observed_at, r.id",
                                     {model.id});
  const std::string wanted = lowercase(gpu);
  bool exact = false;
  for (const auto& r : rows) exact = exact || (!r.is_null(5) && lowercase(r.text(5)) == wanted);
  std::vector<Point> out;
  for (const auto& r : rows) {
    const std::string name = r.is_null(5) ? "" : r.text(5);
    const bool match = wanted.empty() || (exact ? lowercase(name) == wanted : lowercase(name).find(wanted) != std::string::npos);
    if (!match) continue;
    gpus.insert(name);
    out.push_back(point_of(r, measurements));
  }
  return out;
}

std::string latency_metric_of(const std::string& latency) {
  if (latency.empty() || latency == "ttft" || latency == "ttft_ms") return "ttft_ms";
  if (latency == "tpot" || latency == "tpot_ms") return "tpot_ms";
  throw Error("serving", "latency", latency, "expected ttft or tpot (p99 time to first token or per output token)");
}

// The points no other point of `subset` beats on both axes (lower latency and higher per-accelerator throughput),
// fastest first.
std::vector<const Point*> pareto_front(std::vector<const Point*> subset, const std::string& metric) {
  std::sort(subset.begin(), subset.end(), [&](const Point* a, const Point* b) {
    const double la = a->latency_ms.at(metric), lb = b->latency_ms.at(metric);
    if (la != lb) return la < lb;
    return *a->per_accelerator() > *b->per_accelerator();
  });
  std::vector<const Point*> front;
  for (const Point* p : subset) {
    if (front.empty() || *p->per_accelerator() > *front.back()->per_accelerator()) front.push_back(p);
  }
  return front;
}

json ids(const std::vector<const Point*>& ps) {
  json out = json::array();
  for (const Point* p : ps) out.push_back(p->summary["id"]);
  return out;
}

}  // namespace

json serving_overview(Store& store) {
  json pairs = json::array();
  for (const auto& r : store.db().query(
           std::string("SELECT m.slug, m.name, r.accelerator_model, COUNT(*), COUNT(DISTINCT r.configuration_id), "
                       "COUNT(DISTINCT r.workload_id) FROM serving_runs r JOIN model_revisions m ON m.id = r.model_revision_id "
                       "WHERE ") + kCurrentRuns + " GROUP BY m.slug, m.name, r.accelerator_model ORDER BY m.slug, r.accelerator_model")) {
    pairs.push_back({{"model", r.text(0)}, {"modelName", opt_text(r, 1)}, {"gpu", opt_text(r, 2)}, {"runs", r.integer(3)},
                     {"configurations", r.integer(4)}, {"workloads", r.integer(5)}});
  }
  json counts = json::object();
  for (const char* table : {"model_revisions", "serving_stack_revisions", "serving_configurations", "serving_workloads",
                            "serving_runs", "serving_measurements"})
    counts[table] = store.db().query(std::string("SELECT COUNT(*) FROM ") + table)[0].integer(0);
  return {{"counts", counts}, {"modelsAndGpus", pairs}};
}

json serving_view(Store& store, const std::string& model_key, const std::string& gpu, const std::string& latency) {
  const ModelRow model = find_model(store, model_key);
  const std::string metric = latency_metric_of(latency);
  std::set<std::string> gpus;
  const std::vector<Point> ps = points(store, model, gpu, gpus);
  if (ps.empty() && !gpu.empty()) throw Error("serving", "gpu", gpu, "no serving run of " + model.slug + " on such a GPU");
  std::map<std::string, std::vector<const Point*>> by_configuration;
  std::vector<const Point*> plotted;
  json points_json = json::array(), without = json::array();
  for (const Point& p : ps) {
    const bool on_plot = p.throughput && p.latency_ms.count(metric) && p.summary["status"] == "valid";
    (on_plot ? points_json : without).push_back(p.summary);
    if (!on_plot) continue;
    plotted.push_back(&p);
    by_configuration[p.configuration_id].push_back(&p);
  }
  json configurations = json::array();
  for (const auto& [id, members] : by_configuration) {
    const json& first = members.front()->summary;
    configurations.push_back({{"id", id}, {"configuration", first["configuration"]}, {"stack", first["stack"]},
                              {"dtype", first["dtype"]}, {"runs", members.size()}, {"front", ids(pareto_front(members, metric))}});
  }
  return {{"model", model.to_json()},
          {"gpu", gpu},
          {"gpus", gpus},
          {"latencyMetric", metric},
          {"latencyStatistic", kLatencyStatistic},
          {"throughputMetric", kThroughputMetric},
          {"plotted", "output tokens/s per accelerator (the system's throughput over its accelerators) against the p99 " +
                          std::string(metric == "ttft_ms" ? "time to first token" : "time per output token") +
                          "; a run without a published p99 latency is placed at its workload's SLO, which a valid run met"},
          {"configurations", configurations},
          {"front", ids(pareto_front(plotted, metric))},
          {"points", points_json},
          {"notPlotted", without}};
}

json serving_run_view(Store& store, const std::string& key) {
  const std::string id = find_id(store, "serving_runs", "run_digest", key, "serving run");
  const auto model_rows = store.db().query(
      "SELECT m.id, m.slug, m.name, m.model_digest, r.manifest, c.manifest, s.manifest, w.manifest, r.cohort_key, "
      "r.protocol_key, r.metric_set_key, r.published_at, r.retracted_at, r.retraction_reason, r.supersedes_id "
      "FROM serving_runs r JOIN model_revisions m ON m.id = r.model_revision_id "
      "JOIN serving_configurations c ON c.id = r.configuration_id JOIN serving_stack_revisions s ON s.id = c.stack_revision_id "
      "JOIN serving_workloads w ON w.id = r.workload_id WHERE r.id = ?",
      {id});
  const Row& m = model_rows.at(0);
  const ModelRow model{m.text(0), m.text(1), m.text(2), m.text(3)};
  std::map<std::string, std::vector<json>> measurements;
  for (const auto& x : store.db().query(
           "SELECT run_id, metric, statistic, unit, value, sample_count FROM serving_measurements WHERE run_id = ? "
           "ORDER BY metric, statistic",
           {id}))
    measurements[x.text(0)].push_back({{"metric", x.text(1)}, {"statistic", x.text(2)}, {"unit", x.text(3)},
                                       {"value", x.real(4)}, {"sampleCount", opt(x, 5)}});
  const auto rows = store.db().query(std::string("SELECT ") + kPointColumns + kPointJoins + "WHERE r.id = ?", {id});
  json run = point_of(rows.at(0), measurements).summary;
  run["cohortKey"] = opt_text(m, 8);
  run["protocolKey"] = opt_text(m, 9);
  run["metricSetKey"] = opt_text(m, 10);
  run["publishedAt"] = opt_text(m, 11);
  run["retractedAt"] = opt_text(m, 12);
  run["retractionReason"] = opt_text(m, 13);
  run["supersedesId"] = opt_text(m, 14);
  return {{"run", run},
          {"model", model.to_json()},
          {"manifests",
           {{"run", json::parse(m.text(4))},
            {"configuration", json::parse(m.text(5))},
            {"stack", json::parse(m.text(6))},
            {"workload", json::parse(m.text(7))}}}};
}

json resolve_serving(Store& store, const ServingResolveQuery& q) {
  const ModelRow model = find_model(store, q.model);
  std::set<std::string> gpus;
  const std::vector<Point> ps = points(store, model, q.gpu, gpus);
  json slo = json::array();
  for (const auto& [metric, limit] : q.slo_ms) {
    latency_metric_of(metric);  // names a metric it does not know
    if (!(limit > 0)) throw Error("serving", metric, std::to_string(limit), "an SLO limit must be a positive number of ms");
    const bool strict = q.strict.count(metric) > 0;
    slo.push_back({{"metric", latency_metric_of(metric)}, {"statistic", kLatencyStatistic}, {"operator", strict ? "<" : "<="},
                   {"ms", limit}});
  }
  if (q.max_accelerators < 0) throw Error("serving", "countMaximum", std::to_string(q.max_accelerators), "expected a positive count");
  std::vector<const Point*> meeting;
  int64_t invalid = 0, no_throughput = 0, no_latency = 0, over = 0;
  int64_t other = 0;  // another workload, or more accelerators than allowed
  for (const Point& p : ps) {
    if ((!q.workload.empty() && p.summary["workloadSlug"] != q.workload && p.summary["workloadId"] != q.workload) ||
        (q.max_accelerators > 0 && p.accelerators > static_cast<double>(q.max_accelerators))) {
      ++other;
      continue;
    }
    if (p.summary["status"] != "valid") {
      ++invalid;
      continue;
    }
    if (!p.throughput) {
      ++no_throughput;
      continue;
    }
    bool known = true, within = true;
    for (const auto& s : slo) {
      auto it = p.latency_ms.find(s["metric"].get<std::string>());
      if (it == p.latency_ms.end()) {
        known = false;
      } else if (it->second > s["ms"].get<double>() || (s["operator"] == "<" && it->second == s["ms"].get<double>())) {
        within = false;
      }
    }
    if (!known) {
      ++no_latency;
    } else if (!within) {
      ++over;
    } else {
      meeting.push_back(&p);
    }
  }
  // Highest throughput per accelerator (systems differ in size), then the whole system's, then the earliest run.
  std::sort(meeting.begin(), meeting.end(), [](const Point* a, const Point* b) {
    if (*a->per_accelerator() != *b->per_accelerator()) return *a->per_accelerator() > *b->per_accelerator();
    if (*a->throughput != *b->throughput) return *a->throughput > *b->throughput;
    return a->summary["observedAt"].dump() < b->summary["observedAt"].dump();
  });
  // One entry per configuration: its best run.
  json answers = json::array();
  std::set<std::string> seen;
  for (const Point* p : meeting) {
    if (!seen.insert(p->configuration_id).second) continue;
    if (answers.size() >= static_cast<size_t>(q.limit)) break;
    answers.push_back(p->summary);
  }
  return {{"model", model.to_json()},
          {"gpu", q.gpu},
          {"gpus", gpus},
          {"workload", q.workload},
          {"slo", slo},
          {"rankedBy", "output tokens/s per accelerator, then the system's output tokens/s"},
          {"best", answers.empty() ? json() : answers[0]},
          {"configurations", answers},
          {"considered", ps.size()},
          {"excluded",
           {{"otherWorkloadOrTopology", other}, {"notValid", invalid}, {"noThroughput", no_throughput},
            {"noLatencyForTheSlo", no_latency}, {"overTheSlo", over}}}};
}

}  // namespace kindex::store
