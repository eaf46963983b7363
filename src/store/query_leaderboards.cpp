// Leaderboards: per implementation across an operation's workloads.
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

// KernelIndex measures speedups only against an implementation whose role is baseline: its manifest's label
// `role: baseline`, or an author named "baseline" (how FlashInfer-Bench marks its baseline solutions, kept by
// KernelIndex in metadata.authors).
bool has_baseline_role(const json& manifest, const json& authors) {
  const json& labels = member_or_empty(member_or_empty(manifest, "metadata"), "labels");
  if (labels.value("role", json()) == "baseline") return true;
  for (const auto& a : authors)
    if (a == "baseline") return true;
  return false;
}

}  // namespace

json leaderboard(Store& store, const LeaderboardQuery& q) {
  OperationRow op = find_operation(store, q.operation);
  struct Entry {
    std::string id, slug, title;
    json project, authors = json::array();
    bool shown = true;
    bool baseline_role = false;
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
    en.baseline_role = has_baseline_role(m, en.authors);
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
  // The baseline: asked for by id, id prefix or slug; else, among the implementations whose role is baseline, the
  // one with passed runs in the most cohorts; none (and no speedups) when no implementation has that role.
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
      if (en.baseline_role && !en.best_per_cohort.empty() &&
          (!baseline || en.best_per_cohort.size() > baseline->best_per_cohort.size()))
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
                    {"baseline", baseline == &en}, {"baselineRole", en.baseline_role}, {"runs", en.runs}, {"passed", en.passed},
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
                                       {"chosenBy", q.baseline.empty() ? "baseline role" : "asked"}}
                                : json()},
          {"entries", std::move(rows)}};
}

}  // namespace kindex::store
