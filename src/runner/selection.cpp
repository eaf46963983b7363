// Which (definition, workload) pairs a bench runs: --problem and --workloads.
#include <filesystem>
#include <sstream>
#include <stdexcept>

#include "runner/runner.hpp"
#include "catalog/builtin.hpp"
#include "core/error.hpp"

namespace kindex::runner {


std::vector<catalog::Problem> resolve_problems(const std::string& spec) {
  if (spec.empty()) throw Error("kindex bench", "--problem", spec, "give a bundled problem name or a definition path");
  if (auto def = catalog::find_builtin(spec)) return {catalog::builtin_problem(spec)};
  std::error_code ec;
  std::filesystem::path path(spec);
  if (std::filesystem::is_directory(path, ec)) {
    auto problems = catalog::load_dataset(path);
    if (problems.empty()) throw Error("kindex bench", "--problem", spec, "the directory holds no definitions");
    return problems;
  }
  if (std::filesystem::is_regular_file(path, ec)) return {catalog::load_problem(path)};
  if (auto decode = catalog::parse_decode_name(spec); decode && !decode->is_plain())
    throw Error("kindex bench", "--problem", spec,
                "a decode variant's name: its definition (with its reference) comes from a dataset, e.g. "
                "definitions/decode_variants/definitions/gqa_paged/" + spec + ".json");
  throw Error("kindex bench", "--problem", spec,
              "neither a bundled problem (see `kindex bench --list`) nor a definition file or dataset directory");
}

std::vector<const catalog::Workload*> select_workloads(const catalog::Problem& problem, const std::string& spec) {
  const auto& all = problem.workloads;
  std::vector<const catalog::Workload*> out;
  auto fail = [&](const std::string& part, const std::string& why) -> void {
    throw Error("kindex bench", "--workloads", part,
                why + " (problem " + problem.definition.name + " has " + std::to_string(all.size()) + " workloads)");
  };
  if (spec == "all") {
    for (const auto& w : all) out.push_back(&w);
    return out;
  }
  if (spec == "small") {
    for (const auto& w : all)
      if (catalog::is_small(problem.definition, w)) out.push_back(&w);
    return out;
  }
  std::stringstream ss(spec);
  std::string part;
  std::vector<bool> taken(all.size(), false);
  auto take = [&](size_t i) {
    if (!taken[i]) taken[i] = true, out.push_back(&all[i]);
  };
  while (std::getline(ss, part, ',')) {
    part.erase(0, part.find_first_not_of(' '));
    part.erase(part.find_last_not_of(' ') + 1);
    if (part.empty()) fail(spec, "empty item in the list");
    bool numeric = part.find_first_not_of("0123456789-") == std::string::npos;
    if (numeric) {
      auto dash = part.find('-');
      try {
        size_t lo = std::stoul(part.substr(0, dash));
        size_t hi = dash == std::string::npos ? lo : std::stoul(part.substr(dash + 1));
        if (lo > hi) fail(part, "range runs backwards");
        if (hi >= all.size()) fail(part, "index out of range");
        for (size_t i = lo; i <= hi; ++i) take(i);
      } catch (const std::logic_error&) {
        fail(part, "not an index or range like 0-3");
      }
      continue;
    }
    size_t match = all.size(), matches = 0;
    for (size_t i = 0; i < all.size(); ++i)
      if (all[i].uuid.rfind(part, 0) == 0) match = i, ++matches;
    if (matches == 0) fail(part, "no workload uuid starts with this");
    if (matches > 1) fail(part, "ambiguous: " + std::to_string(matches) + " workload uuids start with this");
    take(match);
  }
  return out;
}


}  // namespace kindex::runner
