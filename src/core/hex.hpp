#pragma once
// Bytes as lowercase hex digits (digests, CUDA IPC handles in the solution worker's requests).
#include <string>
#include <string_view>

namespace kindex {

inline std::string hex_lower(std::string_view bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes.size());
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

}  // namespace kindex
