// Fuzzes the definition parser (JSON, axes, expressions, tensors, constraints): any input either parses or
// throws kindex::Error; nothing else may escape, crash or hang.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "catalog/loader.hpp"
#include "core/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    kindex::catalog::Definition def = kindex::catalog::parse_definition(text, "fuzz.json");
    // A definition that parses must also resolve its axes for some variable values.
    std::map<std::string, int64_t> vars;
    for (const auto& [name, axis] : def.axes)
      if (axis.kind == kindex::catalog::Axis::Kind::variable) vars[name] = 3;
    (void)kindex::catalog::resolve_axes(def, vars, "fuzz");
  } catch (const kindex::Error&) {
  }
  return 0;
}
