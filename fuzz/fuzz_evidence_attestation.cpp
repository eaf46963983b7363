// Any bytes read as a signed rerun attestation, then its signature checked and its digest taken: only kindex::Error
// may come out of the reader, and the signature check never throws (it reports).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/error.hpp"
#include "evidence/attestation.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const kindex::evidence::Attestation a = kindex::evidence::parse_attestation(text, "fuzz");
    (void)kindex::evidence::signature_problem(a);
    (void)a.digest();
  } catch (const kindex::Error&) {
  }
  return 0;
}
