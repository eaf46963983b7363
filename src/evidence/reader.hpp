#pragma once
// Strict readers for manifests: YAML (libyaml) and JSON into nlohmann::json. Duplicate keys are errors with line
// and column; anchors, aliases, explicit tags and multiple documents are refused; plain YAML scalars resolve as
// KernelIndex's YAML 1.2 core schema does (null/~, true/false, integers, floats; everything else, including
// timestamps such as 2026-08-01T12:00:00Z and yes/no, stays a string). Nesting is limited to kMaxDepth.
// Errors are kindex::Error naming the source.
#include <functional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace kindex::evidence {

inline constexpr int kMaxDepth = 200;

nlohmann::json parse_yaml(std::string_view text, const std::string& where);
nlohmann::json parse_json_strict(std::string_view text, const std::string& where);

// Reads a manifest file: JSON when the name ends in .json or the first non-blank byte is '{', YAML otherwise.
nlohmann::json read_manifest_file(const std::string& path);

// The whole file as bytes; kindex::Error naming the path when it cannot be read.
std::string read_file_bytes(const std::string& path);

// Calls `each` with every line of a JSON-lines file that is not blank, and where it stands ("PATH:N");
// kindex::Error naming the path (and `what` the file holds) when it cannot be read.
void for_each_line(const std::string& path, const std::string& what,
                   const std::function<void(const std::string& line, const std::string& where)>& each);

}  // namespace kindex::evidence
