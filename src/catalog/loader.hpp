#pragma once
// Loaders for the FlashInfer-Bench (definition JSON + workload JSONL) and SOL-ExecBench (definition.json +
// workload.jsonl) formats, from text, files and dataset directories. Everything is validated strictly; bad
// input throws kindex::Error(where = file, field = path inside it, value, problem).
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "catalog/definition.hpp"
#include "core/error.hpp"

namespace kindex::catalog {

// A definition with the workloads that go with it.
struct Problem {
  Definition definition;
  std::vector<Workload> workloads;
};

// Parses a definition. The source is detected from the content ("op_type" present: FlashInfer-Bench, else
// SOL-ExecBench) unless given. `where` names the text in errors (a path, or "builtin:<path>").
Definition parse_definition(std::string_view json_text, const std::string& where,
                            std::optional<Source> source = std::nullopt);
Definition load_definition(const std::filesystem::path& file, std::optional<Source> source = std::nullopt);

// Parses one workload line: a FlashInfer-Bench trace line {"definition", "workload": {...}, ...} or a bare
// workload object {"uuid", "axes", "inputs", "tolerance"?}. line_no (1-based) prefixes fields in errors
// ("line 3: workload.axes.batch_size"). Axis-only constraints (e.g. len_indptr == batch_size + 1) are checked.
Workload parse_workload_line(std::string_view line, const Definition& def, const std::string& where, int line_no,
                             const std::string& base_dir = "");
// All non-blank lines of a JSONL text.
std::vector<Workload> parse_workloads(std::string_view jsonl_text, const Definition& def, const std::string& where,
                                      const std::string& base_dir = "");
// base_dir defaults to the file's directory.
std::vector<Workload> load_workloads(const std::filesystem::path& file, const Definition& def,
                                     std::optional<std::filesystem::path> base_dir = std::nullopt);

// A dataset directory, in any of these layouts (searched recursively, 8 levels at most):
//  - FlashInfer-Bench: <root>/definitions/<op_type>/<name>.json and <root>/workloads/<op_type>/<name>.jsonl
//    (safetensors paths resolve against <root>);
//  - SOL-ExecBench: a folder holding definition.json and workload.jsonl.
// Without `errors`, the first bad file throws; with it, bad files are skipped and their errors appended.
std::vector<Problem> load_dataset(const std::filesystem::path& dir, std::vector<Error>* errors = nullptr);

// A definition file with its workloads: the given JSONL, else the one the layout implies (SOL:
// workload.jsonl beside definition.json; FIB: ../../workloads/<op_type>/<name>.jsonl), else none.
Problem load_problem(const std::filesystem::path& definition_file,
                     std::optional<std::filesystem::path> workloads_file = std::nullopt);

// Every axis of the definition given the workload's variable axes: constants, the variables, and the
// expressions evaluated. Throws kindex::Error (where, "axes.<name>") on a missing or non-positive value.
std::map<std::string, int64_t> resolve_axes(const Definition& def, const std::map<std::string, int64_t>& variables,
                                            const std::string& where = "");
inline std::map<std::string, int64_t> resolve_axes(const Definition& def, const Workload& w) {
  return resolve_axes(def, w.axes, w.definition + "/" + w.uuid);
}
// The concrete shape of a tensor input or output ({} for a scalar).
std::vector<int64_t> concrete_shape(const TensorSpec& spec, const std::map<std::string, int64_t>& axes);

}  // namespace kindex::catalog
