// Fuzzes the one problem -> manifest converter (src/problem_manifest) the trace importer feeds with untrusted
// JSON: the first byte picks the input, the rest is the document. Even: a FlashInfer-Bench / SOL-ExecBench
// definition (-> OperationSpec, then one made-up workload of it); odd: a trace line's workload block against a
// fixed operation (the bundled ps64 decode definition, and the SOL L2/003 one with its derived axes). Bad input
// must be refused with kindex::Error, never a crash, a hang or another exception.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "catalog/builtin.hpp"
#include "core/error.hpp"
#include "problem_manifest/problem_manifest.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kindex;
  using nlohmann::json;
  static const json decode_op = problem_manifest::operation_spec(*catalog::find_builtin("gqa_paged_decode_h24_kv4_d128_ps64")).document;
  static const json sol_op =
      problem_manifest::operation_spec(*catalog::find_builtin(catalog::kSolGqaRopeBackward)).document;
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    if (data[0] % 2 == 0) {
      auto def = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (def.is_discarded()) return 0;
      json op = problem_manifest::operation_document(def, "fuzz");
      json axes = json::object();
      for (const auto& [name, axis] : op["spec"]["axes"].items())
        if (axis.value("role", "") == "variable") axes[name] = 3;
      problem_manifest::workload_case(op, {{"uuid", "u"}, {"axes", axes}}, "fuzz", "fuzz");
    } else {
      json w = json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (w.is_discarded()) return 0;
      problem_manifest::workload_case(data[0] % 4 == 1 ? decode_op : sol_op, w, "fuzz", "fuzz");
    }
  } catch (const kindex::Error&) {
  }
  return 0;
}
