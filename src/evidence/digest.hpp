#pragma once
// KernelIndex canonical digests: "sha256:" + hex(SHA-256(JCS({apiVersion, kind, spec}))) after the
// normalisations (durations to integer nanoseconds; ImplementationRevision support lists deduplicated and sorted).
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace kindex::evidence {

std::string sha256_hex(std::string_view bytes);  // 64 lowercase hex digits
// "sha256:" + hex(SHA-256(JCS(value))): the digest of any JSON value.
std::string sha256_digest(const nlohmann::json& value);

// "8 us", "1.5 ms", "250ns", "2 s", "3 µs" -> integer nanoseconds. A value that is not a whole number of
// nanoseconds ("0.0000005 ms") or does not fit below 2^53 is ambiguous: kindex::Error(where, field, text, ...).
int64_t parse_duration_ns(std::string_view text, const std::string& where, const std::string& field);

// The manifest with the digest normalisations applied (by kind): BenchmarkProtocol spec.measurement.warmupDuration
// and BenchmarkRun spec.timing.latencyNs.{median,mean,p05,p95,minimum,maximum,mad,confidence95[]} become integer
// ns; ImplementationRevision spec.support.* lists are deduplicated and sorted by UTF-16 code units.
nlohmann::json normalize_manifest(const nlohmann::json& manifest, const std::string& where = "manifest");

// Digest of a manifest document: normalises, then hashes {apiVersion, kind, spec} (metadata excluded). Does not
// validate against the schema (see schema.hpp / manifest.hpp for that).
std::string manifest_digest(const nlohmann::json& manifest, const std::string& where = "manifest");
// The same digest of a manifest normalize_manifest already returned (not normalised again).
std::string normalized_manifest_digest(const nlohmann::json& normalized, const std::string& where = "manifest");

// Whether s looks like "sha256:<64 lowercase hex>".
bool is_sha256_digest(std::string_view s);

}  // namespace kindex::evidence
