// Any bytes as one export line; a parsed row is also put through verify_export, which must turn every problem
// into a counted mismatch rather than a crash.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/error.hpp"
#include "evidence/export.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view line(reinterpret_cast<const char*>(data), size);
  try {
    kindex::evidence::ExportRow row = kindex::evidence::parse_export_line(line, "fuzz:1");
    kindex::evidence::ExportData export_data;
    export_data.tables[row.table].push_back(std::move(row.row));
    (void)kindex::evidence::verify_export(export_data);
  } catch (const kindex::Error&) {
  }
  return 0;
}
