#pragma once
// RFC 8785 JSON Canonicalization Scheme over nlohmann::json: object keys sorted by UTF-16 code units, no
// whitespace, strings escaped as ECMAScript JSON.stringify does, numbers printed as ECMAScript Number::toString.
// Invalid UTF-8, NaN and infinities are rejected with kindex::Error.
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace kindex::evidence {

std::string canonical_json(const nlohmann::json& value);

// ECMAScript Number::toString(x): shortest round-trip digits, integer form below 1e21, exponent form below 1e-6
// and from 1e21 ("1e+21", "1.5e-7"); -0 prints "0". Throws on NaN and infinities.
std::string ecmascript_number(double x);

// The string as JSON.stringify would quote it (with the quotes). Throws on invalid UTF-8.
std::string ecmascript_quote(std::string_view utf8);

// Orders two UTF-8 strings by their UTF-16 code units (JCS key order, and JavaScript's default sort).
bool utf16_less(std::string_view a, std::string_view b);

// Whether s is well-formed UTF-8 (no overlongs, surrogates or code points above U+10FFFF).
bool valid_utf8(std::string_view s);

}  // namespace kindex::evidence
