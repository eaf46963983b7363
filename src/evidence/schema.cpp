#include "evidence/schema.hpp"

#include <cmath>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "core/error.hpp"
#include "evidence/digest.hpp"
#include "evidence/jcs.hpp"

namespace kindex::evidence {
namespace embedded {
extern const std::vector<std::pair<std::string_view, std::string_view>> kSchemaFiles;  // evidence_schemas.cpp
}

namespace {

// Strings checked against a pattern are bounded: every patterned field is a short identifier, digest or timestamp,
// and std::regex recurses per character.
constexpr std::size_t kMaxPatternInput = 1000;

const std::map<std::string, nlohmann::json>& schemas_by_kind() {
  static const std::map<std::string, nlohmann::json> schemas = [] {
    std::map<std::string, nlohmann::json> out;
    for (const auto& [name, text] : embedded::kSchemaFiles) {
      nlohmann::json schema = nlohmann::json::parse(text);
      out.emplace(schema.at("title").get<std::string>(), std::move(schema));
    }
    return out;
  }();
  return schemas;
}

const std::regex& cached_regex(const std::string& pattern) {
  static std::mutex mutex;
  static std::map<std::string, std::regex> cache;
  std::lock_guard lock(mutex);
  auto it = cache.find(pattern);
  if (it == cache.end()) it = cache.emplace(pattern, std::regex(pattern, std::regex::ECMAScript)).first;
  return it->second;
}

// Whether `s` matches `pattern`, remembered per thread: the same digests and names recur in thousands of manifests
// of one import, and std::regex costs microseconds per match. Bounded: the memory is dropped when it fills.
bool matches_pattern(const std::string& pattern, const std::string& s) {
  thread_local std::unordered_map<std::string, bool> seen;
  std::string key;
  key.reserve(pattern.size() + 1 + s.size());
  key.append(pattern).push_back('\0');
  key.append(s);
  if (const auto it = seen.find(key); it != seen.end()) return it->second;
  const bool match = std::regex_search(s, cached_regex(pattern));
  if (seen.size() >= 16384) seen.clear();
  seen.emplace(std::move(key), match);
  return match;
}

std::string escape_pointer_token(const std::string& token) {
  std::string out;
  for (char c : token) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

std::string preview(const nlohmann::json& v) {
  std::string s = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (s.size() > 120) s = s.substr(0, 117) + "...";
  return s;
}

std::size_t code_points(const std::string& s) {
  std::size_t n = 0;
  for (unsigned char c : s) n += (c & 0xc0) != 0x80;
  return n;
}

bool is_type(const nlohmann::json& v, const std::string& type) {
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "boolean") return v.is_boolean();
  if (type == "null") return v.is_null();
  if (type == "number") return v.is_number();
  if (type == "integer") {
    if (v.is_number_integer()) return true;  // signed and unsigned
    return v.is_number_float() && std::isfinite(v.get<double>()) && std::trunc(v.get<double>()) == v.get<double>();
  }
  throw std::logic_error("schema: unknown type " + type);
}

bool valid_date_time(const std::string& s) {
  static const std::regex rfc3339(
      R"(^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])[Tt]([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)$)");
  return s.size() < 64 && std::regex_match(s, rfc3339);
}

// Keywords that carry no validation meaning.
bool is_annotation(const std::string& keyword) {
  return keyword == "$comment" || keyword == "$id" || keyword == "$schema" || keyword == "title" ||
         keyword == "description" || keyword == "default" || keyword == "examples" || keyword == "$defs";
}

// A JSON pointer built only when a violation names it: most documents have none, and joining a string per node was
// a large part of validating one.
struct Pointer {
  const Pointer* parent = nullptr;
  const std::string* key = nullptr;  // an object member, or
  std::size_t index = 0;             // an array item when key is null
  std::string str() const {
    if (!parent) return "";
    return parent->str() + "/" + (key ? escape_pointer_token(*key) : std::to_string(index));
  }
};

class Validator {
 public:
  explicit Validator(const nlohmann::json& root) : root_(root) {}

  void check(const nlohmann::json& schema, const nlohmann::json& v, const Pointer& ptr,
             std::vector<SchemaViolation>& out) const {
    if (schema.is_boolean()) {
      if (!schema.get<bool>()) out.push_back({ptr.str(), preview(v), "not allowed here"});
      return;
    }
    // The embedded schemas never change: each node's keywords are checked once per thread, not per document.
    thread_local std::unordered_set<const nlohmann::json*> supported_nodes;
    if (supported_nodes.insert(&schema).second) {
      for (const auto& [keyword, _] : schema.items())
        if (!is_annotation(keyword) && !kSupported.count(keyword)) {
          supported_nodes.erase(&schema);
          throw std::logic_error("schema: unsupported keyword " + keyword);
        }
    }
    if (schema.contains("$ref")) {
      const std::string ref = schema["$ref"].get<std::string>();
      if (ref.empty() || ref[0] != '#') throw std::logic_error("schema: only local $ref supported: " + ref);
      check(root_.at(nlohmann::json::json_pointer(ref.substr(1))), v, ptr, out);
    }
    if (schema.contains("type") && !check_type(schema["type"], v, ptr, out)) return;  // the rest would only add noise
    if (schema.contains("const") && v != schema["const"])
      out.push_back({ptr.str(), preview(v), "must be " + preview(schema["const"])});
    if (schema.contains("enum")) {
      bool found = false;
      for (const auto& option : schema["enum"]) found = found || v == option;
      if (!found) out.push_back({ptr.str(), preview(v), "must be one of " + preview(schema["enum"])});
    }
    if (v.is_string()) check_string(schema, v.get_ref<const std::string&>(), ptr, out);
    if (v.is_number()) check_number(schema, v, ptr, out);
    if (v.is_object()) check_object(schema, v, ptr, out);
    if (v.is_array()) check_array(schema, v, ptr, out);
    if (schema.contains("allOf"))
      for (const auto& sub : schema["allOf"]) check(sub, v, ptr, out);
    if (schema.contains("anyOf") || schema.contains("oneOf")) check_alternatives(schema, v, ptr, out);
  }

 private:
  inline static const std::set<std::string> kSupported = {
      "type",     "properties", "required",  "additionalProperties", "propertyNames",    "enum",
      "const",    "pattern",    "format",    "items",                "prefixItems",      "minItems",
      "maxItems", "minimum",    "maximum",   "exclusiveMinimum",     "exclusiveMaximum", "minLength",
      "maxLength", "anyOf",     "oneOf",     "allOf",                "$ref"};

  static std::string describe(const nlohmann::json& schema) {
    std::string s;
    if (schema.contains("type"))
      s = schema["type"].is_string() ? schema["type"].get<std::string>() : preview(schema["type"]);
    if (schema.contains("pattern")) s += " matching " + schema["pattern"].get<std::string>();
    if (schema.contains("minimum")) s += " >= " + preview(schema["minimum"]);
    if (schema.contains("exclusiveMinimum")) s += " > " + preview(schema["exclusiveMinimum"]);
    if (schema.contains("maximum")) s += " <= " + preview(schema["maximum"]);
    if (schema.contains("const")) s += " " + preview(schema["const"]);
    return s.empty() ? preview(schema) : s;
  }

  bool check_type(const nlohmann::json& type, const nlohmann::json& v, const Pointer& ptr,
                  std::vector<SchemaViolation>& out) const {
    if (type.is_string() && is_type(v, type.get_ref<const std::string&>())) return true;
    if (type.is_array())
      for (const auto& t : type)
        if (is_type(v, t.get_ref<const std::string&>())) return true;
    std::vector<std::string> allowed =
        type.is_string() ? std::vector<std::string>{type.get<std::string>()} : type.get<std::vector<std::string>>();
    std::string expected;
    for (const auto& t : allowed) expected += (expected.empty() ? "" : " or ") + t;
    out.push_back({ptr.str(), preview(v), v.is_null() ? "null is not allowed (expected " + expected + ")"
                                                : "wrong type (expected " + expected + ")"});
    return false;
  }

  void check_string(const nlohmann::json& schema, const std::string& s, const Pointer& ptr,
                    std::vector<SchemaViolation>& out) const {
    if (schema.contains("maxLength") && code_points(s) > schema["maxLength"].get<std::size_t>())
      out.push_back({ptr.str(), preview(s), "longer than maxLength " + preview(schema["maxLength"])});
    if (schema.contains("minLength") && code_points(s) < schema["minLength"].get<std::size_t>())
      out.push_back({ptr.str(), preview(s), "shorter than minLength " + preview(schema["minLength"])});
    if (schema.contains("pattern")) {
      const std::string& pattern = schema["pattern"].get_ref<const std::string&>();
      if (s.size() > kMaxPatternInput)
        out.push_back({ptr.str(), preview(s), "too long to match pattern " + pattern});
      else if (!matches_pattern(pattern, s))
        out.push_back({ptr.str(), preview(s), "does not match pattern " + pattern});
    }
    if (schema.contains("format") && schema["format"] == "date-time" && !valid_date_time(s))
      out.push_back({ptr.str(), preview(s), "not an RFC 3339 date-time (format: date-time)"});
  }

  void check_number(const nlohmann::json& schema, const nlohmann::json& v, const Pointer& ptr,
                    std::vector<SchemaViolation>& out) const {
    const long double x = v.is_number_unsigned()  ? static_cast<long double>(v.get<uint64_t>())
                          : v.is_number_integer() ? static_cast<long double>(v.get<int64_t>())
                                                  : static_cast<long double>(v.get<double>());
    const auto bound = [&](const char* key) { return schema[key].get<long double>(); };
    if (schema.contains("minimum") && x < bound("minimum"))
      out.push_back({ptr.str(), preview(v), "below minimum " + preview(schema["minimum"])});
    if (schema.contains("maximum") && x > bound("maximum"))
      out.push_back({ptr.str(), preview(v), "above maximum " + preview(schema["maximum"])});
    if (schema.contains("exclusiveMinimum") && x <= bound("exclusiveMinimum"))
      out.push_back({ptr.str(), preview(v), "must be greater than " + preview(schema["exclusiveMinimum"])});
    if (schema.contains("exclusiveMaximum") && x >= bound("exclusiveMaximum"))
      out.push_back({ptr.str(), preview(v), "must be less than " + preview(schema["exclusiveMaximum"])});
  }

  void check_object(const nlohmann::json& schema, const nlohmann::json& v, const Pointer& ptr,
                    std::vector<SchemaViolation>& out) const {
    static const nlohmann::json empty = nlohmann::json::object();
    const nlohmann::json& properties = schema.contains("properties") ? schema["properties"] : empty;
    if (schema.contains("required"))
      for (const auto& name : schema["required"])
        if (!v.contains(name.get<std::string>()))
          out.push_back({ptr.str() + "/" + escape_pointer_token(name.get<std::string>()), "", "required property missing"});
    for (const auto& [key, child] : v.items()) {
      const Pointer child_ptr{&ptr, &key};
      if (schema.contains("propertyNames")) {
        std::vector<SchemaViolation> name_problems;
        check(schema["propertyNames"], key, child_ptr, name_problems);
        for (auto& p : name_problems) out.push_back({child_ptr.str(), preview(key), "property name " + p.rule});
      }
      if (properties.contains(key)) {
        check(properties[key], child, child_ptr, out);
      } else if (schema.contains("additionalProperties")) {
        const auto& extra = schema["additionalProperties"];
        if (extra.is_boolean() && !extra.get<bool>()) {
          std::string allowed;
          for (const auto& [name, _] : properties.items()) allowed += (allowed.empty() ? "" : ", ") + name;
          out.push_back({child_ptr.str(), preview(child), "unknown property (additionalProperties: false; allowed: " + allowed + ")"});
        } else {
          check(extra, child, child_ptr, out);
        }
      }
    }
  }

  void check_array(const nlohmann::json& schema, const nlohmann::json& v, const Pointer& ptr,
                   std::vector<SchemaViolation>& out) const {
    if (schema.contains("minItems") && v.size() < schema["minItems"].get<std::size_t>())
      out.push_back({ptr.str(), preview(v), "fewer than minItems " + preview(schema["minItems"])});
    if (schema.contains("maxItems") && v.size() > schema["maxItems"].get<std::size_t>())
      out.push_back({ptr.str(), preview(v), "more than maxItems " + preview(schema["maxItems"])});
    std::size_t first_item = 0;
    if (schema.contains("prefixItems")) {
      const auto& prefix = schema["prefixItems"];
      for (; first_item < prefix.size() && first_item < v.size(); ++first_item)
        check(prefix[first_item], v[first_item], Pointer{&ptr, nullptr, first_item}, out);
      first_item = prefix.size();
    }
    if (schema.contains("items"))
      for (std::size_t i = first_item; i < v.size(); ++i) check(schema["items"], v[i], Pointer{&ptr, nullptr, i}, out);
  }

  void check_alternatives(const nlohmann::json& schema, const nlohmann::json& v, const Pointer& ptr,
                          std::vector<SchemaViolation>& out) const {
    const bool one_of = schema.contains("oneOf");
    const auto& options = one_of ? schema["oneOf"] : schema["anyOf"];
    std::size_t passing = 0;
    for (const auto& option : options) {
      std::vector<SchemaViolation> problems;
      check(option, v, ptr, problems);
      if (problems.empty()) ++passing;
    }
    if (passing == 1 || (passing > 1 && !one_of)) return;
    std::string tried;
    for (const auto& option : options) tried += (tried.empty() ? "" : " | ") + describe(option);
    if (passing == 0) out.push_back({ptr.str(), preview(v), "matches none of the allowed forms: " + tried});
    else if (one_of && passing > 1) out.push_back({ptr.str(), preview(v), "matches more than one of: " + tried});
  }

  const nlohmann::json& root_;
};

std::string kinds_list() {
  std::string s;
  for (const auto& k : schema_kinds()) s += (s.empty() ? "" : ", ") + k;
  return s;
}

}  // namespace

std::vector<std::string> schema_kinds() {
  std::vector<std::string> kinds;
  for (const auto& [kind, _] : schemas_by_kind()) kinds.push_back(kind);
  return kinds;
}

const nlohmann::json& schema_for_kind(const std::string& kind) {
  const auto& schemas = schemas_by_kind();
  const auto it = schemas.find(kind);
  if (it == schemas.end()) throw Error("schema", "kind", kind, "unknown manifest kind (known: " + kinds_list() + ")");
  return it->second;
}

std::vector<SchemaViolation> check_schema(const nlohmann::json& schema, const nlohmann::json& value) {
  std::vector<SchemaViolation> out;
  Validator(schema).check(schema, value, Pointer{}, out);
  return out;
}

std::vector<SchemaViolation> check_manifest_schema(const nlohmann::json& manifest) {
  if (!manifest.is_object()) return {{"", preview(manifest), "a manifest is an object with apiVersion, kind, metadata, spec"}};
  if (!manifest.contains("kind") || !manifest["kind"].is_string())
    return {{"/kind", manifest.contains("kind") ? preview(manifest["kind"]) : "", "missing or not a string (one of " + kinds_list() + ")"}};
  const std::string& kind = manifest["kind"].get_ref<const std::string&>();
  if (!schemas_by_kind().count(kind)) return {{"/kind", preview(kind), "unknown manifest kind (known: " + kinds_list() + ")"}};
  return check_schema(schema_for_kind(kind), manifest);
}

nlohmann::json validate_manifest(const nlohmann::json& manifest, const std::string& where) {
  const auto problems = check_manifest_schema(manifest);
  if (!problems.empty()) {
    const auto& p = problems.front();
    std::string rule = p.rule;
    if (problems.size() > 1) rule += " (and " + std::to_string(problems.size() - 1) + " more problems)";
    throw Error(where, p.pointer.empty() ? "/" : p.pointer, p.value, rule);
  }
  return normalize_manifest(manifest, where);  // durations that are not whole nanoseconds are refused here
}

}  // namespace kindex::evidence
