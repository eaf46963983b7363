// Listings across the whole store (the MCP server's list_* tools): runs with filters, recent record changes, the
// GPUs measured and the models covered.
#include "store/query.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include "core/error.hpp"
#include "evidence/manifest.hpp"
#include "store/query_internal.hpp"

namespace kindex::store {

using nlohmann::json;
using namespace query_internal;

namespace {

// An ISO-8601 instant as the store keeps them (UTC, milliseconds): an Error naming `field` if it is not one.
std::string instant(const std::string& text, const std::string& field) {
  return evidence::utc_instant(text, "index", field);
}

// A cursor is the offset of the next page, as text ("" is the first page).
int64_t offset_of(const std::string& cursor) {
  if (cursor.empty()) return 0;
  if (cursor.size() > 12 || cursor.find_first_not_of("0123456789") != std::string::npos)
    throw Error("index", "cursor", cursor, "not a cursor this index gave (expected the nextCursor of a previous page)");
  return std::stoll(cursor);
}

}  // namespace

json list_runs(Store& store, const RunsQuery& q) {
  if (q.limit < 1 || q.limit > 200) throw Error("index", "limit", std::to_string(q.limit), "expected 1 to 200");
  // KernelIndex's run statuses (its /runs filter takes these), and kindex's own "invalid".
  static const std::set<std::string> statuses = {
      "passed",           "incorrect_shape",    "incorrect_dtype",       "incorrect_numerical",  "compile_error",
      "runtime_error",    "timeout",            "resource_exceeded",     "invalid_reference",    "policy_violation",
      "suspected_reward_hack", "incomplete_evidence", "revoked",         "invalid"};
  std::string where = "WHERE 1 = 1";
  std::vector<Value> params;
  if (!q.operation.empty()) {
    where += " AND w.operation_id = ?";
    params.emplace_back(find_operation(store, q.operation).id);
  }
  if (!q.hardware.empty()) {
    where += " AND LOWER(r.hardware_model) LIKE ?";
    params.emplace_back("%" + lowercase(q.hardware) + "%");
  }
  if (!q.source.empty()) {
    where += " AND s.slug = ?";
    params.emplace_back(q.source);
  }
  if (!q.status.empty()) {
    if (!statuses.count(q.status)) {
      std::string known;
      for (const auto& s : statuses) known += (known.empty() ? "" : ", ") + s;
      throw Error("index", "status", q.status, "unknown run status (known: " + known + ")");
    }
    where += " AND r.status = ?";
    params.emplace_back(q.status);
  }
  if (!q.since.empty()) {
    where += " AND r.observed_at >= ?";
    params.emplace_back(instant(q.since, "since"));
  }
  const int64_t offset = offset_of(q.cursor);
  params.emplace_back(static_cast<int64_t>(q.limit + 1));
  params.emplace_back(offset);
  json runs = json::array();
  // Each run as every view lists it, with the members of KernelIndex's /runs entries beside: digest, operation (its
  // slug), hardware, primary {metric, unit, statistic, value, sampleCount, uncertainty}, sourceAvailable.
  const std::size_t extra = 35;  // the columns after kRunColumns
  for (const auto& r : store.db().query(std::string("SELECT ") + kRunColumns + ", o.slug, r.primary_metric, r.primary_unit " +
                                            kRunJoins + "JOIN workloads w ON w.id = r.workload_id "
                                            "JOIN operations o ON o.id = w.operation_id " + where +
                                            " ORDER BY r.observed_at DESC, r.id LIMIT ? OFFSET ?",
                                        params)) {
    json run = run_summary(r);
    run["digest"] = run["runDigest"];
    run["operation"] = r.text(extra);
    run["hardware"] = run["gpu"];
    run["sourceAvailable"] = r.integer(18) != 0;
    run["primary"] = r.is_null(12) ? json()
                                   : json{{"metric", opt_text(r, extra + 1)}, {"unit", opt_text(r, extra + 2)},
                                          {"statistic", run["statistic"]}, {"value", r.real(12)},
                                          {"sampleCount", run["sampleCount"]},
                                          {"uncertainty", r.is_null(14) ? json() : json{{"low", r.real(14)}, {"high", r.real(15)}}}};
    runs.push_back(std::move(run));
  }
  const bool more = runs.size() > static_cast<size_t>(q.limit);
  if (more) runs.erase(runs.end() - 1);
  return {{"runs", runs}, {"nextCursor", more ? json(std::to_string(offset + q.limit)) : json()}};
}

json list_changes(Store& store, const std::string& since) {
  // The trailing 30 days unless told otherwise.
  std::string from = since;
  if (from.empty()) {
    const auto days = std::chrono::floor<std::chrono::days>(std::chrono::system_clock::now()) - std::chrono::days(30);
    const std::chrono::year_month_day d{days};
    char buf[32];
    std::snprintf(buf, sizeof buf, "%04d-%02u-%02uT00:00:00.000Z", static_cast<int>(d.year()), static_cast<unsigned>(d.month()),
                  static_cast<unsigned>(d.day()));
    from = buf;
  } else {
    from = instant(since, "since");
  }
  // Each record change as KernelIndex's feed gives it: a new record holder is a "record" entry (its value, the
  // holder it displaced and the improvement), a retraction or supersession a "correction" (action: which); both with
  // `match` (what a follow matches: cohort, operation, projects, GPU, models). kindex keeps comparisonKey and
  // previousRunId beside.
  std::map<std::string, json, std::greater<>> days;
  auto value_of = [](const Row& e, std::size_t i) {  // value, metric, unit, statistic, sample count, low, high
    if (e.is_null(i)) return json();
    return json{{"metric", opt_text(e, i + 1)}, {"unit", opt_text(e, i + 2)}, {"statistic", opt_text(e, i + 3)},
                {"value", e.real(i)}, {"sampleCount", e.is_null(i + 4) ? json() : json(e.integer(i + 4))},
                {"uncertainty", e.is_null(i + 5) || e.is_null(i + 6) ? json() : json{{"low", e.real(i + 5)}, {"high", e.real(i + 6)}}}};
  };
  auto named = [](const Row& e, std::size_t name, std::size_t slug) {
    return e.is_null(slug) ? json() : json{{"name", e.is_null(name) ? e.text(slug) : e.text(name)}, {"slug", e.text(slug)}};
  };
  for (const auto& e : store.db().query(
           "SELECT e.at, e.cause, e.run_id, e.previous_run_id, e.comparison_key, "
           "r.primary_value, r.primary_metric, r.primary_unit, r.primary_statistic, r.sample_count, r.uncertainty_low, "
           "r.uncertainty_high, i.title, i.slug, p.name, p.slug, o.name, o.slug, o.tags, w.id, w.shape_summary, r.hardware_model, "
           "q.primary_value, q.primary_metric, q.primary_unit, q.primary_statistic, q.sample_count, q.uncertainty_low, "
           "q.uncertainty_high, qi.title, qi.slug "
           "FROM record_events e LEFT JOIN benchmark_runs r ON r.id = e.run_id "
           "LEFT JOIN implementations i ON i.id = r.implementation_id LEFT JOIN projects p ON p.id = i.project_id "
           "LEFT JOIN workloads w ON w.id = r.workload_id LEFT JOIN operations o ON o.id = w.operation_id "
           "LEFT JOIN benchmark_runs q ON q.id = e.previous_run_id LEFT JOIN implementations qi ON qi.id = q.implementation_id "
           "WHERE e.at > ? ORDER BY e.at DESC, e.id",
           {from})) {
    const std::string at = e.text(0);
    const std::string cause = e.text(1);
    json models = json::array();
    const json tags = e.is_null(18) ? json() : json::parse(e.text(18), nullptr, false);
    if (tags.is_array())
      for (const auto& t : tags)
        if (t.is_string() && t.get_ref<const std::string&>().rfind("model:", 0) == 0) models.push_back(t.get<std::string>().substr(6));
    json entry = {{"at", at},
                  {"match", {{"cohort", e.text(4)}, {"operation", opt_text(e, 17)},
                             {"projects", e.is_null(15) ? json::array() : json::array({e.text(15)})},
                             {"gpu", opt_text(e, 21)}, {"models", models}}},
                  {"runId", opt_text(e, 2)},
                  {"operation", named(e, 16, 17)},
                  {"implementation", named(e, 12, 13)},
                  {"comparisonKey", e.text(4)},
                  {"previousRunId", opt_text(e, 3)}};
    if (cause == "new_run") {
      const json value = value_of(e, 5), previous = value_of(e, 22);
      json improvement;
      static const std::set<std::string> times = {"ns", "us", "ms", "s"};  // lower is better: the improvement is the cut
      if (value.is_object() && previous.is_object() && value["unit"] == previous["unit"] && value["unit"].is_string() &&
          times.count(value["unit"].get<std::string>()) && previous["value"].get<double>() > 0)
        improvement = (previous["value"].get<double>() - value["value"].get<double>()) / previous["value"].get<double>() * 100;
      entry.update({{"kind", "record"}, {"workloadId", opt_text(e, 19)}, {"workloadSummary", opt_text(e, 20)},
                    {"hardware", opt_text(e, 21)}, {"project", named(e, 14, 15)}, {"value", value},
                    {"previous", previous.is_null() ? json() : json{{"implementation", named(e, 29, 30)}, {"value", previous}}},
                    {"improvementPct", improvement}, {"cohortKey", e.text(4)}});
    } else {
      entry.update({{"kind", "correction"}, {"action", cause}, {"reason", nullptr}});
    }
    json& day = days[at.substr(0, 10)];
    if (day.is_null()) day = json::array();
    day.push_back(std::move(entry));
  }
  json out = json::array();
  for (auto& [day, entries] : days) out.push_back({{"date", day}, {"entries", std::move(entries)}});
  return {{"since", from}, {"days", out}, {"generatedAt", evidence::utc_timestamp_now()}};
}

// The runs KernelIndex's coverage listings count: a kernel run that passed, published, neither retracted nor
// superseded; a serving run that is valid, published and not retracted.
constexpr const char* kEligibleRun =
    "r.status = 'passed' AND r.published_at IS NOT NULL AND r.retracted_at IS NULL AND NOT EXISTS "
    "(SELECT 1 FROM benchmark_runs n WHERE n.supersedes_id = r.id)";
constexpr const char* kEligibleServingRun = "r.status = 'valid' AND r.published_at IS NOT NULL AND r.retracted_at IS NULL";

// KernelIndex's /hardware answer: per accelerator model, its slug, vendor and architecture, the eligible kernel and
// serving run counts, the distinct operations and operation families measured on it, and the last observation.
json list_hardware(Store& store) {
  std::map<std::string, json> by_gpu;
  auto entry = [&](const std::string& model) -> json& {
    json& g = by_gpu[model];
    if (g.is_null()) {
      std::string slug;
      for (const char c : lowercase(model)) slug += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
      g = {{"slug", slug}, {"model", model}, {"vendor", nullptr}, {"architecture", nullptr}, {"kernelRuns", 0}, {"servingRuns", 0},
           {"operations", 0}, {"families", 0}, {"lastObservedAt", nullptr}};
    }
    return g;
  };
  auto later = [](json& g, const Row& r, size_t i) {
    if (!r.is_null(i) && (g["lastObservedAt"].is_null() || r.text(i) > g["lastObservedAt"].get<std::string>())) g["lastObservedAt"] = r.text(i);
  };
  for (const auto& r : store.db().query(
           "SELECT r.hardware_model, COUNT(*), COUNT(DISTINCT o.id), COUNT(DISTINCT o.family), MAX(r.hardware_vendor), "
           "MAX(r.hardware_architecture), MAX(r.observed_at) FROM benchmark_runs r JOIN workloads w ON w.id = r.workload_id "
           "JOIN operations o ON o.id = w.operation_id WHERE r.hardware_model IS NOT NULL AND " + std::string(kEligibleRun) +
           " GROUP BY r.hardware_model")) {
    json& g = entry(r.text(0));
    g["kernelRuns"] = r.integer(1);
    g["operations"] = r.integer(2);
    g["families"] = r.integer(3);
    g["vendor"] = opt_text(r, 4);
    g["architecture"] = opt_text(r, 5);
    later(g, r, 6);
  }
  for (const auto& r : store.db().query(
           "SELECT r.accelerator_model, COUNT(*), MAX(r.accelerator_vendor), MAX(r.observed_at) FROM serving_runs r "
           "WHERE r.accelerator_model IS NOT NULL AND " + std::string(kEligibleServingRun) + " GROUP BY r.accelerator_model")) {
    json& g = entry(r.text(0));
    g["servingRuns"] = r.integer(1);
    if (g["vendor"].is_null()) g["vendor"] = opt_text(r, 2);
    later(g, r, 3);
  }
  json out = json::array();
  for (auto& [gpu, g] : by_gpu) out.push_back(std::move(g));
  return {{"hardware", out}, {"generatedAt", evidence::utc_timestamp_now()}};
}

// KernelIndex's /models answer: the serving model revisions with their run counts, and kernel-side coverage (the
// operations' "model:<name>" tags, the models a workload was taken from) with operation counts.
json list_models(Store& store) {
  // One entry per model slug (its revisions together), most runs first.
  json serving = json::array();
  for (const auto& r : store.db().query(
           "SELECT m.slug, COALESCE(MAX(m.name), m.slug), MAX(m.parameter_count), COUNT(r.id) AS runs FROM model_revisions m "
           "LEFT JOIN serving_runs r ON r.model_revision_id = m.id AND " + std::string(kEligibleServingRun) +
           " GROUP BY m.slug ORDER BY runs DESC, m.slug"))
    serving.push_back({{"slug", r.text(0)}, {"name", r.text(1)}, {"parameterCount", r.is_null(2) ? json() : json(r.integer(2))},
                       {"runs", r.integer(3)}});
  std::map<std::string, std::set<std::string>> tagged;
  for (const auto& r : store.db().query("SELECT slug, tags FROM operations WHERE tags IS NOT NULL")) {
    const json tags = json::parse(r.text(1), nullptr, false);
    if (!tags.is_array()) continue;
    for (const auto& t : tags)
      if (t.is_string() && t.get_ref<const std::string&>().rfind("model:", 0) == 0)
        tagged[t.get<std::string>().substr(6)].insert(r.text(0));
  }
  json kernel = json::array();
  for (const auto& [model, ops] : tagged) kernel.push_back({{"model", model}, {"operations", ops.size()}});
  std::stable_sort(kernel.begin(), kernel.end(), [](const json& a, const json& b) { return a["operations"] > b["operations"]; });
  return {{"serving", serving}, {"kernel", kernel}, {"generatedAt", evidence::utc_timestamp_now()}};
}

}  // namespace kindex::store
