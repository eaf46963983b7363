// The same store suite against SQLite and a real PostgreSQL server this test starts: same rows, same answers.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <memory>

#include "core/error.hpp"
#include "evidence/attestation.hpp"
#include "evidence/export.hpp"
#include "store/attestations.hpp"
#include "store/export.hpp"
#include "store/feed.hpp"
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

// Runs `scenario` on a fresh store of each backend and expects the same answer from both (as stable() leaves it).
void expect_same_answers(std::vector<std::unique_ptr<Store>> stores,
                         const std::function<nlohmann::json(Store&)>& scenario) {
  std::vector<nlohmann::json> answers;
  for (auto& store : stores) {
    SCOPED_TRACE(store->backend());
    answers.push_back(stable(scenario(*store)));
  }
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_EQ(answers[0], answers[1]);
}

// A run of the example chain as its source reported it: the original the reruns re-measure.
RecordResult record_reported(Store& store) {
  OwnRun reported = test::example_run(9000, 1);
  reported.origin = "manifest";
  return store.record_run(reported);
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
  expect_same_answers(stores("records"), [](Store& store) {
    auto a = store.record_run(test::example_run(9000, 1, true, {9000, 9010}, 1));
    auto b = store.record_run(test::example_run(8000, 2, false, {}, 2));
    EXPECT_TRUE(b.new_record);
    EXPECT_FALSE(store.record_run(test::example_run(8000, 2, false, {}, 2)).inserted);
    store.retract_run(b.run_id, "bad", "2026-09-01T00:00:00Z");
    auto r = records(store);
    EXPECT_EQ(r[0]["record"]["id"], a.run_id);
    return r;
  });
}

TEST_F(Backends, RerunsLinkAndDeriveEvidenceAlike) {
  expect_same_answers(stores("reruns"), [](Store& store) {
    const RecordResult original = record_reported(store);
    store.record_run(test::rerun_of(original.run_digest, 2, "NVIDIA H200", true));
    store.record_run(test::rerun_of(original.run_digest, 3, "NVIDIA H100 80GB HBM3", true));
    OwnRun other = test::rerun_of(original.run_digest, 4, "NVIDIA H200", true);
    other.run["metadata"]["labels"][kSameImplementationLabel] = "false";
    store.record_run(other);
    const nlohmann::json v = run_view(store, original.run_id);
    EXPECT_EQ(v["run"]["evidence"], "replicated");
    EXPECT_EQ(v["reruns"].size(), 3u);
    return nlohmann::json{{"run", v},
                          {"workload", workload_view(store, v["workloadId"].get<std::string>())},
                          {"operation", operation_view(store, "example_rmsnorm")}};
  });
}

// Follows and the feed (store/feed.hpp) on both backends: each kind of follow selects its events, newest first; a
// record that moves names its old and new holder and their ratio; a rerun its original.
TEST_F(Backends, FollowsAndTheFeedAlike) {
  expect_same_answers(stores("feed"), [](Store& store) {
    const RecordResult original = store.record_run(test::example_run(9000, 1));
    const RecordResult faster = store.record_run(test::example_run(8000, 2));
    const RecordResult rerun = store.record_run(test::rerun_of(original.run_digest, 3, "NVIDIA H200", true));
    auto events = [&](const FeedQuery& q = {}) { return feed(store, q)["events"]; };
    auto kinds = [](const nlohmann::json& list) {
      std::multiset<std::string> out;
      for (const auto& e : list) out.insert(e["kind"].get<std::string>());
      return out;
    };
    EXPECT_TRUE(events().empty());  // nothing followed

    EXPECT_TRUE(add_follow(store, resolve_follow(store, "operation", "example_rmsnorm")));
    EXPECT_FALSE(add_follow(store, resolve_follow(store, "operation", "example_rmsnorm")));
    const nlohmann::json all = events();
    EXPECT_EQ(kinds(all), (std::multiset<std::string>{"new_run", "new_run", "rerun", "new_record", "new_record",
                                                      "record_change"}));
    for (size_t i = 1; i < all.size(); ++i) EXPECT_GE(all[i - 1]["at"], all[i]["at"]) << "not newest first";
    for (const auto& e : all) {
      if (e["kind"] == "record_change") {
        EXPECT_EQ(e["previous"]["id"], original.run_id);
        EXPECT_EQ(e["run"]["id"], faster.run_id);
        EXPECT_DOUBLE_EQ(e["ratio"].get<double>(), 8000.0 / 9000.0);
        EXPECT_EQ(e["cause"], "new_run");
      } else if (e["kind"] == "rerun") {
        EXPECT_EQ(e["run"]["id"], rerun.run_id);
        EXPECT_EQ(e["previous"]["id"], original.run_id);
        EXPECT_DOUBLE_EQ(e["ratio"].get<double>(), 9103.0 / 9000.0);
        EXPECT_EQ(e["gpu"], "NVIDIA H200");
      }
    }

    // One GPU: the rerun and the record of its own cohort.
    EXPECT_TRUE(remove_follow(store, "operation", "example_rmsnorm"));
    EXPECT_FALSE(remove_follow(store, "operation", "example_rmsnorm"));
    EXPECT_TRUE(add_follow(store, resolve_follow(store, "gpu", "H200")));
    EXPECT_EQ(kinds(events()), (std::multiset<std::string>{"rerun", "new_record"}));
    // One cohort, given without the store's follows.
    FeedQuery cohort;
    cohort.only = resolve_follow(store, "cohort", faster.comparison_key);
    EXPECT_EQ(kinds(events(cohort)), (std::multiset<std::string>{"new_run", "new_run", "new_record", "record_change"}));
    FeedQuery project;
    project.only = resolve_follow(store, "project", "kindex");
    EXPECT_EQ(events(project).size(), all.size());
    // --since: a date, a date-time; nothing yet in the future.
    project.since = "2000-01-01";
    EXPECT_EQ(events(project).size(), all.size());
    project.since = "2999-01-01T00:00:00Z";
    EXPECT_TRUE(events(project).empty());
    project.since = "last week";
    EXPECT_THROW(events(project), Error);
    project.limit = 2;
    project.since = "";
    EXPECT_EQ(events(project).size(), 2u);

    EXPECT_THROW(resolve_follow(store, "planet", "mars"), Error);
    EXPECT_THROW(resolve_follow(store, "operation", "no-such-operation"), Error);
    EXPECT_THROW(resolve_follow(store, "cohort", "sha256:" + std::string(64, '0')), Error);
    EXPECT_THROW(resolve_follow(store, "project", "nobody"), Error);
    EXPECT_EQ(follows(store).size(), 1u);

    // In one order for the comparison (events of one instant may be listed in either order).
    nlohmann::json sorted = all;
    std::sort(sorted.begin(), sorted.end(), [](const nlohmann::json& a, const nlohmann::json& b) { return a["id"] < b["id"]; });
    return sorted;
  });
}

// Signed attestations of reruns (store/attestations.hpp) on both backends: what a rerun attests to is read from the
// store; only a signed statement equal to it, by a trusted key, is verified, and each other case says why.
TEST_F(Backends, AttestationsAreCheckedAgainstTheStoreAlike) {
  auto s = stores("attestations");
  const auto key = evidence::SigningKey::from_pem(evidence::generate_key_pair().private_pem, "key");
  const auto stranger = evidence::SigningKey::from_pem(evidence::generate_key_pair().private_pem, "stranger");
  std::vector<nlohmann::json> answers;
  for (auto& store : s) {
    SCOPED_TRACE(store->backend());
    const RecordResult original = record_reported(*store);
    const RecordResult other = store->record_run(test::example_run(9050, 5));
    const RecordResult rerun = store->record_run(test::rerun_of(original.run_digest, 2, "NVIDIA H200", true));
    const RecordResult failed =
        store->record_run(test::rerun_of(original.run_digest, 3, "NVIDIA H200", true, "incorrect_numerical"));
    auto sign = [&](const std::string& run, const evidence::SigningKey& k,
                    const std::function<void(nlohmann::json&)>& change = {}) {
      nlohmann::json st = attestation_claims(*store, run);
      st["signedAt"] = "2026-12-07T05:00:00.000Z";
      if (change) change(st);
      return evidence::sign_attestation(st, k);
    };
    auto status = [&](const evidence::Attestation& a) { return check_attestation(*store, a).status; };

    const nlohmann::json claims = attestation_claims(*store, rerun.run_id);
    EXPECT_EQ(claims["verdict"], "replicated");
    EXPECT_EQ(claims["originalRunDigest"], original.run_digest);
    EXPECT_EQ(claims["rerunDigest"], rerun.run_digest);
    EXPECT_EQ(claims["environment"]["gpu"], "NVIDIA H200");
    EXPECT_EQ(claims["basis"]["status"], "passed");
    EXPECT_EQ(attestation_claims(*store, failed.run_id)["verdict"], "not_replicated");
    OwnRun another = test::rerun_of(original.run_digest, 4, "NVIDIA H200", true);  // --impl: another implementation
    another.run["metadata"]["labels"][kSameImplementationLabel] = "false";
    const nlohmann::json of_another = attestation_claims(*store, store->record_run(another).run_id);
    EXPECT_EQ(of_another["verdict"], "not_replicated");
    EXPECT_EQ(of_another["basis"]["status"], "passed");
    EXPECT_EQ(of_another["basis"]["sameImplementation"], false);
    EXPECT_THROW(attestation_claims(*store, original.run_id), Error);  // re-measured no run

    const evidence::Attestation good = sign(rerun.run_id, key);
    EXPECT_TRUE(keep_attestation(*store, good, "test"));
    EXPECT_FALSE(keep_attestation(*store, good, "test"));  // idempotent
    EXPECT_EQ(status(good), "unknown_key");
    EXPECT_EQ(check_attestation(*store, good, {key.public_key_hex()}).status, "verified");
    EXPECT_TRUE(trust_key(*store, key.public_key_hex(), "key.pub"));
    EXPECT_EQ(status(good), "verified");

    // Replayed onto another run, signed anew by the trusted key: the store says the rerun re-measured `original`.
    const auto replay = sign(rerun.run_id, key, [&](nlohmann::json& st) { st["originalRunDigest"] = other.run_digest; });
    EXPECT_EQ(status(replay), "mismatch");
    EXPECT_NE(check_attestation(*store, replay).problems.at(0).find("statement.originalRunDigest"), std::string::npos);
    // A verdict or an environment the store does not hold.
    EXPECT_EQ(status(sign(failed.run_id, key, [](nlohmann::json& st) { st["verdict"] = "replicated"; })), "mismatch");
    EXPECT_EQ(status(sign(rerun.run_id, key, [](nlohmann::json& st) { st["environment"]["gpu"] = "NVIDIA B200"; })),
              "mismatch");
    EXPECT_EQ(status(sign(rerun.run_id, key, [](nlohmann::json& st) { st["rerunDigest"] = "sha256:" + std::string(64, 'e'); })),
              "rerun_missing");
    const evidence::Attestation strangers = sign(rerun.run_id, stranger);
    EXPECT_EQ(status(strangers), "unknown_key");

    // Altered after signing: never kept, the store as it was; reported as such.
    evidence::Attestation tampered = good;
    tampered.statement["environment"]["gpu"] = "NVIDIA B200";
    const auto before = store->db().query("SELECT COUNT(*) FROM run_attestations")[0].integer(0);
    EXPECT_THROW(keep_attestation(*store, tampered, "test"), Error);
    EXPECT_EQ(store->db().query("SELECT COUNT(*) FROM run_attestations")[0].integer(0), before);
    EXPECT_EQ(status(tampered), "bad_signature");

    // Kept with the runs they name, each shown with its status: only one is verified.
    EXPECT_TRUE(keep_attestation(*store, replay, "test"));
    EXPECT_TRUE(keep_attestation(*store, strangers, "test"));
    const nlohmann::json v = run_view(*store, original.run_id);
    ASSERT_EQ(v["attestations"].size(), 2u) << v["attestations"].dump(2);  // the replay names `other`
    std::map<std::string, std::string> statuses;
    for (const auto& a : v["attestations"]) statuses[a["keyId"]] = a["status"];
    EXPECT_EQ(statuses[key.key_id()], "verified");
    EXPECT_EQ(statuses[stranger.key_id()], "unknown_key");
    EXPECT_EQ(v["attestations"][0]["rerunId"], rerun.run_id);
    const nlohmann::json o = run_view(*store, other.run_id);
    ASSERT_EQ(o["attestations"].size(), 1u);
    EXPECT_EQ(o["attestations"][0]["status"], "mismatch");
    EXPECT_EQ(attestation_document(*store, good.digest()), good.line());
    answers.push_back(stable({{"original", v["attestations"]}, {"other", o["attestations"]}}));
  }
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_EQ(answers[0], answers[1]);
}

}  // namespace
}  // namespace kindex::store

namespace kindex::store {
namespace {

// Signed attestations travel in `kindex export` (kindex's own table, after KernelIndex's) so a shared index can
// re-verify them: imported into a fresh store of either backend, each is re-verified (signature; statement against the
// imported runs) and verified once the importing store trusts the key, which the export does not carry. A document
// altered in the export fails the import, leaving the store as it was.
TEST_F(Backends, AttestationsTravelInTheExportAndVerifyAfterImport) {
  const auto key = evidence::SigningKey::from_pem(evidence::generate_key_pair().private_pem, "key");
  auto source = Store::open(":memory:");
  const RecordResult original = record_reported(*source);
  OwnRun measured = test::rerun_of(original.run_digest, 2, "NVIDIA H200", true);
  // The manifest counts and names the raw samples the run keeps, as the runner's does.
  measured.run["spec"]["timing"]["samples"] = measured.samples_ns.size();
  measured.run["spec"]["timing"]["rawSamples"] = {{"uri", "kindex-store:samples/" + std::string(64, 'a')},
                                                  {"digest", "sha256:" + std::string(64, 'a')}};
  const RecordResult rerun = source->record_run(measured);
  nlohmann::json st = attestation_claims(*source, rerun.run_id);
  st["signedAt"] = "2026-12-07T05:00:00.000Z";
  const evidence::Attestation good = evidence::sign_attestation(st, key);
  ASSERT_TRUE(keep_attestation(*source, good, "test"));
  const std::string created = source->db().query("SELECT created_at FROM run_attestations")[0].text(0);
  const std::string out = (std::filesystem::temp_directory_path() / ("kindex-attest-" + std::to_string(::getpid()) + ".jsonl")).string();
  const nlohmann::json written = export_store(*source, out);
  EXPECT_EQ(written[kAttestationsTable], 1);
  // Still a KernelIndex export to a reader that knows only KernelIndex's tables: the table is skipped, the rest verifies.
  const evidence::VerifyReport verified = evidence::verify_export(out);
  EXPECT_TRUE(verified.ok()) << nlohmann::json(verified.mismatches).dump().substr(0, 800);
  EXPECT_EQ(verified.skipped_tables.at(kAttestationsTable), 1u);

  std::string text;
  {
    std::ifstream in(out);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  const std::string tampered_path = out + ".tampered.jsonl";
  {
    const std::string signed_gpu = "\"gpu\":\"NVIDIA H200\"";
    const auto at = text.find(signed_gpu, text.rfind('\n', text.find(kAttestationsTable)));
    ASSERT_NE(at, std::string::npos) << text.substr(text.find(kAttestationsTable), 600);
    std::ofstream(tampered_path) << text.substr(0, at) + "\"gpu\":\"NVIDIA B200\"" + text.substr(at + signed_gpu.size());
  }
  auto s = stores("attestations_export");
  for (auto& store : s) {
    SCOPED_TRACE(store->backend());
    try {
      import_files(*store, {tampered_path});
      ADD_FAILURE() << "an altered attestation was imported";
    } catch (const Error& e) {
      EXPECT_EQ(e.field(), "signature") << e.what() << " / " << e.value();
    }
    EXPECT_EQ(store->db().query("SELECT COUNT(*) FROM benchmark_runs")[0].integer(0), 0);  // the whole import undone
    EXPECT_EQ(store->db().query("SELECT COUNT(*) FROM run_attestations")[0].integer(0), 0);

    const ImportReport rep = import_files(*store, {out});
    EXPECT_EQ(rep.inserted.at(kAttestationsTable), 1);
    EXPECT_TRUE(rep.warnings.empty()) << rep.warnings.front();
    const nlohmann::json before_trust = attestations_of(*store, original.run_digest);
    ASSERT_EQ(before_trust.size(), 1u);
    EXPECT_EQ(before_trust[0]["status"], "unknown_key");  // trust is not exported
    EXPECT_EQ(before_trust[0]["rerunId"], rerun.run_id);
    ASSERT_TRUE(trust_key(*store, key.public_key_hex(), "key.pub"));
    EXPECT_EQ(attestations_of(*store, original.run_digest)[0]["status"], "verified");
    EXPECT_EQ(check_attestation(*store, good).status, "verified");
    EXPECT_EQ(attestation_document(*store, good.digest()), good.line());
    EXPECT_EQ(store->db().query("SELECT created_at FROM run_attestations")[0].text(0), created);
    EXPECT_EQ(import_files(*store, {out}).total_inserted(), 0);  // idempotent
  }
  std::filesystem::remove(out);
  std::filesystem::remove(tampered_path);
}

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
