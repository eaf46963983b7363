// The same store suite against SQLite and a real PostgreSQL server this test starts: same rows, same answers.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include "core/error.hpp"
#include "store/fixtures.hpp"
#include "store/import.hpp"
#include "store/postgres_server.hpp"
#include "store/query.hpp"

namespace kindex::store {
namespace {

std::string slice() { return kindex::test::data_dir() + "/kernelindex/export-slice-gqa.jsonl.zst"; }

class Backends : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
#ifdef KINDEX_HAVE_POSTGRES
    server_ = std::make_unique<test::PostgresServer>();
#endif
  }
  static void TearDownTestSuite() { server_.reset(); }
  // A fresh, empty store per backend.
  std::vector<std::unique_ptr<Store>> stores(const std::string& name) {
    std::vector<std::unique_ptr<Store>> out;
    out.push_back(Store::open(":memory:"));
#ifdef KINDEX_HAVE_POSTGRES
    out.push_back(Store::open(server_->create_database(name)));
#else
    ADD_FAILURE() << "built without PostgreSQL support (KINDEX_POSTGRES=OFF)";
    (void)name;
#endif
    return out;
  }
  static std::unique_ptr<test::PostgresServer> server_;
};
std::unique_ptr<test::PostgresServer> Backends::server_;

// Drops what legitimately differs between two stores (the time a view was rendered, or a record event written).
nlohmann::json stable(nlohmann::json j) {
  if (j.is_object()) {
    j.erase("citation");
    j.erase("createdAt");
    j.erase("at");
    j.erase("since");
    for (auto& [k, v] : j.items()) v = stable(v);
  } else if (j.is_array()) {
    for (auto& v : j) v = stable(v);
  }
  return j;
}

TEST_F(Backends, SliceImportGivesTheSameAnswers) {
  auto s = stores("slice");
  ASSERT_EQ(s.size(), 2u);
  std::vector<nlohmann::json> answers;
  for (auto& store : s) {
    SCOPED_TRACE(store->backend());
    ImportReport first = import_files(*store, {slice()});
    EXPECT_EQ(first.inserted["benchmark_runs"], 347);
    EXPECT_EQ(import_files(*store, {slice()}).total_inserted(), 0);
    EXPECT_EQ(store->integrity_check(), "ok");
    ResolveQuery q{"gqa_paged_decode_h24_kv4_d128_ps64", {{"batch_size", 1}, {"num_pages", 425}}, "bf16", "B200"};
    answers.push_back({{"counts", store->counts()},
                       {"search", search(*store, "gqa")},
                       {"operation", operation_view(*store, "gqa_paged_decode_h24_kv4_d128_ps64")},
                       {"resolve", resolve(*store, q)},
                       {"records", records(*store, "gqa_paged_decode_h32_kv4_d128_ps1")},
                       {"run", run_view(*store, operation_view(*store, "gqa_paged_decode_h32_kv4_d128_ps1")["cohorts"][0]["runs"][0]["id"])}});
  }
  EXPECT_EQ(answers[0]["counts"], answers[1]["counts"]);
  for (const char* part : {"search", "operation", "resolve", "records", "run"}) {
    EXPECT_EQ(stable(answers[0][part]), stable(answers[1][part])) << part << " differs between SQLite and PostgreSQL";
  }
}

TEST_F(Backends, ServingSliceGivesTheSameAnswers) {
  const std::string serving = kindex::test::data_dir() + "/kernelindex/export-slice-serving.jsonl.zst";
  std::vector<nlohmann::json> answers;
  for (auto& store : stores("serving")) {
    SCOPED_TRACE(store->backend());
    EXPECT_EQ(import_files(*store, {serving}).inserted["serving_runs"], 145);
    EXPECT_EQ(import_files(*store, {serving}).total_inserted(), 0);
    EXPECT_EQ(import_files(*store, {kindex::test::data_dir() + "/kernelindex/examples"}).inserted["serving_runs"], 1);
    const nlohmann::json view = serving_view(*store, "mlperf-llama2-70b", "B200");
    answers.push_back({{"counts", store->counts()},
                       {"overview", serving_overview(*store)},
                       {"view", view},
                       {"tpot", serving_view(*store, "mlperf-llama2-70b", "h200", "tpot")},
                       {"resolve", resolve_serving(*store, {"llama2-70b", "B200", {{"ttft", 2000}}})},
                       {"run", serving_run_view(*store, view["front"][0].get<std::string>())}});
  }
  ASSERT_EQ(answers.size(), 2u);
  for (const char* part : {"counts", "overview", "view", "tpot", "resolve", "run"})
    EXPECT_EQ(stable(answers[0][part]), stable(answers[1][part])) << part << " differs between SQLite and PostgreSQL";
}

TEST_F(Backends, RecordsAndRetractionsBehaveAlike) {
  auto s = stores("records");
  std::vector<nlohmann::json> answers;
  for (auto& store : s) {
    SCOPED_TRACE(store->backend());
    auto a = store->record_run(test::example_run(9000, 1, true, {9000, 9010}, 1));
    auto b = store->record_run(test::example_run(8000, 2, false, {}, 2));
    EXPECT_TRUE(b.new_record);
    EXPECT_FALSE(store->record_run(test::example_run(8000, 2, false, {}, 2)).inserted);
    store->retract_run(b.run_id, "bad", "2026-09-01T00:00:00Z");
    auto r = records(*store);
    EXPECT_EQ(r[0]["record"]["id"], a.run_id);
    answers.push_back(stable(r));
  }
  EXPECT_EQ(answers[0], answers[1]);
}

TEST_F(Backends, RerunsLinkAndDeriveEvidenceAlike) {
  auto s = stores("reruns");
  std::vector<nlohmann::json> answers;
  for (auto& store : s) {
    SCOPED_TRACE(store->backend());
    OwnRun reported = test::example_run(9000, 1);
    reported.origin = "manifest";
    const RecordResult original = store->record_run(reported);
    store->record_run(test::rerun_of(original.run_digest, 2, "NVIDIA H200", true));
    store->record_run(test::rerun_of(original.run_digest, 3, "NVIDIA H100 80GB HBM3", true));
    OwnRun other = test::rerun_of(original.run_digest, 4, "NVIDIA H200", true);
    other.run["metadata"]["labels"][kSameImplementationLabel] = "false";
    store->record_run(other);
    const nlohmann::json v = run_view(*store, original.run_id);
    EXPECT_EQ(v["run"]["evidence"], "replicated");
    EXPECT_EQ(v["reruns"].size(), 3u);
    answers.push_back(stable({{"run", v},
                              {"workload", workload_view(*store, v["workloadId"].get<std::string>())},
                              {"operation", operation_view(*store, "example_rmsnorm")}}));
  }
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_EQ(answers[0], answers[1]);
}

}  // namespace
}  // namespace kindex::store

namespace kindex::store {
namespace {

TEST_F(Backends, FailedImportsLeaveEitherStoreAsItWas) {
  auto lines = std::string();
  {
    std::ifstream in(kindex::test::data_dir() + "/kernelindex/export-every-table.jsonl");
    lines.assign(std::istreambuf_iterator<char>(in), {});
  }
  // The every-table fixture cut short in its last artifact row, at a content digest that is not sha256.
  const auto bad = std::filesystem::temp_directory_path() / ("kindex-backends-bad-" + std::to_string(::getpid()) + ".jsonl");
  std::ofstream(bad) << lines.substr(0, lines.rfind("sha256:", lines.rfind("contentDigest"))) << "md5:0\"}}\n";
  const auto bad_trace = std::filesystem::temp_directory_path() / ("kindex-backends-trace-" + std::to_string(::getpid()));
  {
    std::ifstream in(kindex::test::data_dir() + "/harness-traces/fib_traces_gqa_paged_decode_h24_kv4_d128_ps64.jsonl");
    std::string good;
    std::getline(in, good);
    std::ofstream(bad_trace) << good << "\n{\"definition\": 5, \"workload\": {}, \"evaluation\": {}}\n";
  }
  for (auto& store : stores("atomic")) {
    SCOPED_TRACE(store->backend());
    import_files(*store, {slice()});
    const nlohmann::json before = store->counts();
    EXPECT_THROW(import_files(*store, {bad.string()}), Error);
    EXPECT_EQ(store->counts(), before);
    // A trace file whose good line was recorded (its own savepoint) before a later line is refused.
    ImportOptions o;
    o.definitions = {kindex::test::data_dir() + "/specs/flashinfer-trace/definitions"};
    EXPECT_THROW(import_files(*store, {bad_trace.string()}, o), Error);
    EXPECT_EQ(store->counts(), before);
    // The store still takes a good import afterwards (no transaction or savepoint left open).
    EXPECT_EQ(import_files(*store, {kindex::test::data_dir() + "/kernelindex/export-every-table.jsonl"})
                  .inserted.at("benchmark_runs"),
              4);
  }
  std::filesystem::remove(bad);
  std::filesystem::remove(bad_trace);
}

}  // namespace
}  // namespace kindex::store
