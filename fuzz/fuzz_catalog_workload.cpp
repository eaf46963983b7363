// Fuzzes the workload-line parser against a fixed definition (the bundled ps64 decode definition), then the
// constraint and page-table checks on the index tensors a parsed workload implies.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "catalog/builtin.hpp"
#include "catalog/constraints.hpp"
#include "catalog/inputs.hpp"
#include "catalog/loader.hpp"
#include "core/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kindex::catalog;
  static const Definition def = *find_builtin("gqa_paged_decode_h24_kv4_d128_ps64");
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    for (const Workload& w : parse_workloads(text, def, "fuzz.jsonl", "/nonexistent")) {
      auto axes = resolve_axes(def, w);
      if (axes.at("num_kv_indices") > 100000 || axes.at("batch_size") > 10000) continue;  // keep runs fast
      GenerateOptions options;
      options.skip_random_floats = true;
      Inputs in = generate_inputs(def, w, 1, options);
      check_inputs(def, axes, in, "fuzz", true);
    }
  } catch (const kindex::Error&) {
  }
  return 0;
}
