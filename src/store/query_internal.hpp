#pragma once
// What the index's read models (query_*.cpp) share, inside the store only: the run row's columns and its JSON
// summary, finding an operation or a row by key, workload axes and labels, protocol summaries and the cached view of
// one cohort. Not part of store/query.hpp's API.
#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "store/db.hpp"
#include "store/store.hpp"

namespace kindex::store::query_internal {

// The columns of a run row as run_summary reads them, and the joins they need.
extern const std::string kRunColumns;
extern const char* kRunJoins;

nlohmann::json opt(const Row& r, size_t i);
// A text cell without copying it (empty for NULL).
const std::string& text_of(const Row& r, size_t i);
nlohmann::json opt_text(const Row& r, size_t i);
// A run row (kRunColumns) as every view lists it.
nlohmann::json run_summary(const Row& r);

struct OperationRow {
  std::string id, slug, family, name, digest;
  nlohmann::json manifest, tags;
};
OperationRow find_operation(Store& store, const std::string& key);
bool id_like(const std::string& key);
std::string lowercase(std::string s);  // ASCII letters folded
// Finds one row id of `table` by full id, digest column or a unique id prefix.
std::string find_id(Store& store, const std::string& table, const std::string& digest_column, const std::string& key,
                    const std::string& what);
std::string format_number(const nlohmann::json& v);
// Axis values of a WorkloadCase, including the operation's constants (for resolving and near matches).
std::map<std::string, int64_t> workload_axes(const nlohmann::json& op, const nlohmann::json& wl);
std::set<std::string> workload_dtypes(const nlohmann::json& wl);
nlohmann::json protocol_summary(Store& store, const std::string& key);
// One cohort, ranked, with its floor and record status; run details for the first `limit` members. Kept until the
// store changes.
nlohmann::json cohort_view(Store& store, const std::string& ck, const nlohmann::json& op, const nlohmann::json& wl,
                           size_t limit = 100);
nlohmann::json workloads_of(Store& store, const OperationRow& op);
nlohmann::json semantics_of(const nlohmann::json& op);

}  // namespace kindex::store::query_internal
