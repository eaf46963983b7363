#pragma once
// KernelIndex manifests for writers: plain structs for the six kinds kindex records (OperationSpec, WorkloadCase,
// ImplementationRevision, BenchmarkProtocol, ExecutionEnvironment, BenchmarkRun), turned into manifest JSON that
// is normalised, validated against the embedded KernelIndex schema and digested in one step (make_manifest).
// Optional fields left empty are omitted, so a struct filled with only the required fields yields the same digest
// as the equivalent hand-written YAML. `extra` holds schema fields not modelled here; it is merged into the spec
// and validated like everything else.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace kindex::evidence {

inline constexpr const char* kApiVersion = "kernelindex.dev/v1alpha1";

// A manifest as recorded: the full document (normalised: durations in ns, support lists sorted) and its
// canonical digest "sha256:<hex>" over {apiVersion, kind, spec}.
struct Manifest {
  nlohmann::json document;
  std::string digest;
  const std::string& kind() const { return document.at("kind").get_ref<const std::string&>(); }
  const nlohmann::json& spec() const { return document.at("spec"); }
};

struct Metadata {
  std::string name;  // required: ^[a-z0-9][a-z0-9._-]*$
  std::string title;        // at most kMaxTitleChars characters
  std::string description;  // at most kMaxDescriptionChars characters
  std::map<std::string, std::string> labels;
  std::vector<std::string> author_names;
  std::vector<std::string> source_urls;
};

// The schema's limits on metadata text (characters, i.e. code points), and a text cut to fit one of them: whole
// UTF-8 sequences only, the last kept character replaced by "…" when something was cut.
inline constexpr size_t kMaxTitleChars = 200, kMaxDescriptionChars = 2000;
std::string clip_text(std::string_view utf8, size_t max_chars);

// Normalises, validates (throws kindex::Error naming `where`, the JSON pointer, the value and the rule) and
// digests a manifest document {apiVersion, kind, metadata, spec}.
Manifest make_manifest(nlohmann::json document, const std::string& where = "manifest");
// Builds the document from its parts, then as above.
Manifest make_manifest(const std::string& kind, const Metadata& metadata, nlohmann::json spec,
                       const std::string& where = "manifest");

// ---- OperationSpec
struct OperationAxis {
  std::string name;
  std::string role = "variable";  // variable | constant | derived
  std::optional<int64_t> value;   // constant axes
  std::optional<int64_t> minimum, maximum;
  std::string expression;  // derived axes
};
struct OperationTensor {
  std::string name;
  std::vector<std::variant<int64_t, std::string>> shape;  // axis names or fixed sizes; empty for a scalar
  std::string dtype;                                       // bf16, fp16, fp32, int32, ...
  std::string layout;                                      // optional: row_major | col_major | contiguous | strided
  bool scalar = false;
};
struct OperationSpecModel {
  Metadata metadata;
  std::string family;  // ^[a-z0-9][a-z0-9-]*$, e.g. "gqa-paged-attention"
  std::vector<OperationAxis> axes;
  std::vector<OperationTensor> inputs, outputs;
  std::string expression;
  std::string mutation = "none";             // none | in_place | destination
  std::string determinism = "unspecified";   // deterministic | nondeterministic | unspecified
  nlohmann::json extra = nlohmann::json::object();
};
Manifest to_manifest(const OperationSpecModel& m);

// ---- WorkloadCase
struct WorkloadTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::string dtype;
  std::vector<int64_t> strides;            // optional
  std::string generator;                   // optional data.generator: "random", "normal", "safetensors", ...
  std::optional<int64_t> seed;             // optional data.seed
  std::map<std::string, double> parameters;  // optional data.parameters
};
struct WorkloadScalar {
  std::string name;
  std::string dtype;
  double value = 0;
};
struct Correctness {
  std::string comparator;  // e.g. "flashinfer_bench_eval", "sol_execbench_eval"
  std::optional<double> max_absolute_error, max_relative_error, required_matched_ratio;
  std::string nan_policy, infinity_policy;  // optional: reject | exact_match | ignore
};
struct WorkloadCaseModel {
  Metadata metadata;
  std::string operation_spec_digest;
  std::map<std::string, int64_t> axes;
  std::vector<WorkloadTensor> tensors;
  std::vector<WorkloadScalar> scalars;
  Correctness correctness;
  nlohmann::json extra = nlohmann::json::object();
};
Manifest to_manifest(const WorkloadCaseModel& m);

// ---- ImplementationRevision
struct ImplementationRevisionModel {
  Metadata metadata;
  // projectRevision
  std::string repository, commit, version;
  std::string operation_spec_digest;
  // callable
  std::string language;  // required, e.g. "cuda", "python", "triton"
  std::string path, symbol, interface;
  // support (deduplicated and sorted when digested)
  std::vector<std::string> hardware_architectures, dtypes, products_tested, axes, layouts;
  // source (optional: only when content_digest is set)
  std::string source_content_digest, source_file_name;
  std::optional<int64_t> source_size_bytes;
  // licensing
  std::string license_declared, license_concluded;
  nlohmann::json extra = nlohmann::json::object();
};
Manifest to_manifest(const ImplementationRevisionModel& m);

// ---- BenchmarkProtocol
struct BenchmarkProtocolModel {
  Metadata metadata;
  std::string harness_name, harness_version, harness_repository, harness_commit;
  std::string timer;  // e.g. "cupti_activity", "device_events", "harness_reported"
  std::string synchronization;
  std::optional<bool> compile_included, setup_included;
  std::optional<int64_t> warmup_iterations, measured_iterations, samples;
  std::string input_regeneration, outlier_policy;
  std::string primary_statistic;  // e.g. "median", "mean"
  std::string correctness_reference, correctness_comparator;  // both or neither
  std::optional<bool> clocks_locked, persistence_mode;
  std::optional<double> power_limit_watts;
  std::string comparability_family, comparability_notes;
  nlohmann::json extra = nlohmann::json::object();
};
Manifest to_manifest(const BenchmarkProtocolModel& m);

// ---- ExecutionEnvironment
struct ExecutionEnvironmentModel {
  Metadata metadata;
  std::string vendor = "nvidia", product, architecture;  // product "NVIDIA H200", architecture "sm_90"
  std::string form_factor, interconnect;
  std::optional<int64_t> memory_bytes, count;
  std::string operating_system, kernel, driver, cuda_toolkit, compiler;
  std::string framework_name, framework_version;  // both or neither
  std::map<std::string, std::string> libraries;
  std::optional<bool> clocks_locked, persistence_mode, ecc_enabled;
  std::optional<double> power_limit_watts;
  std::map<std::string, std::string> environment_variables;
  nlohmann::json extra = nlohmann::json::object();
};
Manifest to_manifest(const ExecutionEnvironmentModel& m);

// ---- BenchmarkRun
struct LatencyNs {
  std::optional<int64_t> median, mean, p05, p95, minimum, maximum, mad;
  std::optional<std::pair<int64_t, int64_t>> confidence95;
};
struct RunMeasurement {
  std::string metric, unit, statistic;
  double value = 0;
  std::optional<int64_t> sample_count;
};
struct BenchmarkRunModel {
  Metadata metadata;
  std::string implementation_digest, workload_digest, protocol_digest, environment_digest;
  std::string status = "passed";  // passed | incorrect_numerical | runtime_error | timeout | resource_exceeded | ...
  // correctness (optional: only when comparator is set)
  std::string comparator;
  std::optional<double> maximum_absolute_error, maximum_relative_error, matched_ratio;
  // timing (optional: only when primary_statistic is set)
  std::string primary_statistic;
  std::optional<int64_t> samples;
  LatencyNs latency_ns;
  std::string raw_samples_uri, raw_samples_digest;
  std::vector<RunMeasurement> measurements;
  // sourceNative (optional: only when source is set)
  std::string source, benchmark, external_id;
  std::map<std::string, double> source_metrics;
  std::string observed_at;  // RFC 3339 UTC, e.g. "2026-12-02T10:00:00Z" or with milliseconds
  nlohmann::json extra = nlohmann::json::object();
};
Manifest to_manifest(const BenchmarkRunModel& m);

// The current time as KernelIndex writes observedAt: "YYYY-MM-DDTHH:MM:SS.mmmZ".
std::string utc_timestamp_now();
// `now`, or where that does not sort after `earlier` (a date-time utc_instant reads) as text, the first millisecond
// after `earlier` whose text does: the stamp of an event that a text ORDER BY must put after `earlier`'s. `now` where
// `earlier` is not a date-time.
std::string utc_timestamp_after(const std::string& earlier, const std::string& now);
// An ISO-8601 date-time as the UTC instant KernelIndex stores ("2026-12-03T08:51:59.947Z": milliseconds, fraction
// truncated). A zone (Z or +HH:MM / -HH:MM) is applied; a time without one is UTC: FlashInfer-Bench and
// SOL-ExecBench write naive `datetime.now().isoformat()` strings, and KernelIndex's importers read them as UTC.
// Anything else is kindex::Error(where, field, text).
std::string utc_instant(std::string_view text, const std::string& where, const std::string& field);

}  // namespace kindex::evidence
