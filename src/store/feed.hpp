#pragma once
// Follows and the feed of what changed for them (`kindex follow`, `kindex feed`, /feed.xml).
//
// A follow names one thing of the index: an operation (its id; given by slug, name or alias), a cohort (its
// comparisonKey), a GPU (text matched case-insensitively within the runs' hardware model, e.g. "H200"), a model
// (the name in an operation's tag "model:NAME", e.g. llama-3-1-8b) or a project (its id; given by slug or id).
// Follows are kept in the store (table follows), one row per (kind, target).
//
// The feed is read from what the store already keeps, newest first: new runs, reruns (a run naming the run it
// re-measured, with the ratio of their latencies), new records (a cohort's first record event) and record changes
// (a later event: the old and the new holder and the ratio of their latencies), each matching at least one follow.
// A run's time is when it entered the index (publishedAt, else observedAt); an event's is its `at`.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "store/store.hpp"

namespace kindex::store {

struct Follow {
  std::string kind;    // operation | cohort | gpu | model | project
  std::string target;  // operation id, comparisonKey, GPU text (lowercase), model name (lowercase), project id
  std::string label;   // what the user gave, as the feed names it
  nlohmann::json to_json() const;
};

// The follow `what` of `kind` names, resolved in this store; kindex::Error naming the kind or the value when the
// kind is unknown or the operation, cohort or project is not in the store.
Follow resolve_follow(Store& store, const std::string& kind, const std::string& what);
// Keeps a follow (idempotent: true when new).
bool add_follow(Store& store, const Follow& follow);
// Removes the follow `what` of `kind` names; true when there was one.
bool remove_follow(Store& store, const std::string& kind, const std::string& what);
std::vector<Follow> follows(Store& store);

struct FeedQuery {
  std::string since;                  // ISO-8601 date-time or date (UTC); empty: everything
  size_t limit = 200;                 // newest first
  std::optional<Follow> only;         // one thing instead of the store's follows
};
// {"since", "follows": [...], "events": [{id, kind: new_run | rerun | new_record | record_change, at,
//  operation {slug, name}, cohort, gpu, run {id, implementation, latencyNs, statistic, gpu}, previous (the old
//  holder, or a rerun's original; null when none), ratio (run over previous latency; null without both), cause
//  (record events), href}]}
nlohmann::json feed(Store& store, const FeedQuery& query);

}  // namespace kindex::store
