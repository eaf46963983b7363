// Any bytes, read as a YAML and as a JSON manifest, then validated, normalised and digested: only kindex::Error
// may come out.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/error.hpp"
#include "evidence/digest.hpp"
#include "evidence/jcs.hpp"
#include "evidence/reader.hpp"
#include "evidence/schema.hpp"

namespace {

void exercise(const nlohmann::json& value) {
  try {
    (void)kindex::evidence::canonical_json(value);
  } catch (const kindex::Error&) {
  }
  try {
    (void)kindex::evidence::check_manifest_schema(value);
    kindex::evidence::validate_manifest(value, "fuzz");
    (void)kindex::evidence::manifest_digest(value, "fuzz");
  } catch (const kindex::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    exercise(kindex::evidence::parse_yaml(text, "fuzz.yaml"));
  } catch (const kindex::Error&) {
  }
  try {
    exercise(kindex::evidence::parse_json_strict(text, "fuzz.json"));
  } catch (const kindex::Error&) {
  }
  return 0;
}
