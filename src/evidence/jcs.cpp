#include "evidence/jcs.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/error.hpp"

namespace kindex::evidence {
namespace {

// Decodes one UTF-8 code point at s[i], advancing i; returns -1 on malformed input.
int32_t next_code_point(std::string_view s, std::size_t& i) {
  const auto byte = [&](std::size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t b0 = byte(i);
  if (b0 < 0x80) return static_cast<int32_t>(s[i++] & 0x7f);
  int len;
  int32_t cp, min;
  if ((b0 & 0xe0) == 0xc0) len = 2, cp = b0 & 0x1f, min = 0x80;
  else if ((b0 & 0xf0) == 0xe0) len = 3, cp = b0 & 0x0f, min = 0x800;
  else if ((b0 & 0xf8) == 0xf0) len = 4, cp = b0 & 0x07, min = 0x10000;
  else return -1;
  if (i + len > s.size()) return -1;
  for (int k = 1; k < len; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return -1;
    cp = (cp << 6) | (byte(i + k) & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return -1;
  i += len;
  return cp;
}

// First and second UTF-16 code unit of a code point (second is 0 for the BMP).
std::pair<uint32_t, uint32_t> utf16_units(int32_t cp) {
  if (cp < 0x10000) return {static_cast<uint32_t>(cp), 0};
  const uint32_t v = static_cast<uint32_t>(cp - 0x10000);
  return {0xd800 + (v >> 10), 0xdc00 + (v & 0x3ff)};
}

std::string preview(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 40)) out += (static_cast<unsigned char>(c) < 0x80 && c >= 0x20) ? c : '?';
  return out;
}

void append_number(std::string& out, const nlohmann::json& v) {
  constexpr uint64_t kExact = uint64_t{1} << 53;  // integers up to 2^53 print the same as their double
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    out += u <= kExact ? std::to_string(u) : ecmascript_number(static_cast<double>(u));
  } else if (v.is_number_integer()) {
    const int64_t i = v.get<int64_t>();
    const uint64_t mag = i < 0 ? uint64_t(0) - uint64_t(i) : uint64_t(i);
    out += mag <= kExact ? std::to_string(i) : ecmascript_number(static_cast<double>(i));
  } else {
    out += ecmascript_number(v.get<double>());
  }
}

void append_canonical(std::string& out, const nlohmann::json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::null: out += "null"; return;
    case nlohmann::json::value_t::boolean: out += v.get<bool>() ? "true" : "false"; return;
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
    case nlohmann::json::value_t::number_float: append_number(out, v); return;
    case nlohmann::json::value_t::string: out += ecmascript_quote(v.get_ref<const std::string&>()); return;
    case nlohmann::json::value_t::array: {
      out += '[';
      bool first = true;
      for (const auto& item : v) {
        if (!first) out += ',';
        first = false;
        append_canonical(out, item);
      }
      out += ']';
      return;
    }
    case nlohmann::json::value_t::object: {
      std::vector<const std::string*> keys;
      keys.reserve(v.size());
      for (const auto& [key, _] : v.items()) keys.push_back(&key);
      std::sort(keys.begin(), keys.end(), [](const std::string* a, const std::string* b) { return utf16_less(*a, *b); });
      out += '{';
      bool first = true;
      for (const std::string* key : keys) {
        if (!first) out += ',';
        first = false;
        out += ecmascript_quote(*key);
        out += ':';
        append_canonical(out, v.at(*key));
      }
      out += '}';
      return;
    }
    default: throw Error("canonical JSON", "", "", "binary or discarded values cannot be canonicalised");
  }
}

}  // namespace

bool valid_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();)
    if (next_code_point(s, i) < 0) return false;
  return true;
}

bool utf16_less(std::string_view a, std::string_view b) {
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const std::size_t i0 = i, j0 = j;
    const int32_t ca = next_code_point(a, i), cb = next_code_point(b, j);
    if (ca < 0 || cb < 0) return a.substr(i0) < b.substr(j0);  // malformed: fall back to bytes
    if (ca == cb) continue;
    return utf16_units(ca) < utf16_units(cb);
  }
  return i == a.size() && j < b.size();
}

std::string ecmascript_quote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t start = i;
    const int32_t cp = next_code_point(s, i);
    if (cp < 0)
      throw Error("canonical JSON", "string", preview(s), "invalid UTF-8 at byte " + std::to_string(start));
    switch (cp) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (cp < 0x20) {
          static const char* hex = "0123456789abcdef";
          out += "\\u00";
          out += hex[cp >> 4];
          out += hex[cp & 15];
        } else {
          out.append(s.substr(start, i - start));
        }
    }
  }
  out += '"';
  return out;
}

std::string ecmascript_number(double x) {
  if (!std::isfinite(x)) throw Error("canonical JSON", "number", std::to_string(x), "NaN and infinities have no JSON form");
  if (x == 0) return "0";  // also -0
  // Shortest round-trip digits in scientific form "d[.ddd]e[+-]XX", then ECMAScript's layout rules.
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, std::fabs(x), std::chars_format::scientific);
  const std::string_view sci(buf, static_cast<std::size_t>(res.ptr - buf));
  const std::size_t e_pos = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e_pos))
    if (c != '.') digits += c;
  int exponent = 0;
  std::from_chars(sci.data() + e_pos + (sci[e_pos + 1] == '+' ? 2 : 1), sci.data() + sci.size(), exponent);
  const int k = static_cast<int>(digits.size());
  const int n = exponent + 1;  // decimal point position: value = 0.digits * 10^n
  std::string out = x < 0 ? "-" : "";
  if (k <= n && n <= 21) {
    out += digits;
    out.append(static_cast<std::size_t>(n - k), '0');
  } else if (0 < n && n <= 21) {
    out += digits.substr(0, n);
    out += '.';
    out += digits.substr(n);
  } else if (-6 < n && n <= 0) {
    out += "0.";
    out.append(static_cast<std::size_t>(-n), '0');
    out += digits;
  } else {
    out += digits[0];
    if (k > 1) {
      out += '.';
      out += digits.substr(1);
    }
    out += 'e';
    out += n - 1 >= 0 ? '+' : '-';
    out += std::to_string(std::abs(n - 1));
  }
  return out;
}

std::string canonical_json(const nlohmann::json& value) {
  std::string out;
  append_canonical(out, value);
  return out;
}

}  // namespace kindex::evidence
