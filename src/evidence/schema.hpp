#pragma once
// Validation of KernelIndex manifests against the v1alpha1 JSON Schemas (copied into src/evidence/schemas and
// embedded at build time). Implements the subset of JSON Schema 2020-12 those schemas use: type, properties,
// required, additionalProperties, propertyNames, enum, const, pattern, format (date-time), items, prefixItems,
// minItems, maxItems, minimum, maximum, exclusiveMinimum, exclusiveMaximum, minLength, maxLength, anyOf, oneOf,
// allOf. No type admits null, so nulls are refused everywhere.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kindex::evidence {

struct SchemaViolation {
  std::string pointer;  // JSON pointer of the offending value, e.g. "/spec/popularity"
  std::string value;    // the value, compact JSON (truncated)
  std::string rule;     // what it breaks, e.g. "unknown property (additionalProperties: false)"
};

// Kinds with an embedded schema (OperationSpec, WorkloadCase, ..., ServingRun).
std::vector<std::string> schema_kinds();
// The embedded schema for a kind; kindex::Error if unknown.
const nlohmann::json& schema_for_kind(const std::string& kind);

// All violations of `value` against `schema` (a JSON Schema of the subset above, with local $refs; it must outlive
// every call, as the embedded schemas do: checked nodes are remembered by address). Empty when valid.
std::vector<SchemaViolation> check_schema(const nlohmann::json& schema, const nlohmann::json& value);
// All violations of the manifest against the schema of its `kind` (empty when valid).
std::vector<SchemaViolation> check_manifest_schema(const nlohmann::json& manifest);
// Schema check plus the digest normalisations (so ambiguous durations are caught too); throws kindex::Error
// (where, pointer, value, rule) for the first problem, mentioning how many more there are. Returns the
// normalised manifest (normalize_manifest's result).
nlohmann::json validate_manifest(const nlohmann::json& manifest, const std::string& where);

}  // namespace kindex::evidence
