#include "store/feed.hpp"

#include <algorithm>
#include <cctype>

#include "core/error.hpp"
#include "evidence/manifest.hpp"
#include "store/query_internal.hpp"

namespace kindex::store {

using nlohmann::json;
using namespace query_internal;

namespace {

const char* kKinds[] = {"operation", "cohort", "gpu", "model", "project"};

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A LIKE pattern matching `text` anywhere, its wildcards escaped (ESCAPE '\').
std::string containing(const std::string& text) {
  std::string out = "%";
  for (char c : text) {
    if (c == '%' || c == '_' || c == '\\') out += '\\';
    out += c;
  }
  return out + "%";
}

// The SQL condition under which a row matches one of `follows`, over the cohort column, the operation alias and the
// run and implementation aliases (a record event has two of each: its new holder and the one before); its
// parameters are appended to `params`.
std::string matching(const std::vector<Follow>& follows, const std::string& cohort, const std::string& op,
                     const std::vector<std::pair<std::string, std::string>>& runs, std::vector<Value>& params) {
  std::string any;
  for (const auto& f : follows) {
    std::string one;
    if (f.kind == "operation") {
      one = op + ".id = ?";
      params.push_back(f.target);
    } else if (f.kind == "cohort") {
      one = cohort + " = ?";
      params.push_back(f.target);
    } else if (f.kind == "model") {
      one = op + ".tags LIKE ? ESCAPE '\\'";
      params.push_back(containing("\"model:" + f.target + "\""));
    } else if (f.kind == "gpu") {
      for (const auto& [run, impl] : runs) {
        one += (one.empty() ? "" : " OR ") + ("LOWER(" + run + ".hardware_model) LIKE ? ESCAPE '\\'");
        params.push_back(containing(f.target));
      }
    } else {  // project: of any of the row's implementations
      for (const auto& [run, impl] : runs) {
        one += (one.empty() ? "" : " OR ") + impl + ".project_id = ?";
        params.push_back(f.target);
      }
    }
    any += (any.empty() ? "(" : " OR (") + one + ")";
  }
  return any.empty() ? "1 = 0" : any;
}

// An instant as the feed orders and prints it (UTC, milliseconds); text that is no date-time stays as it is.
std::string instant(const std::string& text) {
  try {
    return evidence::utc_instant(text, "feed", "at");
  } catch (const Error&) {
    return text;
  }
}

json side(const Row& r, size_t at) {
  if (r.is_null(at)) return json();
  return {{"id", r.text(at)},
          {"implementation", opt_text(r, at + 1)},
          {"latencyNs", opt(r, at + 2)},
          {"statistic", opt_text(r, at + 3)},
          {"gpu", opt_text(r, at + 4)}};
}

json ratio_of(const json& run, const json& previous) {
  if (!run.is_object() || !previous.is_object() || !run["latencyNs"].is_number() ||
      !previous["latencyNs"].is_number() || previous["latencyNs"].get<double>() <= 0)
    return json();
  return run["latencyNs"].get<double>() / previous["latencyNs"].get<double>();
}

}  // namespace

json Follow::to_json() const { return {{"kind", kind}, {"target", target}, {"label", label}}; }

Follow resolve_follow(Store& store, const std::string& kind, const std::string& what) {
  if (std::find(std::begin(kKinds), std::end(kKinds), kind) == std::end(kKinds))
    throw Error("follow", "kind", kind, "must be operation, cohort, gpu, model or project");
  if (what.empty() || what.size() > 300) throw Error("follow", kind, what.substr(0, 40), "give a name of 1 to 300 characters");
  if (kind == "operation") return {kind, find_operation(store, what).id, what};
  if (kind == "cohort") {
    if (store.db().query("SELECT 1 FROM benchmark_runs WHERE comparison_key = ? UNION SELECT 1 FROM record_events "
                         "WHERE comparison_key = ?",
                         {what, what})
            .empty())
      throw Error("follow", "cohort", what, "no such cohort: give a comparisonKey of this store (kindex records --json)");
    return {kind, what, what};
  }
  if (kind == "project") {
    auto rows = store.db().query("SELECT id FROM projects WHERE slug = ? OR id = ?", {what, what});
    if (rows.empty()) throw Error("follow", "project", what, "no such project in this store");
    return {kind, rows[0].text(0), what};
  }
  // A GPU or a model may be followed before the store has any run of it.
  std::string target = lower(what);
  if (kind == "model" && target.rfind("model:", 0) == 0) target = target.substr(6);
  return {kind, target, what};
}

bool add_follow(Store& store, const Follow& f) {
  return store.db().execute("INSERT INTO follows (kind, target, label, created_at) VALUES (?, ?, ?, ?) "
                            "ON CONFLICT DO NOTHING",
                            {f.kind, f.target, f.label, evidence::utc_timestamp_now()}) > 0;
}

bool remove_follow(Store& store, const std::string& kind, const std::string& what) {
  // What the follow was made from, resolved the same way, or (its operation or project gone) the text it was given.
  std::string target;
  try {
    target = resolve_follow(store, kind, what).target;
  } catch (const Error&) {
    if (std::find(std::begin(kKinds), std::end(kKinds), kind) == std::end(kKinds)) throw;
    target = what;
  }
  return store.db().execute("DELETE FROM follows WHERE kind = ? AND (target = ? OR label = ?)", {kind, target, what}) > 0;
}

std::vector<Follow> follows(Store& store) {
  std::vector<Follow> out;
  for (const auto& r : store.db().query("SELECT kind, target, label FROM follows ORDER BY kind, label, target"))
    out.push_back({r.text(0), r.text(1), r.text(2)});
  return out;
}

json feed(Store& store, const FeedQuery& q) {
  const std::vector<Follow> followed = q.only ? std::vector<Follow>{*q.only} : follows(store);
  std::string since;
  if (!q.since.empty()) {
    const bool date_only = q.since.size() == 10 && q.since[4] == '-' && q.since[7] == '-';
    since = evidence::utc_instant(date_only ? q.since + "T00:00:00Z" : q.since, "feed", "--since");
  }
  json events = json::array();
  auto keep = [&](json event) {
    if (!since.empty() && event["at"].get<std::string>() < since) return;
    events.push_back(std::move(event));
  };

  // Runs, and reruns with the run they re-measured.
  std::vector<Value> params;
  const std::string runs_where = matching(followed, "r.comparison_key", "o", {{"r", "i"}}, params);
  for (const auto& r : store.db().query(
           "SELECT r.id, COALESCE(i.title, i.slug), r.primary_value, r.primary_statistic, r.hardware_model, "
           "x.id, COALESCE(xi.title, xi.slug), x.primary_value, x.primary_statistic, x.hardware_model, "
           "COALESCE(r.published_at, r.observed_at), r.comparison_key, o.slug, o.name, p.reproduces_run_digest "
           "FROM benchmark_runs r JOIN implementations i ON i.id = r.implementation_id "
           "JOIN workloads w ON w.id = r.workload_id JOIN operations o ON o.id = w.operation_id "
           "LEFT JOIN run_reruns p ON p.run_id = r.id LEFT JOIN benchmark_runs x ON x.run_digest = p.reproduces_run_digest "
           "LEFT JOIN implementations xi ON xi.id = x.implementation_id WHERE " + runs_where,
           params)) {
    const json run = side(r, 0), original = side(r, 5);
    const bool rerun = !r.is_null(14);
    const json ratio = ratio_of(run, original);
    keep({{"id", "run:" + r.text(0)}, {"kind", rerun ? "rerun" : "new_run"}, {"at", instant(r.text(10))},
          {"operation", {{"slug", r.text(12)}, {"name", r.text(13)}}}, {"cohort", r.text(11)},
          {"gpu", run["gpu"]}, {"run", run}, {"previous", original}, {"ratio", ratio}, {"cause", json()},
          {"originalRunDigest", opt_text(r, 14)},
          {"href", "/runs/" + r.text(0)}});
  }

  // Record events: the first of a cohort is a new record; a later one moves the record from its old holder.
  params.clear();
  const std::string events_where = matching(followed, "e.comparison_key", "o", {{"n", "ni"}, {"v", "vi"}}, params);
  for (const auto& r : store.db().query(
           "SELECT n.id, COALESCE(ni.title, ni.slug), n.primary_value, n.primary_statistic, n.hardware_model, "
           "v.id, COALESCE(vi.title, vi.slug), v.primary_value, v.primary_statistic, v.hardware_model, "
           "e.at, e.comparison_key, o.slug, o.name, e.id, e.cause "
           "FROM record_events e LEFT JOIN benchmark_runs n ON n.id = e.run_id "
           "LEFT JOIN implementations ni ON ni.id = n.implementation_id "
           "LEFT JOIN benchmark_runs v ON v.id = e.previous_run_id "
           "LEFT JOIN implementations vi ON vi.id = v.implementation_id "
           "LEFT JOIN workloads w ON w.id = COALESCE(n.workload_id, v.workload_id) "
           "LEFT JOIN operations o ON o.id = w.operation_id WHERE " + events_where,
           params)) {
    const json holder = side(r, 0), previous = side(r, 5);
    const bool first = previous.is_null();
    const json ratio = ratio_of(holder, previous);
    const std::string cause = r.text(15);
    keep({{"id", "record:" + r.text(14)}, {"kind", first ? "new_record" : "record_change"}, {"at", instant(r.text(10))},
          {"operation", {{"slug", opt_text(r, 12)}, {"name", opt_text(r, 13)}}},
          {"cohort", r.text(11)}, {"gpu", holder.is_object() ? holder["gpu"] : previous.value("gpu", json())},
          {"run", holder}, {"previous", previous}, {"ratio", ratio}, {"cause", cause},
          {"href", holder.is_object() ? "/runs/" + holder["id"].get<std::string>()
                                      : "/records?operation=" + opt_text(r, 12).get<std::string>()}});
  }
  std::sort(events.begin(), events.end(), [](const json& a, const json& b) {
    const auto& x = a["at"].get_ref<const std::string&>();
    const auto& y = b["at"].get_ref<const std::string&>();
    return x != y ? x > y : a["id"].get_ref<const std::string&>() > b["id"].get_ref<const std::string&>();
  });
  if (events.size() > q.limit) events.erase(events.begin() + static_cast<std::ptrdiff_t>(q.limit), events.end());
  json list = json::array();
  for (const auto& f : followed) list.push_back(f.to_json());
  return {{"since", since.empty() ? json() : json(since)}, {"follows", list}, {"events", events}};
}

}  // namespace kindex::store
