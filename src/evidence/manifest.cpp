#include "evidence/manifest.hpp"

#include <chrono>
#include <ctime>

#include "core/error.hpp"
#include "evidence/digest.hpp"
#include "evidence/schema.hpp"

namespace kindex::evidence {
namespace {

using nlohmann::json;

// Optional fields: empty strings, empty containers and unset optionals are omitted from the manifest.
void put(json& o, const char* key, const std::string& v) {
  if (!v.empty()) o[key] = v;
}
template <class T>
void put(json& o, const char* key, const std::optional<T>& v) {
  if (v) o[key] = *v;
}
template <class T>
void put(json& o, const char* key, const std::vector<T>& v) {
  if (!v.empty()) o[key] = v;
}
template <class K, class V>
void put(json& o, const char* key, const std::map<K, V>& v) {
  if (!v.empty()) o[key] = v;
}
void put(json& o, const char* key, json v) {
  if (!(v.is_object() && v.empty())) o[key] = std::move(v);
}

json metadata_json(const Metadata& m) {
  json o = json::object();
  o["name"] = m.name;
  put(o, "title", m.title);
  put(o, "description", m.description);
  put(o, "labels", m.labels);
  if (!m.author_names.empty()) {
    o["authors"] = json::array();
    for (const auto& name : m.author_names) o["authors"].push_back({{"name", name}});
  }
  if (!m.source_urls.empty()) {
    o["sourceRefs"] = json::array();
    for (const auto& url : m.source_urls) o["sourceRefs"].push_back({{"url", url}});
  }
  return o;
}

// Adds the writer's extra spec fields; a field the model already set is a programming error worth reporting.
json with_extra(json spec, const json& extra, const std::string& kind) {
  for (const auto& [key, value] : extra.items()) {
    if (spec.contains(key)) throw Error(kind, "/spec/" + key, "", "set both by the model and by extra");
    spec[key] = value;
  }
  return spec;
}

json operation_tensor_json(const OperationTensor& t) {
  json o = {{"name", t.name}};
  if (t.scalar) {
    o["scalar"] = {{"dtype", t.dtype}};
    return o;
  }
  json shape = json::array();
  for (const auto& dim : t.shape) std::visit([&](const auto& d) { shape.push_back(d); }, dim);
  json tensor = {{"shape", shape}, {"dtype", t.dtype}};
  put(tensor, "layout", t.layout);
  o["tensor"] = tensor;
  return o;
}

json correctness_json(const Correctness& c) {
  json o = {{"comparator", c.comparator}};
  put(o, "maxAbsoluteError", c.max_absolute_error);
  put(o, "maxRelativeError", c.max_relative_error);
  put(o, "requiredMatchedRatio", c.required_matched_ratio);
  put(o, "nanPolicy", c.nan_policy);
  put(o, "infinityPolicy", c.infinity_policy);
  return o;
}

}  // namespace

std::string clip_text(std::string_view utf8, size_t max_chars) {
  if (max_chars == 0) return {};
  // Characters are counted at their first byte (a continuation byte is 10xxxxxx).
  size_t chars = 0, cut = utf8.size(), keep = 0;
  for (size_t i = 0; i < utf8.size(); ++i) {
    if ((static_cast<unsigned char>(utf8[i]) & 0xC0) == 0x80) continue;
    if (chars == max_chars - 1) keep = i;  // where "…" goes if the text is too long
    if (chars == max_chars) {
      cut = i;
      break;
    }
    ++chars;
  }
  if (cut == utf8.size()) return std::string(utf8);
  return std::string(utf8.substr(0, keep)) + "\u2026";
}

Manifest make_manifest(json document, const std::string& where) {
  Manifest m;
  m.document = validate_manifest(document, where);  // normalised
  m.digest = normalized_manifest_digest(m.document, where);
  return m;
}

Manifest make_manifest(const std::string& kind, const Metadata& metadata, json spec, const std::string& where) {
  return make_manifest(json{{"apiVersion", kApiVersion}, {"kind", kind}, {"metadata", metadata_json(metadata)},
                            {"spec", std::move(spec)}},
                       where);
}

Manifest to_manifest(const OperationSpecModel& m) {
  json spec = json::object();
  spec["family"] = m.family;
  spec["axes"] = json::object();
  for (const auto& a : m.axes) {
    json axis = {{"role", a.role}, {"type", "integer"}};
    put(axis, "value", a.value);
    put(axis, "minimum", a.minimum);
    put(axis, "maximum", a.maximum);
    put(axis, "expression", a.expression);
    spec["axes"][a.name] = axis;
  }
  spec["inputs"] = json::array();
  for (const auto& t : m.inputs) spec["inputs"].push_back(operation_tensor_json(t));
  spec["outputs"] = json::array();
  for (const auto& t : m.outputs) spec["outputs"].push_back(operation_tensor_json(t));
  json semantics = {{"mutation", m.mutation}, {"determinism", m.determinism}};
  put(semantics, "expression", m.expression);
  spec["semantics"] = semantics;
  return make_manifest("OperationSpec", m.metadata, with_extra(spec, m.extra, "OperationSpec"), "OperationSpec " + m.metadata.name);
}

Manifest to_manifest(const WorkloadCaseModel& m) {
  json spec = json::object();
  spec["operationSpecDigest"] = m.operation_spec_digest;
  spec["axes"] = m.axes;
  spec["tensors"] = json::object();
  for (const auto& t : m.tensors) {
    json tensor = {{"shape", t.shape}, {"dtype", t.dtype}};
    put(tensor, "strides", t.strides);
    if (!t.generator.empty()) {
      json data = {{"generator", t.generator}};
      put(data, "seed", t.seed);
      put(data, "parameters", t.parameters);
      tensor["data"] = data;
    }
    spec["tensors"][t.name] = tensor;
  }
  if (!m.scalars.empty()) {
    spec["scalars"] = json::object();
    for (const auto& s : m.scalars) spec["scalars"][s.name] = {{"dtype", s.dtype}, {"value", s.value}};
  }
  spec["correctness"] = correctness_json(m.correctness);
  return make_manifest("WorkloadCase", m.metadata, with_extra(spec, m.extra, "WorkloadCase"), "WorkloadCase " + m.metadata.name);
}

Manifest to_manifest(const ImplementationRevisionModel& m) {
  json spec = json::object();
  json project = json::object();
  put(project, "repository", m.repository);
  put(project, "commit", m.commit);
  put(project, "version", m.version);
  spec["projectRevision"] = project;
  spec["operation"] = {{"specDigest", m.operation_spec_digest}};
  json callable = {{"language", m.language}};
  put(callable, "path", m.path);
  put(callable, "symbol", m.symbol);
  put(callable, "interface", m.interface);
  spec["callable"] = callable;
  json support = {{"hardwareArchitectures", m.hardware_architectures}, {"dtypes", m.dtypes}};
  put(support, "productsTested", m.products_tested);
  put(support, "axes", m.axes);
  put(support, "layouts", m.layouts);
  spec["support"] = support;
  if (!m.source_content_digest.empty()) {
    json source = {{"contentDigest", m.source_content_digest}};
    put(source, "fileName", m.source_file_name);
    put(source, "sizeBytes", m.source_size_bytes);
    spec["source"] = source;
  }
  json licensing = json::object();
  put(licensing, "declared", m.license_declared);
  put(licensing, "concluded", m.license_concluded);
  spec["licensing"] = licensing;
  return make_manifest("ImplementationRevision", m.metadata, with_extra(spec, m.extra, "ImplementationRevision"),
                       "ImplementationRevision " + m.metadata.name);
}

Manifest to_manifest(const BenchmarkProtocolModel& m) {
  json spec = json::object();
  json harness = {{"name", m.harness_name}};
  put(harness, "version", m.harness_version);
  put(harness, "repository", m.harness_repository);
  put(harness, "commit", m.harness_commit);
  spec["harness"] = harness;
  json measurement = {{"timer", m.timer}, {"primaryStatistic", m.primary_statistic}};
  put(measurement, "synchronization", m.synchronization);
  put(measurement, "compileIncluded", m.compile_included);
  put(measurement, "setupIncluded", m.setup_included);
  put(measurement, "warmupIterations", m.warmup_iterations);
  put(measurement, "measuredIterations", m.measured_iterations);
  put(measurement, "samples", m.samples);
  put(measurement, "inputRegeneration", m.input_regeneration);
  put(measurement, "outlierPolicy", m.outlier_policy);
  spec["measurement"] = measurement;
  if (!m.correctness_reference.empty() || !m.correctness_comparator.empty())
    spec["correctness"] = {{"reference", m.correctness_reference}, {"comparator", m.correctness_comparator}};
  json device = json::object();
  put(device, "clocksLocked", m.clocks_locked);
  put(device, "powerLimitWatts", m.power_limit_watts);
  put(device, "persistenceMode", m.persistence_mode);
  put(spec, "devicePolicy", device);
  if (!m.comparability_family.empty()) {
    json comparability = {{"family", m.comparability_family}};
    put(comparability, "notes", m.comparability_notes);
    spec["comparability"] = comparability;
  }
  return make_manifest("BenchmarkProtocol", m.metadata, with_extra(spec, m.extra, "BenchmarkProtocol"),
                       "BenchmarkProtocol " + m.metadata.name);
}

Manifest to_manifest(const ExecutionEnvironmentModel& m) {
  json spec = json::object();
  json hardware = {{"vendor", m.vendor}, {"product", m.product}, {"architecture", m.architecture}};
  put(hardware, "formFactor", m.form_factor);
  put(hardware, "memoryBytes", m.memory_bytes);
  put(hardware, "count", m.count);
  put(hardware, "interconnect", m.interconnect);
  spec["hardware"] = hardware;
  json software = json::object();
  put(software, "operatingSystem", m.operating_system);
  put(software, "kernel", m.kernel);
  put(software, "driver", m.driver);
  put(software, "cudaToolkit", m.cuda_toolkit);
  put(software, "compiler", m.compiler);
  if (!m.framework_name.empty() || !m.framework_version.empty())
    software["framework"] = {{"name", m.framework_name}, {"version", m.framework_version}};
  put(software, "libraries", m.libraries);
  spec["software"] = software;
  json settings = json::object();
  put(settings, "clocksLocked", m.clocks_locked);
  put(settings, "powerLimitWatts", m.power_limit_watts);
  put(settings, "persistenceMode", m.persistence_mode);
  put(settings, "eccEnabled", m.ecc_enabled);
  put(settings, "environmentVariables", m.environment_variables);
  put(spec, "settings", settings);
  return make_manifest("ExecutionEnvironment", m.metadata, with_extra(spec, m.extra, "ExecutionEnvironment"),
                       "ExecutionEnvironment " + m.metadata.name);
}

Manifest to_manifest(const BenchmarkRunModel& m) {
  json spec = json::object();
  spec["implementationDigest"] = m.implementation_digest;
  spec["workloadDigest"] = m.workload_digest;
  spec["protocolDigest"] = m.protocol_digest;
  spec["environmentDigest"] = m.environment_digest;
  spec["status"] = m.status;
  if (!m.comparator.empty()) {
    json correctness = {{"comparator", m.comparator}};
    put(correctness, "maximumAbsoluteError", m.maximum_absolute_error);
    put(correctness, "maximumRelativeError", m.maximum_relative_error);
    put(correctness, "matchedRatio", m.matched_ratio);
    spec["correctness"] = correctness;
  }
  if (!m.primary_statistic.empty()) {
    const LatencyNs& l = m.latency_ns;
    json latency = json::object();
    put(latency, "median", l.median);
    put(latency, "mean", l.mean);
    put(latency, "p05", l.p05);
    put(latency, "p95", l.p95);
    put(latency, "minimum", l.minimum);
    put(latency, "maximum", l.maximum);
    put(latency, "mad", l.mad);
    if (l.confidence95) latency["confidence95"] = {l.confidence95->first, l.confidence95->second};
    json timing = {{"primaryStatistic", m.primary_statistic}, {"latencyNs", latency}};
    put(timing, "samples", m.samples);
    if (!m.raw_samples_uri.empty() || !m.raw_samples_digest.empty())
      timing["rawSamples"] = {{"uri", m.raw_samples_uri}, {"digest", m.raw_samples_digest}};
    spec["timing"] = timing;
  }
  if (!m.measurements.empty()) {
    spec["measurements"] = json::array();
    for (const auto& x : m.measurements) {
      json o = {{"metric", x.metric}, {"unit", x.unit}, {"statistic", x.statistic}, {"value", x.value}};
      put(o, "sampleCount", x.sample_count);
      spec["measurements"].push_back(o);
    }
  }
  if (!m.source.empty()) {
    json native = {{"source", m.source}};
    put(native, "benchmark", m.benchmark);
    put(native, "externalId", m.external_id);
    put(native, "metrics", m.source_metrics);
    spec["sourceNative"] = native;
  }
  spec["observedAt"] = m.observed_at;
  return make_manifest("BenchmarkRun", m.metadata, with_extra(spec, m.extra, "BenchmarkRun"), "BenchmarkRun " + m.metadata.name);
}

namespace {

std::string format_utc(std::time_t t, int millis) {
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, millis);
  return buf;
}

// An ISO-8601 date-time as a UTC instant: seconds since the epoch and milliseconds (utc_instant's reading).
struct UtcInstant {
  std::time_t seconds;
  int millis;
};

UtcInstant parse_utc(std::string_view text, const std::string& where, const std::string& field) {
  const auto fail = [&]() -> UtcInstant {
    throw Error(where, field, std::string(text.substr(0, 80)),
                "not an ISO-8601 date-time (YYYY-MM-DDTHH:MM[:SS[.fff]][Z|+HH:MM])");
  };
  std::size_t i = 0;
  const auto digits = [&](std::size_t n, int& out) {
    if (i + n > text.size()) return false;
    out = 0;
    for (std::size_t k = 0; k < n; ++k) {
      const char c = text[i + k];
      if (c < '0' || c > '9') return false;
      out = out * 10 + (c - '0');
    }
    i += n;
    return true;
  };
  const auto expect = [&](char c) {
    if (i >= text.size() || text[i] != c) return false;
    ++i;
    return true;
  };
  int year, month, day, hour, minute, second = 0, millis = 0;
  if (!digits(4, year) || !expect('-') || !digits(2, month) || !expect('-') || !digits(2, day)) return fail();
  if (i >= text.size() || (text[i] != 'T' && text[i] != 't' && text[i] != ' ')) return fail();
  ++i;
  if (!digits(2, hour) || !expect(':') || !digits(2, minute)) return fail();
  if (i < text.size() && text[i] == ':') {
    ++i;
    if (!digits(2, second)) return fail();
    if (i < text.size() && text[i] == '.') {
      ++i;
      const std::size_t start = i;
      while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
        if (i - start < 3) millis = millis * 10 + (text[i] - '0');
        ++i;
      }
      if (i == start) return fail();
      for (std::size_t k = i - start; k < 3; ++k) millis *= 10;
    }
  }
  int offset_minutes = 0;
  if (i < text.size() && (text[i] == 'Z' || text[i] == 'z')) {
    ++i;
  } else if (i < text.size() && (text[i] == '+' || text[i] == '-')) {
    const int sign = text[i] == '-' ? -1 : 1;
    ++i;
    int oh, om;
    if (!digits(2, oh) || !expect(':') || !digits(2, om) || oh > 23 || om > 59) return fail();
    offset_minutes = sign * (oh * 60 + om);
  }
  if (i != text.size()) return fail();
  static const int days_in[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  if (month < 1 || month > 12 || day < 1 || day > days_in[month - 1] || (month == 2 && day == 29 && !leap) ||
      hour > 23 || minute > 59 || second > 59)
    return fail();
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  return {timegm(&tm) - static_cast<std::time_t>(offset_minutes) * 60, millis};
}


}  // namespace

std::string utc_timestamp_now() {
  const auto now = std::chrono::system_clock::now();
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  return format_utc(std::chrono::system_clock::to_time_t(now), static_cast<int>(ms));
}

std::string utc_timestamp_after(const std::string& earlier, const std::string& now) {
  if (now > earlier) return now;
  UtcInstant t{};
  try {
    t = parse_utc(earlier, "timestamp", "earlier");
  } catch (const Error&) {
    return now;  // not a date-time: nothing to be after
  }
  // A millisecond at a time until the text sorts after too ("...:00Z" sorts after "...:00.001Z"): within a second.
  std::string next;
  do {
    if (++t.millis == 1000) t.millis = 0, ++t.seconds;
    next = format_utc(t.seconds, t.millis);
  } while (next <= earlier);
  return next;
}

std::string utc_instant(std::string_view text, const std::string& where, const std::string& field) {
  const UtcInstant t = parse_utc(text, where, field);
  return format_utc(t.seconds, t.millis);
}

}  // namespace kindex::evidence
