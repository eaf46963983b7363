// Fuzzes both solution loaders (src/runner/solution_file.hpp) with any JSON document: a bad one must be refused
// with kindex::Error (naming the field), never with another exception, a crash or an out-of-bounds read.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "runner/execute/solution_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded()) return 0;
  for (auto parse : {&kindex::runner::parse_flashinfer_bench_solution, &kindex::runner::parse_sol_execbench_solution}) {
    try {
      kindex::runner::SolutionFile s = parse(doc, "fuzz.json");
      // What a loaded solution promises its runner: an entry file among its sources, a function name.
      if (s.entry_function.empty() || s.sources.empty()) __builtin_trap();
    } catch (const kindex::Error&) {
    }
  }
  return 0;
}
