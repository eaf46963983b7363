#include "evidence/digest.hpp"

#include <openssl/evp.h>

#include <algorithm>

#include "core/error.hpp"
#include "core/hex.hpp"
#include "evidence/jcs.hpp"

namespace kindex::evidence {

std::string sha256_hex(std::string_view bytes) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), md, &len, EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("OpenSSL EVP_Digest(sha256) failed");
  return hex_lower(std::string_view(reinterpret_cast<const char*>(md), len));
}

std::string sha256_digest(const nlohmann::json& value) { return "sha256:" + sha256_hex(canonical_json(value)); }

bool is_sha256_digest(std::string_view s) {
  if (s.size() != 71 || s.substr(0, 7) != "sha256:") return false;
  return std::all_of(s.begin() + 7, s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

int64_t parse_duration_ns(std::string_view text, const std::string& where, const std::string& field) {
  const std::string value(text);
  const auto fail = [&](const std::string& problem) { throw Error(where, field, "\"" + value + "\"", problem); };
  // Grammar (the schemas' pattern): digits [. digits] [one space] unit, unit in ns|us|µs|ms|s.
  std::size_t i = 0;
  std::string whole, frac;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') whole += text[i++];
  if (whole.empty()) fail("a duration is digits, an optional fraction and a unit (ns, us, µs, ms, s)");
  if (i < text.size() && text[i] == '.') {
    ++i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') frac += text[i++];
    if (frac.empty()) fail("a decimal point needs digits after it");
  }
  if (i < text.size() && text[i] == ' ') ++i;
  const std::string_view unit = text.substr(i);
  int scale = 0;  // nanoseconds per unit = 10^scale
  if (unit == "ns") scale = 0;
  else if (unit == "us" || unit == "\xC2\xB5s") scale = 3;
  else if (unit == "ms") scale = 6;
  else if (unit == "s") scale = 9;
  else fail("unknown or missing duration unit (expected ns, us, µs, ms or s)");
  // Exact decimal arithmetic: the fraction digits beyond the unit's scale must be zero.
  for (std::size_t k = static_cast<std::size_t>(scale); k < frac.size(); ++k)
    if (frac[k] != '0') fail("ambiguous duration: not a whole number of nanoseconds");
  std::string digits = whole + frac.substr(0, std::min<std::size_t>(frac.size(), scale));
  digits.append(static_cast<std::size_t>(scale) - std::min<std::size_t>(frac.size(), scale), '0');
  digits.erase(0, std::min(digits.find_first_not_of('0'), digits.size() - 1));
  constexpr int64_t kMax = (int64_t{1} << 53) - 1;  // the schemas' integer bound
  if (digits.size() > 16) fail("duration too large (above 2^53 - 1 ns)");
  const int64_t ns = std::stoll(digits);
  if (ns > kMax) fail("duration too large (above 2^53 - 1 ns)");
  return ns;
}

namespace {

void normalize_duration(nlohmann::json& v, const std::string& where, const std::string& pointer) {
  if (v.is_string()) v = parse_duration_ns(v.get_ref<const std::string&>(), where, pointer);
}

}  // namespace

nlohmann::json normalize_manifest(const nlohmann::json& manifest, const std::string& where) {
  nlohmann::json m = manifest;
  if (!m.is_object() || !m.contains("kind") || !m["kind"].is_string() || !m.contains("spec") || !m["spec"].is_object())
    return m;  // nothing to normalise; the schema check reports the shape problem
  const std::string& kind = m["kind"].get_ref<const std::string&>();
  nlohmann::json& spec = m["spec"];
  if (kind == "BenchmarkProtocol") {
    if (spec.contains("measurement") && spec["measurement"].is_object() && spec["measurement"].contains("warmupDuration"))
      normalize_duration(spec["measurement"]["warmupDuration"], where, "/spec/measurement/warmupDuration");
  } else if (kind == "BenchmarkRun") {
    if (spec.contains("timing") && spec["timing"].is_object() && spec["timing"].contains("latencyNs") &&
        spec["timing"]["latencyNs"].is_object()) {
      nlohmann::json& latency = spec["timing"]["latencyNs"];
      for (const char* key : {"median", "mean", "p05", "p95", "minimum", "maximum", "mad"})
        if (latency.contains(key)) normalize_duration(latency[key], where, std::string("/spec/timing/latencyNs/") + key);
      if (latency.contains("confidence95") && latency["confidence95"].is_array()) {
        auto& ci = latency["confidence95"];
        for (std::size_t i = 0; i < ci.size(); ++i)
          normalize_duration(ci[i], where, "/spec/timing/latencyNs/confidence95/" + std::to_string(i));
      }
    }
  } else if (kind == "ImplementationRevision") {
    if (spec.contains("support") && spec["support"].is_object()) {
      for (auto& [key, list] : spec["support"].items()) {
        if (!list.is_array() || !std::all_of(list.begin(), list.end(), [](const auto& e) { return e.is_string(); }))
          continue;
        std::vector<std::string> items = list.get<std::vector<std::string>>();
        std::sort(items.begin(), items.end(), [](const std::string& a, const std::string& b) { return utf16_less(a, b); });
        items.erase(std::unique(items.begin(), items.end()), items.end());
        list = items;
      }
    }
  }
  return m;
}

std::string manifest_digest(const nlohmann::json& manifest, const std::string& where) {
  if (!manifest.is_object()) throw Error(where, "", "", "a manifest is a JSON object");
  return normalized_manifest_digest(normalize_manifest(manifest, where), where);
}

std::string normalized_manifest_digest(const nlohmann::json& m, const std::string& where) {
  if (!m.is_object()) throw Error(where, "", "", "a manifest is a JSON object");
  for (const char* key : {"apiVersion", "kind", "spec"})
    if (!m.contains(key)) throw Error(where, std::string("/") + key, "", "missing (digests hash apiVersion, kind and spec)");
  // The canonical form of {apiVersion, kind, spec}, written member by member instead of copying the spec into a
  // new object: the three keys are ASCII, so their JCS order is this one.
  std::string text = "{\"apiVersion\":" + canonical_json(m["apiVersion"]);
  text += ",\"kind\":" + canonical_json(m["kind"]);
  text += ",\"spec\":" + canonical_json(m["spec"]);
  text += "}";
  return "sha256:" + sha256_hex(text);
}

}  // namespace kindex::evidence
