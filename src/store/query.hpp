#pragma once
// The index's read side: every question the CLI, the JSON API and the HTML pages answer, answered once here as
// JSON (so the three doors cannot disagree). Runs are found by id, 8+ character id prefix or runDigest;
// operations by slug, name or alias.
#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <set>
#include <string>

#include "store/store.hpp"

namespace kindex::store {

// Operations whose name, slug, alias, family or description contains `text` (case-insensitive); all when empty.
nlohmann::json search(Store& store, const std::string& text, int limit = 50);

// The operation page: workloads (with a picker), per-cohort records of the selected workload with rank, latency,
// x of #1, evidence and the headroom-v1 floor; implementations with their best latency; semantics; plot data.
// `workload` selects by workload id, digest or a prefix; empty picks the workload with the most runs.
// eligibleRuns counts the selected workload's ranked runs, eligibleRunsAllWorkloads the operation's.
nlohmann::json operation_view(Store& store, const std::string& operation, const std::string& workload = "");
nlohmann::json workload_view(Store& store, const std::string& workload);
nlohmann::json implementation_view(Store& store, const std::string& implementation);
// The run page: primary measurement, rank in its cohort, identity, correctness, workload, measurements,
// protocol, environment, canonical manifest, citation.
nlohmann::json run_view(Store& store, const std::string& run);

struct ResolveQuery {
  std::string operation;                  // operation or definition name / alias / slug
  std::map<std::string, int64_t> axes;    // axis values (variable and constant axes may be given)
  std::string dtype;                      // optional: a dtype the workload must use
  std::string gpu;                        // optional: substring of the hardware model, e.g. "H200"
};
// Exact workload -> its cohorts' ranked implementations (kindex-verified evidence ahead of reported at equal
// rank); then near matches (other workloads / GPUs of the operation), each with the facets that differ.
nlohmann::json resolve(Store& store, const ResolveQuery& query, int near_limit = 10);

struct LeaderboardQuery {
  std::string operation;  // operation or definition name / alias / slug
  std::string device;     // optional: substring of the hardware model, e.g. "H200" (case-insensitive)
  std::string author;     // optional: substring of an author or project name (case-insensitive)
  std::string baseline;   // optional: the implementation speedups are measured against (id, id prefix or slug)
};
// FlashInfer-Bench's leaderboard for one operation: per implementation across all its workloads, the average
// speedup over the baseline (baseline latency / its latency, averaged over every cohort - workload, GPU,
// protocol, environment - where both have a passed run), the pass rate of its runs, and the distribution of its
// best latency per workload and GPU. The baseline is the one asked for, else the implementation whose role is
// baseline (label role: baseline, or an author named "baseline") with passed runs in the most cohorts; with none,
// no speedup is given (KernelIndex's rule). Filters apply to runs (device) and implementations (author).
nlohmann::json leaderboard(Store& store, const LeaderboardQuery& query);

// Current records and their append-only history, per cohort (optionally of one operation).
nlohmann::json records(Store& store, const std::string& operation = "");
// Two runs side by side with the facets that differ and the latency ratio.
nlohmann::json compare(Store& store, const std::string& run_a, const std::string& run_b);

// Serving evidence (query_serving.cpp). The stored models with the GPUs they were served on (runs,
// configurations, workloads each) and the serving tables' row counts.
nlohmann::json serving_overview(Store& store);
// One model (slug, name, id or a unique part of its slug or name) on the GPUs `gpu` names (the accelerator model
// spelled exactly in any case, else every one containing it; all when empty): each current run (not retracted or
// superseded) with its output tokens/s (whole system and per accelerator) and p99 latency (`latency` "ttft" or
// "tpot"; measured, or else the workload's SLO a valid run met, marked as a bound); the Pareto front of all runs and
// of each configuration's (higher tokens/s per accelerator at lower latency); runs without the latency or the
// throughput listed apart.
nlohmann::json serving_view(Store& store, const std::string& model, const std::string& gpu = "",
                            const std::string& latency = "ttft");
// One serving run by id, 8+ character prefix or runDigest: its facts, measurements and the manifests it names.
nlohmann::json serving_run_view(Store& store, const std::string& run);
struct ServingResolveQuery {
  std::string model;                     // as serving_view
  std::string gpu;                       // as serving_view
  std::map<std::string, double> slo_ms;  // p99 limits: "ttft" / "tpot" (or ttft_ms, tpot_ms) -> ms
  std::set<std::string> strict;          // the slo_ms keys whose limit is "<" (else "<=")
  std::string workload;                  // optional: only runs of this serving workload (slug or id)
  int64_t max_accelerators = 0;          // optional: only systems of at most this many accelerators (0: any)
  int limit = 10;                        // configurations listed
};
// For this model and GPU, the configurations whose valid runs meet the SLO (every limit, by a measured p99 or by
// the workload's SLO bound), best first: highest output tokens/s per accelerator. Each configuration once, with its
// best run; what was left out and why is counted.
nlohmann::json resolve_serving(Store& store, const ServingResolveQuery& query);

// Listings across the store (query_lists.cpp), as KernelIndex's MCP tools give them.
struct RunsQuery {
  std::string operation;  // optional: operation name, slug, alias or id
  std::string hardware;   // optional: part of the GPU's name (case-insensitive)
  std::string source;     // optional: source slug (flashinfer-bench, sol-execbench, ...)
  std::string status;     // optional: run status (passed, incorrect_numerical, ...)
  std::string since;      // optional: observed at or after this ISO-8601 instant
  std::string cursor;     // optional: a previous page's nextCursor
  int limit = 50;         // 1 to 200
};
// Benchmark runs, newest observation first, a page at a time ({runs, nextCursor}: null on the last page).
nlohmann::json list_runs(Store& store, const RunsQuery& query);
// Record events after `since` (default: the trailing 30 days), newest first, grouped by UTC day; a new record is
// a "record_break".
nlohmann::json list_changes(Store& store, const std::string& since = "");
// Per GPU: kernel runs, serving runs and the operation families measured on it (counts, not a ranking).
nlohmann::json list_hardware(Store& store);
// Serving model revisions with their run counts, and the operations' "model:" tags with operation counts.
nlohmann::json list_models(Store& store);

// "num_pages = 425 · batch_size = 1 · ... · bf16" for a workload manifest (variable axes first as stored).
std::string workload_label(const nlohmann::json& workload_manifest);

}  // namespace kindex::store
