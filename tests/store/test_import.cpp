// Import of the KernelIndex export slice and manifests: digests verified, idempotent, invalid input refused.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "core/error.hpp"
#include "evidence/digest.hpp"
#include "evidence/export.hpp"
#include "store/export.hpp"
#include "store/import.hpp"
#include "store/query.hpp"
#include "store/store.hpp"
#include "support/paths.hpp"

namespace kindex::store {
namespace {

std::string slice() { return test::data_dir() + "/kernelindex/export-slice-gqa.jsonl.zst"; }
std::string examples() { return test::data_dir() + "/kernelindex/examples"; }
std::string every_table() { return test::data_dir() + "/kernelindex/export-every-table.jsonl"; }

// The rows an import inserted, per table, as expected (the tables named; others are not checked).
void expect_inserted(const ImportReport& rep, const std::map<std::string, int64_t>& expected) {
  for (const auto& [table, rows] : expected) {
    ASSERT_EQ(rep.inserted.count(table), 1u) << table;
    EXPECT_EQ(rep.inserted.at(table), rows) << table;
  }
}

std::vector<nlohmann::json> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

std::string write_lines(const std::string& name, const std::vector<nlohmann::json>& lines) {
  std::string path = (std::filesystem::temp_directory_path() / ("kindex-import-" + std::to_string(::getpid()) + "-" + name)).string();
  std::ofstream out(path);
  for (const auto& l : lines) out << l.dump() << "\n";
  return path;
}

// The fixture's latency run on the exact case (its primary is the median, 348254 ns).
nlohmann::json& case_run(std::vector<nlohmann::json>& lines) {
  for (auto& l : lines)
    if (l["table"] == "benchmark_runs" && l["row"]["primaryMetric"] == "latency") return l;
  throw std::runtime_error("fixture has no latency run");
}

TEST(StoreImport, SliceImportsEveryRowAndSecondImportInsertsNothing) {
  auto store = Store::open(":memory:");
  ImportReport first = import_files(*store, {slice()});
  expect_inserted(first, {{"benchmark_runs", 347},
                          {"workloads", 357},
                          {"operations", 22},
                          {"measurements", 305},
                          {"record_events", 301}});
  // The export's own record events already name every cohort's running minimum.
  EXPECT_EQ(first.record_events, 0);
  nlohmann::json counts = store->counts();
  ImportReport second = import_files(*store, {slice()});
  EXPECT_EQ(second.total_inserted(), 0);
  EXPECT_EQ(second.record_events, 0);
  EXPECT_EQ(store->counts(), counts);
  EXPECT_EQ(store->integrity_check(), "ok");
}

// Both KernelIndex export slices (kernel: gqa; serving) import into a fresh store with nothing skipped, nothing
// dropped and no warning: every row line of the export is one inserted row of its table.
TEST(StoreImport, BothSlicesImportEveryRowWithNothingSkipped) {
  for (const std::string name : {"gqa", "serving"}) {
    SCOPED_TRACE(name);
    const std::string path = test::data_dir() + "/kernelindex/export-slice-" + name + ".jsonl.zst";
    std::map<std::string, int64_t> rows;
    evidence::for_each_export_row(path, [&](evidence::ExportRow&& r) { rows[r.table] += 1; });
    ASSERT_FALSE(rows.empty());
    auto store = Store::open(":memory:");
    const ImportReport rep = import_files(*store, {path});
    for (const auto& [table, n] : rep.skipped) EXPECT_EQ(n, 0) << "skipped rows of " << table;
    EXPECT_TRUE(rep.warnings.empty()) << rep.warnings.front();
    EXPECT_EQ(rep.inserted.size(), rows.size());
    for (const auto& [table, n] : rows) EXPECT_EQ(rep.inserted.count(table) ? rep.inserted.at(table) : -1, n) << table;
  }
}

TEST(StoreImport, TamperedDigestIsRefusedNamingTheColumn) {
  namespace fs = std::filesystem;
  auto dir = fs::temp_directory_path() / ("kindex-tamper-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::string out = (dir / "tampered.jsonl").string();
  // Re-export the slice uncompressed, then change one run's latency inside its manifest.
  auto store = Store::open(":memory:");
  import_files(*store, {slice()});
  export_store(*store, out);
  std::ifstream in(out);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  auto pos = text.find("\"latencyNs\":{\"mean\":");
  ASSERT_NE(pos, std::string::npos);
  text.insert(pos + 20, "1");
  std::ofstream(out) << text;
  auto fresh = Store::open(":memory:");
  try {
    import_files(*fresh, {out});
    FAIL() << "tampered export imported";
  } catch (const Error& e) {
    EXPECT_EQ(e.field(), "runDigest") << e.what();
  }
  fs::remove_all(dir);
}

TEST(StoreImport, ExportRoundTripsThroughImport) {
  namespace fs = std::filesystem;
  auto store = Store::open(":memory:");
  import_files(*store, {slice()});
  std::string out = (fs::temp_directory_path() / ("kindex-rt-" + std::to_string(::getpid()) + ".jsonl.zst")).string();
  nlohmann::json counts = export_store(*store, out);
  EXPECT_EQ(counts["benchmark_runs"], 347);
  auto again = Store::open(":memory:");
  ImportReport rep = import_files(*again, {out});
  EXPECT_EQ(rep.inserted.at("benchmark_runs"), 347);
  EXPECT_EQ(again->counts(), store->counts());
  fs::remove(out);
}

TEST(StoreImport, ValidExampleManifestsImportAndTheirRunIsRanked) {
  auto store = Store::open(":memory:");
  ImportReport rep = import_files(*store, {examples()});
  EXPECT_GE(rep.inserted.at("manifests"), 10);
  EXPECT_EQ(rep.inserted.at("benchmark_runs"), 1);
  EXPECT_EQ(import_files(*store, {examples()}).total_inserted(), 0);
}

TEST(StoreImport, InvalidExampleManifestsAreRefusedWithTheirProblem) {
  const std::map<std::string, std::string> expected = {
      {"bad-digest.yaml", "operationSpecDigest"},
      {"ambiguous-duration.yaml", "median"},
      {"unknown-field.yaml", "popularity"},
      {"duplicate-key.yaml", "name"},
  };
  for (const auto& [file, mention] : expected) {
    auto store = Store::open(":memory:");
    std::string path = examples() + "/invalid/" + file;
    try {
      import_files(*store, {path});
      ADD_FAILURE() << file << " was accepted";
    } catch (const Error& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find(file), std::string::npos) << msg;
      EXPECT_NE(msg.find(mention), std::string::npos) << msg;
    }
    EXPECT_EQ(store->counts()["manifests"], 0) << file;
  }
}

TEST(StoreImport, EveryTableAndMetricKindImportsRanksAndReimportsNothing) {
  auto store = Store::open(":memory:");
  ImportReport rep = import_files(*store, {every_table()});
  expect_inserted(rep, {{"artifacts", 2}, {"benchmark_runs", 4}, {"measurements", 6}, {"record_events", 3},
                        {"model_revisions", 1}, {"serving_stack_revisions", 1}, {"serving_configurations", 1},
                        {"serving_workloads", 2}, {"serving_runs", 2}, {"serving_measurements", 3}});
  EXPECT_EQ(rep.record_events, 0);  // the export's events already name each cohort's running minimum
  auto runs = store->db().query("SELECT id, comparison_key, primary_metric, primary_unit FROM benchmark_runs "
                                "WHERE primary_metric = 'score' ORDER BY primary_value");
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].text(3), "s");
  auto cohort = store->cohort(runs[0].text(1));
  ASSERT_EQ(cohort.size(), 2u);
  EXPECT_EQ(cohort[0].id, runs[0].text(0));
  EXPECT_EQ(cohort[1].rank, 2);
  // Public source plus raw samples: reproducible.
  auto latency = store->db().query("SELECT id FROM benchmark_runs WHERE primary_metric = 'latency'");
  ASSERT_EQ(latency.size(), 1u);
  EXPECT_EQ(run_view(*store, latency[0].text(0))["run"]["evidence"], "reproducible");
  nlohmann::json counts = store->counts();
  EXPECT_EQ(import_files(*store, {every_table()}).total_inserted(), 0);
  EXPECT_EQ(store->counts(), counts);
}

TEST(StoreImport, UnknownTablesAndColumnsAreSkippedWithAWarning) {
  auto lines = lines_of(every_table());
  lines.push_back({{"table", "run_artifacts"}, {"row", {{"role", "source"}}}});
  case_run(lines)["row"]["solScore"] = 0.5;  // a projection later KernelIndex exports add to runs
  auto store = Store::open(":memory:");
  ImportReport rep = import_files(*store, {write_lines("future.jsonl", lines)});
  EXPECT_EQ(rep.inserted.at("benchmark_runs"), 4);
  ASSERT_EQ(rep.warnings.size(), 2u);
  EXPECT_NE(rep.warnings[0].find("table 'run_artifacts'"), std::string::npos) << rep.warnings[0];
  EXPECT_NE(rep.warnings[1].find("column 'benchmark_runs.solScore' of 1 rows"), std::string::npos) << rep.warnings[1];
}

TEST(StoreImport, FailedImportLeavesTheStoreExactlyAsItWas) {
  auto lines = lines_of(every_table());
  ASSERT_EQ(lines.back()["table"], "serving_measurements");
  lines.back()["row"]["runId"] = "01a00000-0000-7000-8000-000000000000";  // the last line is refused: no such run
  const std::string bad = write_lines("last-line-bad.jsonl", lines);
  for (bool empty : {true, false}) {
    auto store = Store::open(":memory:");
    if (!empty) import_files(*store, {slice()});
    nlohmann::json before = store->counts();
    EXPECT_THROW(import_files(*store, {bad}), Error);
    EXPECT_EQ(store->counts(), before);
    EXPECT_EQ(store->integrity_check(), "ok");
  }
  // Several files are one import: the second's failure takes back the first.
  auto store = Store::open(":memory:");
  nlohmann::json before = store->counts();
  EXPECT_THROW(import_files(*store, {slice(), bad}), Error);
  EXPECT_EQ(store->counts(), before);
}

// Lines are parsed (and run manifests validated) on a second thread in batches ahead of the checks; the error
// reported is still the first bad line's, wherever the batches fall.
TEST(StoreImport, TheFirstBadLineIsReportedWhicheverBatchHoldsIt) {
  std::vector<std::string> lines;
  evidence::for_each_export_line(slice(), [&](std::string_view text, std::size_t) { lines.emplace_back(text); });
  ASSERT_GT(lines.size(), 1000u);
  size_t run = 0;
  for (size_t i = 700; i < lines.size() && !run; ++i)
    if (nlohmann::json::parse(lines[i])["table"] == "benchmark_runs") run = i;
  ASSERT_NE(run, 0u);
  nlohmann::json tampered = nlohmann::json::parse(lines[run]);
  tampered["row"]["manifest"]["run"]["spec"]["status"] = "timeout";  // its runDigest no longer matches
  lines[run] = tampered.dump();
  lines[run + 300] = "{\"table\": \"benchmark_runs\", \"row\": ";  // a later line that does not parse
  auto write = [&](const std::string& name) {
    std::string path = (std::filesystem::temp_directory_path() / ("kindex-import-" + std::to_string(::getpid()) + "-" + name)).string();
    std::ofstream out(path);
    for (const auto& l : lines) out << l << "\n";
    return path;
  };
  auto where_of_error = [&](const std::string& path) {
    auto store = Store::open(":memory:");
    try {
      import_files(*store, {path});
    } catch (const Error& e) {
      EXPECT_EQ(store->counts()["benchmark_runs"], 0);
      return std::string(e.what());
    }
    return std::string("imported");
  };
  std::string first = where_of_error(write("tampered-run.jsonl"));
  EXPECT_NE(first.find(":" + std::to_string(run + 1) + " benchmark_runs"), std::string::npos) << first;
  EXPECT_NE(first.find("runDigest"), std::string::npos) << first;
  lines[run - 500] = "not json";  // now an earlier line is the first bad one
  std::string earlier = where_of_error(write("bad-earlier-line.jsonl"));
  EXPECT_NE(earlier.find(":" + std::to_string(run - 499)), std::string::npos) << earlier;
}

TEST(StoreImport, PrimaryValueThatDisagreesWithItsManifestIsRefused) {
  auto lines = lines_of(every_table());
  case_run(lines)["row"]["primaryValue"] = 1000;
  auto store = Store::open(":memory:");
  try {
    import_files(*store, {write_lines("lying-value.jsonl", lines)});
    FAIL() << "a row stating 1000 ns against a manifest median of 348254 ns was imported";
  } catch (const Error& e) {
    EXPECT_EQ(e.field(), "primaryValue") << e.what();
    EXPECT_NE(std::string(e.what()).find("348254"), std::string::npos) << e.what();
  }
  EXPECT_EQ(store->counts()["benchmark_runs"], 0);
  lines = lines_of(every_table());
  for (auto& l : lines)
    if (l["table"] == "measurements" && l["row"]["statistic"] == "std") l["row"]["value"] = 1;
  EXPECT_THROW(import_files(*store, {write_lines("lying-measurement.jsonl", lines)}), Error);
}

TEST(StoreImport, StoredIdWithDifferentContentIsRefusedNamingBothDigests) {
  auto store = Store::open(":memory:");
  import_files(*store, {every_table()});
  auto lines = lines_of(every_table());
  nlohmann::json& row = case_run(lines)["row"];
  const std::string stored = row["runDigest"];
  // The same id, another observation: a different run.
  row["manifest"]["run"]["spec"]["observedAt"] = "2026-07-01T00:00:00.000Z";
  row["observedAt"] = "2026-07-01T00:00:00.000Z";
  row["runDigest"] = evidence::manifest_digest(row["manifest"]["run"]);
  const std::string stated = row["runDigest"];
  ASSERT_NE(stated, stored);
  try {
    import_files(*store, {write_lines("same-id.jsonl", lines)});
    FAIL() << "a run with a stored id and other content was counted as present";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(stated), std::string::npos) << msg;
    EXPECT_NE(msg.find(stored), std::string::npos) << msg;
  }
}

// An operation whose manifest changed but kept its slug, under a new id (an older export imported into a store that
// holds today's): refused, naming the slug the other id holds, not the new semanticDigest nobody holds.
TEST(StoreImport, OperationWithAStoredSlugUnderAnotherIdIsRefusedNamingTheSlug) {
  auto store = Store::open(":memory:");
  import_files(*store, {every_table()});
  auto lines = lines_of(every_table());
  nlohmann::json* op = nullptr;
  for (auto& l : lines)
    if (l["table"] == "operations") op = &l["row"];
  ASSERT_NE(op, nullptr);
  const std::string slug = (*op)["slug"], stored_id = (*op)["id"];
  (*op)["id"] = "01a00328-0000-7000-8000-000000000001";
  (*op)["manifest"]["metadata"]["description"] = "changed since";
  (*op)["manifest"]["spec"]["family"] = "changed-family";
  (*op)["semanticDigest"] = evidence::manifest_digest((*op)["manifest"]);
  try {
    import_files(*store, {write_lines("same-slug.jsonl", {lines.front(), nlohmann::json{{"table", "operations"}, {"row", *op}}})});
    FAIL() << "an operation whose slug another id holds was imported";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("slug"), std::string::npos) << msg;
    EXPECT_NE(msg.find(slug), std::string::npos) << msg;
    EXPECT_NE(msg.find(stored_id), std::string::npos) << msg;
  }
}

// A large export drops the run indexes and builds them again after its rows (here from its first run on): the
// store answers as after a row-by-row import, and a failed import leaves the indexes and rows as they were.
TEST(StoreImport, IndexesBuiltAfterALargeImportAnswerTheSameAndAFailedOneKeepsThem) {
  const auto index_names = [](Store& s) {
    std::vector<std::string> names;
    for (const auto& r : s.db().query("SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE 'ix_%' ORDER BY name"))
      names.push_back(r.text(0));
    return names;
  };
  auto row_by_row = Store::open(":memory:");
  ImportOptions never;
  never.build_indexes_after_runs = 0;
  import_files(*row_by_row, {slice(), every_table()}, never);
  auto rebuilt = Store::open(":memory:");
  ImportOptions first_run;
  first_run.build_indexes_after_runs = 1;
  import_files(*rebuilt, {slice(), every_table()}, first_run);
  EXPECT_EQ(index_names(*rebuilt), index_names(*row_by_row));
  EXPECT_EQ(rebuilt->counts(), row_by_row->counts());
  EXPECT_EQ(records(*rebuilt).dump(), records(*row_by_row).dump());
  EXPECT_EQ(rebuilt->integrity_check(), "ok");

  auto lines = lines_of(every_table());
  lines.back()["row"]["runId"] = "01a00000-0000-7000-8000-000000000000";  // the last line is refused, after the runs
  auto store = Store::open(":memory:");
  import_files(*store, {slice()}, first_run);
  const auto before = index_names(*store);
  const nlohmann::json counts = store->counts();
  EXPECT_THROW(import_files(*store, {write_lines("large-then-bad.jsonl", lines)}, first_run), Error);
  EXPECT_EQ(index_names(*store), before);
  EXPECT_EQ(store->counts(), counts);
  EXPECT_EQ(store->integrity_check(), "ok");
}

// A re-import skips the checks of a row stored exactly as stated; a row that names a stored run (id and runDigest)
// but differs from it in its manifest or in any column still gets every check, in a filled store as in an empty one.
TEST(StoreImport, ReimportedRowThatDiffersFromTheStoredOneIsStillChecked) {
  auto store = Store::open(":memory:");
  import_files(*store, {every_table()});
  const nlohmann::json counts = store->counts();
  const auto refused_on = [&](std::vector<nlohmann::json> lines, const std::string& name) {
    try {
      import_files(*store, {write_lines(name, lines)});
    } catch (const Error& e) {
      EXPECT_EQ(store->counts(), counts);
      return e.field();
    }
    return std::string("imported");
  };
  auto lines = lines_of(every_table());
  case_run(lines)["row"]["manifest"]["run"]["spec"]["status"] = "timeout";  // its runDigest no longer matches
  EXPECT_EQ(refused_on(lines, "reimport-changed-manifest.jsonl"), "runDigest");
  lines = lines_of(every_table());
  case_run(lines)["row"]["primaryValue"] = 1000;  // the manifest's median is 348254 ns
  EXPECT_EQ(refused_on(lines, "reimport-changed-value.jsonl"), "primaryValue");
  lines = lines_of(every_table());
  for (auto& l : lines)
    if (l["table"] == "measurements" && l["row"]["statistic"] == "std") l["row"]["value"] = 1;
  EXPECT_EQ(refused_on(lines, "reimport-changed-measurement.jsonl"), "value");
  lines = lines_of(every_table());
  for (auto& l : lines)  // the manifest states 100 samples: leaving the count out is checked as null
    if (l["table"] == "measurements" && l["row"]["sampleCount"] == 100) l["row"].erase("sampleCount");
  EXPECT_EQ(refused_on(lines, "reimport-measurement-without-count.jsonl"), "sampleCount");
  lines = lines_of(every_table());
  case_run(lines)["row"].erase("comparisonKey");
  EXPECT_EQ(refused_on(lines, "reimport-run-without-key.jsonl"), "comparisonKey");
  ImportReport again = import_files(*store, {every_table()});
  EXPECT_EQ(again.total_inserted(), 0);
  EXPECT_EQ(again.skipped.at("benchmark_runs"), counts["benchmark_runs"].get<int64_t>());
  EXPECT_EQ(store->counts(), counts);
}

TEST(Resolve, UnknownAxisIsNamedAndAxesMatchingSeveralWorkloadsAreListed) {
  auto store = Store::open(":memory:");
  import_files(*store, {slice()});
  try {
    resolve(*store, {"gqa_paged_decode_h24_kv4_d128_ps64", {{"batch_sise", 1}}, "", ""});
    FAIL() << "an unknown axis was ignored";
  } catch (const Error& e) {
    EXPECT_EQ(e.field(), "axis");
    EXPECT_EQ(e.value(), "batch_sise");
    EXPECT_NE(std::string(e.what()).find("batch_size"), std::string::npos) << e.what();
  }
  // page_size is a constant: every workload of the operation matches, none is picked.
  nlohmann::json all = resolve(*store, {"gqa_paged_decode_h24_kv4_d128_ps64", {{"page_size", 64}}, "", ""});
  EXPECT_TRUE(all["exact"].is_null());
  EXPECT_EQ(all["ambiguous"].size(), 20u);
  // The full set of variable axes picks exactly one.
  nlohmann::json one = resolve(*store, {"gqa_paged_decode_h24_kv4_d128_ps64", {{"batch_size", 1}, {"num_pages", 425}}, "", ""});
  EXPECT_FALSE(one["exact"].is_null());
  EXPECT_TRUE(one["ambiguous"].empty());
}

TEST(StoreImport, SameRunUnderAnotherIdIsAlreadyPresentNotADuplicate) {
  auto store = Store::open(":memory:");
  import_files(*store, {every_table()});
  const nlohmann::json counts = store->counts();
  // As when kindex imported a trace and KernelIndex's export then brings the same run (same runDigest) under
  // KernelIndex's id: nothing is added twice and nothing is refused.
  auto lines = lines_of(every_table());
  const std::string old_id = case_run(lines)["row"]["id"];
  const std::string new_id = "01a0ffff-0000-7000-8000-000000000001";
  for (auto& l : lines) {
    for (const char* key : {"id", "runId", "previousRunId"}) {
      if (l["row"].contains(key) && l["row"][key] == old_id) l["row"][key] = new_id;
    }
  }
  ImportReport rep = import_files(*store, {write_lines("other-id.jsonl", lines)});
  EXPECT_EQ(rep.total_inserted(), 0);
  EXPECT_EQ(store->counts(), counts);
}

}  // namespace
}  // namespace kindex::store
