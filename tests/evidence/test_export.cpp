// The KernelIndex export slice: every digest column recomputes from the stored manifests; the comparison-key
// formulas; the streaming reader's handling of damaged files; and the manifest model writers use.
#include <gtest/gtest.h>

#include <zstd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "core/error.hpp"
#include "evidence/digest.hpp"
#include "evidence/export.hpp"
#include "evidence/keys.hpp"
#include "evidence/manifest.hpp"
#include "evidence/reader.hpp"
#include "support/paths.hpp"

using namespace kindex::evidence;
using nlohmann::json;

namespace {

std::string slice_path() { return kindex::test::data_dir() + "/kernelindex/export-slice-gqa.jsonl.zst"; }
std::string examples_dir() { return kindex::test::data_dir() + "/kernelindex/examples"; }

const ExportData& slice() {
  static const ExportData data = read_export(slice_path());
  return data;
}

const json& row_with(const std::string& table, const std::string& column, const std::string& value) {
  for (const auto& row : slice().rows(table))
    if (row.contains(column) && row[column] == value) return row;
  throw std::runtime_error(table + " has no row with " + column + " = " + value);
}

std::string temp_file(const std::string& name, const std::string& bytes) {
  const auto path = std::filesystem::temp_directory_path() / ("kindex-evidence-" + std::to_string(::getpid()) + "-" + name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path.string();
}

std::string compress(const std::string& text) {
  std::string out(ZSTD_compressBound(text.size()), '\0');
  out.resize(ZSTD_compress(out.data(), out.size(), text.data(), text.size(), 3));
  return out;
}

}  // namespace

TEST(Export, SliceHasEveryTable) {
  const std::map<std::string, std::size_t> expected = {
      {"sources", 3},         {"projects", 4},          {"operations", 22},     {"operation_aliases", 22},
      {"workloads", 357},     {"implementations", 21},  {"benchmark_runs", 347}, {"measurements", 305},
      {"record_events", 301}};
  for (const auto& [table, count] : expected) EXPECT_EQ(slice().rows(table).size(), count) << table;
}

TEST(Export, EveryDigestColumnOfTheSliceRecomputes) {
  const VerifyReport report = verify_export(slice());
  for (const auto& m : report.mismatches) ADD_FAILURE() << m;
  EXPECT_TRUE(report.ok());
  const std::map<std::string, std::size_t> expected = {
      {"semanticDigest", 22},  {"workloadDigest", 357}, {"implementationDigest", 21}, {"runDigest", 347},
      {"protocolKey", 347},    {"environmentKey", 347}, {"correctnessKey", 347},      {"comparisonKey", 347},
      {"record_events.comparisonKey", 301}};
  for (const auto& [column, count] : expected) {
    EXPECT_EQ(report.columns.at(column).matched, count) << column;
    EXPECT_EQ(report.columns.at(column).mismatched, 0u) << column;
  }
}

TEST(Export, VerifyCatchesATamperedManifest) {
  ExportData data = slice();
  data.tables["benchmark_runs"][0]["manifest"]["run"]["spec"]["timing"]["latencyNs"]["mean"] = 1;
  // The workload of the second run: its digest, and every key derived from its correctness, must now differ.
  const json workload_id = data.tables["benchmark_runs"][1]["workloadId"];
  for (auto& w : data.tables["workloads"])
    if (w["id"] == workload_id) w["manifest"]["spec"]["correctness"]["comparator"] = "other";
  const VerifyReport report = verify_export(data);
  EXPECT_FALSE(report.ok());
  EXPECT_EQ(report.columns.at("runDigest").mismatched, 1u);
  EXPECT_EQ(report.columns.at("workloadDigest").mismatched, 1u);
  EXPECT_GE(report.columns.at("correctnessKey").mismatched, 1u);
}

TEST(Keys, FormulasReproduceSeedPages) {
  // Seed 000: its workload (from the slice) with the page's protocol and environment gives the comparison key
  // the page shows (sha256:86e45cd23a2bac91...).
  const json& workload =
      row_with("workloads", "workloadDigest", "sha256:b202770dbc9e039017589225cffdcf381fb83238e7a24c43d1ba8457beb4b1a5");
  const json& operation = row_with("operations", "id", workload["operationId"].get<std::string>());
  ComparisonParts parts;
  parts.operation = manifest_digest(operation["manifest"]);
  parts.workload = manifest_digest(workload["manifest"]);
  parts.protocol = "sha256:7d44d206ad086b4bece35ce31f6531ebb11f07e0d9dcfb74c75be86d3ec02095";
  parts.environment = "sha256:af7cb68a0bb0eb9671092a620668c2600f0431301fc46a71807ea75fb7de8bce";
  parts.correctness = correctness_key(workload["manifest"]["spec"]["correctness"]);
  parts.metric = run_metric_key(json{{"spec", {{"timing", {{"primaryStatistic", "mean"}, {"latencyNs", {{"mean", 1}}}}}}}});
  EXPECT_EQ(comparison_key(parts).substr(0, 23), "sha256:86e45cd23a2bac91");
  // Seed 004's comparison key appears in the slice's record events.
  EXPECT_NO_THROW(row_with("record_events", "comparisonKey",
                           "sha256:82454b3ed3c2b93f67f68d9e6f5e694161039492c2390b29424366990e764ace"));
  EXPECT_EQ(metric_key(std::nullopt), "none");
  EXPECT_EQ(run_metric_key(json{{"spec", {{"status", "runtime_error"}}}}), "none");
  EXPECT_EQ(correctness_key(json{{"comparator", "sol_execbench_eval"}}),
            sha256_digest(json::parse(R"({"correctness":{"comparator":"sol_execbench_eval"}})")));
}

TEST(Export, DamagedFilesGiveErrorsNotCrashes) {
  std::string text;
  {
    int n = 0;
    for_each_export_line(slice_path(), [&](std::string_view line, std::size_t) {
      if (n++ < 40) text += std::string(line) + "\n";
    });
  }
  const std::string whole = compress(text);
  EXPECT_EQ(read_export(temp_file("ok.jsonl.zst", whole)).tables.size(), read_export(temp_file("ok.jsonl", text)).tables.size());
  const auto error_of = [](const std::string& path) {
    try {
      read_export(path);
    } catch (const kindex::Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error_of(temp_file("cut.jsonl.zst", whole.substr(0, whole.size() / 2))).find("zstd"), std::string::npos);
  std::string corrupt = whole;
  for (std::size_t i = 20; i < corrupt.size(); i += 7) corrupt[i] = static_cast<char>(corrupt[i] ^ 0x5a);
  EXPECT_FALSE(error_of(temp_file("corrupt.jsonl.zst", corrupt)).empty());
  const std::string bad_line = error_of(temp_file("bad.jsonl", "{\"table\":\"sources\",\"row\":{}}\n{\"table\":\"nope\",\"row\":7}\n"));
  EXPECT_NE(bad_line.find(":2"), std::string::npos) << bad_line;
  EXPECT_NE(bad_line.find("not an object"), std::string::npos) << bad_line;
  EXPECT_THROW(parse_export_line("{\"table\":\"sources\",\"row\":[]}", "x"), kindex::Error);
  EXPECT_THROW(parse_export_line("{\"table\":\"sources\",\"row\":{},\"extra\":1}", "x"), kindex::Error);
  EXPECT_THROW(parse_export_line("{\"table\":\"sources\",\"table\":\"sources\",\"row\":{}}", "x"), kindex::Error);
  EXPECT_FALSE(error_of("/nonexistent.jsonl.zst").empty());
}

TEST(ManifestModel, StructsReproduceTheExampleDigests) {
  OperationSpecModel op;
  op.metadata.name = "rmsnorm-h4096";
  op.family = "rmsnorm";
  op.axes = {{"tokens", "variable", std::nullopt, 1, std::nullopt, ""}, {"hidden", "constant", 4096, {}, {}, ""}};
  op.inputs = {{"input", {"tokens", "hidden"}, "bf16", "row_major", false},
               {"weight", {"hidden"}, "bf16", "contiguous", false},
               {"epsilon", {}, "fp32", "", true}};
  op.outputs = {{"output", {"tokens", "hidden"}, "bf16", "row_major", false}};
  op.expression = "output = cast_bf16(input * rsqrt(mean(cast_fp32(input)^2, axis=-1) + epsilon) * weight)";
  op.determinism = "deterministic";
  EXPECT_EQ(to_manifest(op).digest, "sha256:7a3b25630f0628b21ed74b6adb588d28f7e29191f9038bed6f56ed393deefb5b");

  WorkloadCaseModel wl;
  wl.metadata.name = "rmsnorm-h4096-tokens-2048";
  wl.operation_spec_digest = "sha256:7a3b25630f0628b21ed74b6adb588d28f7e29191f9038bed6f56ed393deefb5b";
  wl.axes = {{"tokens", 2048}, {"hidden", 4096}};
  wl.tensors = {{"input", {2048, 4096}, "bf16", {4096, 1}, "normal", 230485, {{"mean", 0.0}, {"stddev", 1.0}}},
                {"weight", {4096}, "bf16", {1}, "normal", 230486, {{"mean", 1.0}, {"stddev", 0.1}}}};
  wl.scalars = {{"epsilon", "fp32", 0.000001}};
  wl.correctness = {"elementwise_close", 0.01, 0.01, 0.99, "reject", "exact_match"};
  // alignmentBytes is not modelled: it goes through the spec of a hand-edited document instead.
  json doc = to_manifest(wl).document;
  for (const char* t : {"input", "weight"}) doc["spec"]["tensors"][t]["alignmentBytes"] = 16;
  EXPECT_EQ(make_manifest(doc).digest, "sha256:944ceb3a7d7d4a4c47f1f8ed239363f4be78a2a90293b4325fb18a274cf97aa3");

  ImplementationRevisionModel impl;
  impl.metadata.name = "meridian-rmsnorm";
  impl.repository = "https://example.invalid/meridian/kernels";
  impl.commit = "b81d40e0b81d40e0b81d40e0b81d40e0b81d40e0";
  impl.operation_spec_digest = "sha256:7a3b25630f0628b21ed74b6adb588d28f7e29191f9038bed6f56ed393deefb5b";
  impl.language = "triton";
  impl.path = "kernels/rmsnorm.py";
  impl.symbol = "rmsnorm";
  impl.interface = "pytorch";
  impl.hardware_architectures = {"sm_100"};
  impl.products_tested = {"NVIDIA B200 SXM"};
  impl.axes = {"tokens >= 1", "hidden == 4096"};
  impl.dtypes = {"bf16", "bf16"};
  impl.layouts = {"row_major"};
  impl.source_content_digest = "sha256:1f2a5b8c1f2a5b8c1f2a5b8c1f2a5b8c1f2a5b8c1f2a5b8c1f2a5b8c1f2a5b8c";
  impl.source_file_name = "kernels/rmsnorm.py";
  impl.source_size_bytes = 4821;
  impl.license_declared = impl.license_concluded = "Apache-2.0";
  impl.extra = json::parse(R"({"buildVariants":[{"name":"source","install":{"kind":"git",
      "repository":"https://example.invalid/meridian/kernels","commit":"b81d40e0b81d40e0b81d40e0b81d40e0b81d40e0"},
      "requirements":{"python":">=3.12,<3.14","torch":">=2.8,<2.10"}}]})");
  json licensing_evidence = {{"path", "LICENSE"}};
  Manifest m = to_manifest(impl);
  json impl_doc = m.document;
  impl_doc["spec"]["licensing"]["evidence"] = licensing_evidence;
  EXPECT_EQ(make_manifest(impl_doc).digest, "sha256:c560b43111f315d75a81c1cf194c827b1c294110fe5b20ad2d4467c09c24809e");
  EXPECT_EQ(m.document["spec"]["support"]["dtypes"], json::array({"bf16"}));  // stored normalised

  BenchmarkProtocolModel protocol;
  protocol.metadata.name = "flashinfer-bench-trace";
  protocol.harness_name = "flashinfer-bench";
  protocol.harness_repository = "https://github.com/flashinfer-ai/flashinfer-bench";
  protocol.timer = "harness_reported";
  protocol.primary_statistic = "mean";
  protocol.correctness_reference = "definition reference implementation";
  protocol.correctness_comparator = "flashinfer_bench_eval";
  protocol.comparability_family = "flashinfer_bench_trace";
  EXPECT_EQ(to_manifest(protocol).digest, "sha256:7d44d206ad086b4bece35ce31f6531ebb11f07e0d9dcfb74c75be86d3ec02095");

  ExecutionEnvironmentModel env;
  env.metadata.name = "example-b200-sxm";
  env.product = "NVIDIA B200 SXM";
  env.architecture = "sm_100";
  env.memory_bytes = 206158430208;
  env.count = 1;
  env.operating_system = "Ubuntu 24.04";
  env.driver = "580.00";
  env.cuda_toolkit = "13.1";
  env.framework_name = "pytorch";
  env.framework_version = "2.9";
  env.clocks_locked = env.persistence_mode = true;
  EXPECT_EQ(to_manifest(env).digest, "sha256:46cf7b24b586c71505152d0103b9e84101de1ac5b66cdd76aabc88356e93db79");

  // The example run, rebuilt, gives the digest of the example file.
  BenchmarkRunModel run;
  run.metadata.name = "example-meridian-rmsnorm-b200";
  run.implementation_digest = "sha256:c560b43111f315d75a81c1cf194c827b1c294110fe5b20ad2d4467c09c24809e";
  run.workload_digest = "sha256:944ceb3a7d7d4a4c47f1f8ed239363f4be78a2a90293b4325fb18a274cf97aa3";
  run.protocol_digest = "sha256:6ac212f99724757d058e7a7f440314debd2fed235c5178bc006b62c0d5e0d295";
  run.environment_digest = "sha256:46cf7b24b586c71505152d0103b9e84101de1ac5b66cdd76aabc88356e93db79";
  run.comparator = "elementwise_close";
  run.maximum_absolute_error = 0.0042;
  run.maximum_relative_error = 0.0081;
  run.matched_ratio = 1.0;
  run.primary_statistic = "median";
  run.samples = 200;
  run.latency_ns = {8120, std::nullopt, 8072, 8151, 8054, 8390, 24, std::make_pair(int64_t{8095}, int64_t{8151})};
  run.observed_at = "2026-08-01T12:00:00Z";
  EXPECT_EQ(to_manifest(run).digest, manifest_digest(read_manifest_file(examples_dir() + "/benchmark-run.yaml")));
}

TEST(ManifestModel, InvalidModelsAreRefused) {
  ExecutionEnvironmentModel env;
  env.metadata.name = "Not Valid";
  env.product = "NVIDIA H200";
  env.architecture = "sm_90";
  try {
    to_manifest(env);
    FAIL() << "expected a kindex::Error";
  } catch (const kindex::Error& e) {
    EXPECT_EQ(e.field(), "/metadata/name");
    EXPECT_NE(std::string(e.what()).find("pattern"), std::string::npos);
  }
  BenchmarkRunModel run;
  run.metadata.name = "r";
  run.observed_at = utc_timestamp_now();
  EXPECT_THROW(to_manifest(run), kindex::Error);  // digests missing
  run.implementation_digest = run.workload_digest = run.protocol_digest = run.environment_digest =
      "sha256:" + std::string(64, 'a');
  EXPECT_NO_THROW(to_manifest(run));
  run.extra = {{"status", "passed"}};
  EXPECT_THROW(to_manifest(run), kindex::Error);  // set twice
}

namespace {

std::string every_table_path() { return kindex::test::data_dir() + "/kernelindex/export-every-table.jsonl"; }

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

}  // namespace

TEST(Export, EveryTableAndMetricKindOfTheExportVerifies) {
  const ExportData data = read_export(every_table_path());
  for (const auto& table : kExportTables) EXPECT_FALSE(data.rows(table).empty()) << table;
  const VerifyReport report = verify_export(data);
  for (const auto& m : report.mismatches) ADD_FAILURE() << m;
  EXPECT_EQ(report.columns.at("comparisonKey").matched, 4u);
  EXPECT_EQ(report.columns.at("record_events.comparisonKey").matched, 3u);
  EXPECT_EQ(report.columns.at("measurements.value").matched, 6u);
  EXPECT_EQ(report.columns.at("serving_runs.runDigest").matched, 2u);
  EXPECT_EQ(report.columns.at("serving_runs.totalAccelerators").matched, 2u);
  EXPECT_EQ(report.columns.at("serving_measurements.value").matched, 3u);
  EXPECT_EQ(report.columns.at("artifacts.contentDigest").matched, 2u);
  EXPECT_EQ(report.columns.at("artifacts.sizeBytes").matched, 2u);
  // The metric part of each cohort follows the run's primary measurement.
  std::multiset<std::string> metrics;
  for (const auto& row : data.rows("benchmark_runs")) metrics.insert(run_metric_key(row["manifest"]["run"]));
  EXPECT_EQ(metrics, (std::multiset<std::string>{"score:geomean:s", "score:geomean:s", "latency:median:ns", "none"}));
}

TEST(Export, PrimaryMeasurementIsDerivedAsKernelIndexPublishes) {
  const auto primary = [](json spec) { return run_primary(json{{"spec", std::move(spec)}}); };
  auto p = primary({{"timing", {{"primaryStatistic", "mean"}, {"samples", 50}, {"latencyNs", {{"median", 7}}}}}});
  ASSERT_TRUE(p);  // "mean" without a mean falls back to the median
  EXPECT_EQ(p->value, 7);
  EXPECT_EQ(p->sample_count, 50);
  p = primary({{"timing", {{"primaryStatistic", "p05"}, {"latencyNs", {{"median", 9}, {"p05", 5}}}}}});
  EXPECT_EQ(metric_key(p), "latency:p05:ns");
  EXPECT_EQ(p->value, 9);  // any statistic but "mean" states the median
  p = primary({{"measurements", {{{"metric", "score"}, {"unit", "s"}, {"statistic", "geomean"}, {"value", 0.5}}}}});
  EXPECT_EQ(metric_key(p), "score:geomean:s");
  EXPECT_EQ(p->value, 0.5);
  EXPECT_FALSE(primary({{"status", "timeout"}}));
}

TEST(Export, UnknownTableIsSkippedWithAWarningNotRefused) {
  const std::string path = temp_file("future.jsonl", read_text(every_table_path()) +
                                                         "{\"table\":\"run_artifacts\",\"row\":{\"role\":\"source\"}}\n");
  const VerifyReport report = verify_export(path);
  EXPECT_TRUE(report.ok());
  EXPECT_EQ(report.skipped_tables.at("run_artifacts"), 1u);
  EXPECT_EQ(report.row_counts.count("run_artifacts"), 0u);
}

TEST(Export, StatedValuesThatDisagreeWithTheManifestAreMismatches) {
  ExportData data = read_export(every_table_path());
  for (auto& row : data.tables["benchmark_runs"])
    if (row["primaryMetric"] == "latency") row["primaryValue"] = 1000;
  data.tables["measurements"][0]["value"] = 0.125;
  const VerifyReport report = verify_export(data);
  EXPECT_EQ(report.columns.at("benchmark_runs.primaryValue").mismatched, 1u);
  EXPECT_EQ(report.columns.at("measurements.value").mismatched, 1u);
  bool named = false;
  for (const auto& m : report.mismatches) named = named || (m.find("primaryValue: stated 1000") != std::string::npos &&
                                                            m.find("348254") != std::string::npos);
  EXPECT_TRUE(named);
}

// A store's record events are ordered by their stamps as text: an event written in the same millisecond as the last
// one (or with the clock behind it) is stamped after it, in a text that also sorts after it.
TEST(Export, UtcTimestampAfterSortsAfterTheEarlierStamp) {
  EXPECT_EQ(utc_timestamp_after("2026-12-04T10:00:00.100Z", "2026-12-04T10:00:00.250Z"), "2026-12-04T10:00:00.250Z");
  EXPECT_EQ(utc_timestamp_after("2026-12-04T10:00:00.250Z", "2026-12-04T10:00:00.250Z"), "2026-12-04T10:00:00.251Z");
  EXPECT_EQ(utc_timestamp_after("2026-12-04T10:00:00.250Z", "2026-12-04T09:59:59.000Z"), "2026-12-04T10:00:00.251Z");
  EXPECT_EQ(utc_timestamp_after("2026-12-31T23:59:59.999Z", "2026-12-31T23:59:59.999Z"), "2027-01-01T00:00:00.000Z");
  // Another form of the same instant: "...:00Z" sorts after "...:00.001Z", so the next whole second.
  EXPECT_EQ(utc_timestamp_after("2026-12-04T10:00:00Z", "2026-12-04T10:00:00.000Z"), "2026-12-04T10:00:01.000Z");
  EXPECT_EQ(utc_timestamp_after("not a time", "2026-12-04T10:00:00.000Z"), "2026-12-04T10:00:00.000Z");
}

TEST(Export, UtcInstantReadsZonelessHarnessTimestampsAsUtc) {
  EXPECT_EQ(utc_instant("2026-12-03T08:51:59.947655", "t", "timestamp"), "2026-12-03T08:51:59.947Z");
  EXPECT_EQ(utc_instant("2026-12-03T08:51:59Z", "t", "timestamp"), "2026-12-03T08:51:59.000Z");
  EXPECT_EQ(utc_instant("2026-12-03T23:30:00.5+02:00", "t", "timestamp"), "2026-12-03T21:30:00.500Z");
  EXPECT_EQ(utc_instant("2026-12-31T23:30:00-01:00", "t", "timestamp"), "2027-01-01T00:30:00.000Z");
  for (const char* bad : {"", "2026-12-03", "2026-13-03T00:00:00", "2026-02-30T00:00:00", "2026-12-03T08:51:59.Z",
                          "2026-12-03T08:51:59+0200", "yesterday"})
    EXPECT_THROW(utc_instant(bad, "t", "timestamp"), kindex::Error) << bad;
}
