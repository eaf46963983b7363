// ranking-v1, evidence levels, records and their append-only history, floors and suite scores.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>

#include "core/error.hpp"
#include "store/fixtures.hpp"
#include "store/import.hpp"
#include "store/query.hpp"
#include "store/ranking.hpp"
#include "store/rows.hpp"

namespace kindex::store {
namespace {

Ranked run(std::string id, double v, std::optional<double> lo = {}, std::optional<double> hi = {},
           EvidenceLevel e = EvidenceLevel::reproducible, std::string observed = "2026-08-01T00:00:00.000Z") {
  return Ranked{.id = std::move(id), .value = v, .low = lo, .high = hi, .evidence = e, .observed_at = std::move(observed)};
}

std::vector<std::pair<std::string, int>> ids_and_ranks(const std::vector<Ranked>& rs) {
  std::vector<std::pair<std::string, int>> out;
  for (const auto& r : rs) out.emplace_back(r.id, r.rank);
  return out;
}

using Ranks = std::vector<std::pair<std::string, int>>;

// The vectors below are KernelIndex's frozen ranking-v1 vectors (apps/web/src/server/policy/ranking.test.ts),
// with the same inputs and expected ranks.
TEST(Ranking, KernelIndexVectorOverlappingIntervalsTieAtDenseRanks) {
  std::vector<Ranked> rs = {run("a", 7810, 7788, 7841), run("b", 8120, 8095, 8151), run("c", 8138, 8092, 8177),
                            run("d", 9480, 9433, 9542)};
  rank_v1(rs, false);
  EXPECT_EQ(ids_and_ranks(rs), (Ranks{{"a", 1}, {"b", 2}, {"c", 2}, {"d", 3}}));
  EXPECT_TRUE(rs[2].tied_with_previous);
  EXPECT_FALSE(rs[1].tied_with_previous);
}

TEST(Ranking, KernelIndexVectorNoTieWhenAnIntervalIsMissingAndValuesDiffer) {
  std::vector<Ranked> rs = {run("a", 100), run("b", 101, 95, 108)};
  rank_v1(rs, false);
  EXPECT_EQ(ids_and_ranks(rs), (Ranks{{"a", 1}, {"b", 2}}));
}

TEST(Ranking, KernelIndexVectorEqualValuesTieWithoutIntervals) {
  std::vector<Ranked> rs = {run("a", 100), run("b", 100)};
  rank_v1(rs, false);
  EXPECT_EQ(rs[0].rank, 1);
  EXPECT_EQ(rs[1].rank, 1);
}

TEST(Ranking, KernelIndexVectorSourceNativeOrderIsStrictUnlessValuesAreEqual) {
  std::vector<Ranked> rs = {run("a", 100, 90, 130), run("b", 101, 95, 140)};
  rank_v1(rs, true);
  EXPECT_EQ(ids_and_ranks(rs), (Ranks{{"a", 1}, {"b", 2}}));
}

TEST(Ranking, KernelIndexVectorTieChainListsHigherTrustThenNewerFirst) {
  std::vector<Ranked> rs = {run("newer", 100, 95, 105, EvidenceLevel::reported, "2026-08-02T00:00:00.000Z"),
                            run("older", 101, 96, 106, EvidenceLevel::reported, "2026-08-01T00:00:00.000Z"),
                            run("trusted", 102, 97, 107, EvidenceLevel::verified, "2026-07-01T00:00:00.000Z")};
  rank_v1(rs, false);
  EXPECT_EQ(ids_and_ranks(rs), (Ranks{{"trusted", 1}, {"newer", 1}, {"older", 1}}));
}

TEST(Ranking, KernelIndexVectorTiesDoNotChainThroughAnIntermediateRun) {
  // a~b and b~c overlap, a and c do not: c starts a new chain.
  std::vector<Ranked> rs = {run("a", 100, 98, 103), run("b", 103, 101, 106), run("c", 106, 104, 109)};
  rank_v1(rs, false);
  EXPECT_EQ(ids_and_ranks(rs), (Ranks{{"a", 1}, {"b", 1}, {"c", 2}}));
}

TEST(Ranking, ACohortIsSourceNativeWhenAnyMemberIs) {
  // Overlapping intervals tie in a controlled cohort (1, 1, 1, 2 here); one source-native member makes the whole
  // cohort keep the strict order of its values.
  std::vector<Ranked> rs = {run("a", 10, 9, 12), run("b", 11, 10, 13), run("c", 11.5, 10.5, 12.5), run("d", 14, 13.5, 15)};
  auto controlled = rs;
  rank_v1(controlled, cohort_is_source_native(controlled));
  EXPECT_EQ(ids_and_ranks(controlled), (Ranks{{"a", 1}, {"b", 1}, {"c", 1}, {"d", 2}}));
  rs[3].source_native = true;
  ASSERT_TRUE(cohort_is_source_native(rs));
  rank_v1(rs, cohort_is_source_native(rs));
  EXPECT_EQ(ids_and_ranks(rs), (Ranks{{"a", 1}, {"b", 2}, {"c", 3}, {"d", 4}}));
}

TEST(Ranking, AtEqualValueTheNewerRunIsListedFirst) {
  std::vector<Ranked> rs = {run("old", 10, {}, {}, EvidenceLevel::reported, "2026-01-01T00:00:00.000Z"),
                            run("new", 10, {}, {}, EvidenceLevel::reported, "2026-06-01T00:00:00.000Z")};
  rank_v1(rs, true);
  EXPECT_EQ(ids_and_ranks(rs), (Ranks{{"new", 1}, {"old", 1}}));
  std::vector<Ranked> trust = {run("reported", 10, {}, {}, EvidenceLevel::reported, "2026-06-01T00:00:00.000Z"),
                               run("verified", 10, {}, {}, EvidenceLevel::verified, "2026-01-01T00:00:00.000Z")};
  rank_v1(trust, true);
  EXPECT_EQ(trust[0].id, "verified");
}

TEST(Ranking, EvidenceLevelsFollowKernelIndexTrust) {
  // {reproducedByKernelindex, independentReplications, sourceAvailable, hasRawEvidence}
  EXPECT_EQ(evidence_level({}), EvidenceLevel::reported);
  EXPECT_EQ(evidence_level({false, 0, true, false}), EvidenceLevel::reported);  // source and install recipe only
  EXPECT_EQ(evidence_level({false, 0, false, true}), EvidenceLevel::reported);  // raw evidence without source
  EXPECT_EQ(evidence_level({false, 0, true, true}), EvidenceLevel::reproducible);
  EXPECT_EQ(evidence_level({true, 0, false, false}), EvidenceLevel::verified);
  EXPECT_EQ(evidence_level({true, 2, true, true}), EvidenceLevel::replicated);
  EXPECT_LT(EvidenceLevel::reported, EvidenceLevel::reproducible);
  EXPECT_LT(EvidenceLevel::reproducible, EvidenceLevel::verified);
  EXPECT_LT(EvidenceLevel::verified, EvidenceLevel::replicated);
}

TEST(Floors, Seed003FloorIs6p96usOnB200) {
  auto s = Store::open(":memory:");
  import_files(*s, {kindex::test::data_dir() + "/kernelindex/export-slice-gqa.jsonl.zst"});
  auto rows = s->db().query(
      "SELECT o.manifest, w.manifest FROM workloads w JOIN operations o ON o.id = w.operation_id WHERE o.name = ? AND "
      "w.manifest LIKE ?",
      {std::string("gqa_paged_decode_h24_kv4_d128_ps64"), std::string("%\"num_pages\":425%")});
  ASSERT_EQ(rows.size(), 1u);
  auto f = headroom_v1(nlohmann::json::parse(rows[0].text(0)), nlohmann::json::parse(rows[0].text(1)), "NVIDIA B200");
  ASSERT_TRUE(f);
  EXPECT_NEAR(f->floor_ns, 6964, 1);
  EXPECT_EQ(f->flops, 0);  // paged decode: bandwidth floor only
  auto h200 = headroom_v1(nlohmann::json::parse(rows[0].text(0)), nlohmann::json::parse(rows[0].text(1)), "NVIDIA H200");
  EXPECT_NEAR(h200->floor_ns, 55713200 / 4800.0, 1);
  EXPECT_FALSE(headroom_v1(nlohmann::json::parse(rows[0].text(0)), nlohmann::json::parse(rows[0].text(1)), "NVIDIA A10"));
}

TEST(Floors, GemmAndAttentionHaveArithmeticFloors) {
  nlohmann::json op = {{"spec", {{"family", "gemm"}, {"inputs", {{{"name", "a"}}, {{"name", "b"}}}}}}};
  nlohmann::json wl = {{"kind", "WorkloadCase"},
                       {"spec", {{"axes", {{"M", 8192}, {"N", 8192}, {"K", 8192}}},
                                 {"tensors", {{"a", {{"dtype", "bf16"}, {"shape", {8192, 8192}}}},
                                              {"b", {{"dtype", "bf16"}, {"shape", {8192, 8192}}}}}}}}};
  auto f = headroom_v1(op, wl, "NVIDIA H200");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->bound, "compute");
  EXPECT_NEAR(f->floor_ns, 2.0 * 8192 * 8192 * 8192 / 989e12 * 1e9, 1);
}

TEST(Scores, SolScoreAndSuite) {
  EXPECT_DOUBLE_EQ(sol_score(1.0, 1.0, 0.5), 0.5);
  EXPECT_DOUBLE_EQ(sol_score(0.5, 1.0, 0.5), 1.0);
  SuiteScore s = suite_score({{1.0, 2.0, 0.5}, {3.0, 2.0, 1.0}});
  EXPECT_EQ(s.total, 2);
  EXPECT_EQ(s.fast_1, 1);
  EXPECT_DOUBLE_EQ(s.avg_speedup, (2.0 + 2.0 / 3.0) / 2);
  EXPECT_NEAR(s.geomean_latency, std::sqrt(3.0), 1e-12);
}

TEST(Records, RunningMinimumWithAppendOnlyHistory) {
  auto s = Store::open(":memory:");
  auto slow = s->record_run(test::example_run(9000, 1, false, {}, 1));
  EXPECT_TRUE(slow.inserted);
  EXPECT_TRUE(slow.new_record);
  auto slower = s->record_run(test::example_run(9500, 2, false, {}, 2));
  EXPECT_FALSE(slower.new_record);
  auto fast = s->record_run(test::example_run(8000, 3, false, {}, 3));
  EXPECT_TRUE(fast.new_record);
  EXPECT_EQ(fast.comparison_key, slow.comparison_key);
  // Recording the same run again inserts nothing.
  auto again = s->record_run(test::example_run(8000, 3, false, {}, 3));
  EXPECT_FALSE(again.inserted);
  EXPECT_EQ(again.run_id, fast.run_id);

  auto members = s->cohort(fast.comparison_key);
  ASSERT_EQ(members.size(), 3u);
  EXPECT_EQ(members[0].id, fast.run_id);
  EXPECT_EQ(members[2].rank, 3);

  s->retract_run(fast.run_id, "wrong inputs", "2026-09-01T00:00:00Z");
  nlohmann::json recs = records(*s);
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0]["record"]["id"], slow.run_id);
  const auto& h = recs[0]["history"];
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(h[0]["cause"], "new_run");
  EXPECT_EQ(h[1]["cause"], "new_run");
  EXPECT_EQ(h[1]["previousRunId"], slow.run_id);
  EXPECT_EQ(h[2]["cause"], "retraction");
  EXPECT_EQ(h[2]["runId"], slow.run_id);
  EXPECT_EQ(s->counts()["benchmark_runs"], 3);  // the retracted run stays
}

// A run recorded and retracted at once writes its record's events within one millisecond: their stamps still
// increase, so the history keeps the order they were written in (it had fallen to the events' ids).
TEST(Records, EventsWrittenInOneMillisecondKeepTheirOrder) {
  for (int i = 0; i < 50; ++i) {
    auto s = Store::open(":memory:");
    auto slow = s->record_run(test::example_run(9000, 1, false, {}, 1));
    auto fast = s->record_run(test::example_run(8000, 2, false, {}, 2));
    s->retract_run(fast.run_id, "bad", "2026-09-01T00:00:00Z");
    const nlohmann::json h = records(*s)[0]["history"];
    ASSERT_EQ(h.size(), 3u);
    EXPECT_EQ(h[0]["cause"], "new_run");
    EXPECT_EQ(h[1]["runId"], fast.run_id);
    EXPECT_EQ(h[2]["cause"], "retraction");
    EXPECT_EQ(h[2]["runId"], slow.run_id);
    EXPECT_LT(h[0]["createdAt"].get<std::string>(), h[1]["createdAt"].get<std::string>());
    EXPECT_LT(h[1]["createdAt"].get<std::string>(), h[2]["createdAt"].get<std::string>());
    if (HasFailure()) break;
  }
}

TEST(Records, TheRecordIsTheFastestRunEvenWhenItsTieChainListsAnotherFirst) {
  auto s = Store::open(":memory:");
  OwnRun fast = test::example_run(8000, 1);  // reported: no raw samples
  fast.interval_low_ns = 7900;
  fast.interval_high_ns = 8200;
  OwnRun slow = test::example_run(8100, 2, true, {8100, 8090, 8120});  // verified: kindex's GPU run with samples
  slow.interval_low_ns = 8000;
  slow.interval_high_ns = 8300;
  auto a = s->record_run(fast);
  auto b = s->record_run(slow);
  auto members = s->cohort(a.comparison_key);
  ASSERT_EQ(members.size(), 2u);
  EXPECT_EQ(members[0].id, b.run_id);  // one tie chain: higher evidence listed first
  EXPECT_EQ(members[0].rank, members[1].rank);
  EXPECT_FALSE(b.new_record);
  nlohmann::json recs = records(*s);
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0]["record"]["id"], a.run_id);
}

// Two runs tie on value: ranked, the newer is listed first; the record is the earliest, and the operation page's
// recordStatus names the same run as `kindex records` and the record events (KernelIndex's rule).
TEST(Records, OnATieTheOperationPageAndRecordsNameTheEarliestRun) {
  auto s = Store::open(":memory:");
  auto earlier = s->record_run(test::example_run(8000, 1, false, {}, 1));
  auto later = s->record_run(test::example_run(8000, 2, false, {}, 2));
  auto members = s->cohort(earlier.comparison_key);
  ASSERT_EQ(members.size(), 2u);
  EXPECT_EQ(members[0].id, later.run_id);  // one tie chain: the newer observation listed first
  EXPECT_EQ(members[0].rank, members[1].rank);
  const nlohmann::json recs = records(*s);
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0]["record"]["id"], earlier.run_id);
  EXPECT_EQ(recs[0]["history"].back()["runId"], earlier.run_id);
  const nlohmann::json view = operation_view(*s, "example_rmsnorm");
  ASSERT_EQ(view["cohorts"].size(), 1u);
  EXPECT_EQ(view["cohorts"][0]["recordStatus"]["holder"], earlier.run_id);
  EXPECT_EQ(view["cohorts"][0]["runs"][0]["id"], later.run_id);
}

TEST(Records, SupersessionMovesTheRecord) {
  auto s = Store::open(":memory:");
  auto a = s->record_run(test::example_run(8000, 1, false, {}, 1));
  auto b = s->record_run(test::example_run(9000, 2, false, {}, 2));
  // A later revision of run a's result replaces it.
  s->db().execute("UPDATE benchmark_runs SET supersedes_id = ? WHERE id = ?", {a.run_id, b.run_id});
  EXPECT_TRUE(s->update_record(a.comparison_key));
  auto recs = records(*s);
  EXPECT_EQ(recs[0]["history"].back()["cause"], "supersession");
  EXPECT_EQ(recs[0]["record"]["id"], b.run_id);
}

TEST(Records, KindexGpuRunWithSamplesIsVerifiedAndShowsItsSamples) {
  auto s = Store::open(":memory:");
  auto r = s->record_run(test::example_run(8100, 7, true, {8100, 8090, 8120}));
  nlohmann::json v = run_view(*s, r.run_id.substr(0, 8));
  EXPECT_EQ(v["run"]["evidence"], "verified");
  EXPECT_EQ(v["samplesNs"].size(), 3u);
  EXPECT_EQ(v["rank"], 1);
  auto cpu = s->record_run(test::example_run(8100, 8, false, {8100}));
  EXPECT_EQ(run_view(*s, cpu.run_id)["run"]["evidence"], "reproducible");  // kindex source, but the CPU path
}

TEST(Records, OperationPageFollowsWritesFromThisAndOtherConnections) {
  // The operation-wide part of the page is kept between calls until the store's content changes.
  const std::string path = (std::filesystem::temp_directory_path() / ("kindex-memo-" + std::to_string(::getpid()) + ".db")).string();
  std::filesystem::remove(path);
  {
    auto a = Store::open(path);
    a->record_run(test::example_run(9000, 1, false, {}, 1));
    EXPECT_EQ(operation_view(*a, "example_rmsnorm")["eligibleRunsAllWorkloads"], 1);
    EXPECT_EQ(operation_view(*a, "example_rmsnorm")["eligibleRunsAllWorkloads"], 1);
    a->record_run(test::example_run(8000, 2, false, {}, 2));  // this connection
    EXPECT_EQ(operation_view(*a, "example_rmsnorm")["eligibleRunsAllWorkloads"], 2);
    auto b = Store::open(path);
    auto fast = b->record_run(test::example_run(7000, 3, false, {}, 3));  // another connection
    nlohmann::json v = operation_view(*a, "example_rmsnorm");
    EXPECT_EQ(v["eligibleRunsAllWorkloads"], 3);
    EXPECT_EQ(v["implementations"][0]["bestLatencyNs"], 7000.0);
    b->retract_run(fast.run_id, "wrong inputs", "2026-09-01T00:00:00Z");
    v = operation_view(*a, "example_rmsnorm");
    EXPECT_EQ(v["eligibleRunsAllWorkloads"], 2);
    EXPECT_EQ(v["implementations"][0]["bestLatencyNs"], 8000.0);
  }
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
}

TEST(Records, RecordRunRefusesManifestsThatDoNotMatchTheRun) {
  auto s = Store::open(":memory:");
  auto r = test::example_run(8000, 1);
  r.run["spec"]["protocolDigest"] = "sha256:" + std::string(64, 'a');
  EXPECT_THROW(s->record_run(r), Error);
  EXPECT_EQ(s->counts()["benchmark_runs"], 0);
}

// A run of implementation variant `impl` on the example workload with its input seed shifted by `workload`.
// Variant `kBaselineVariant` has the baseline role, marked as FlashInfer-Bench marks its baselines (author "baseline").
constexpr int kBaselineVariant = 1;
OwnRun leaderboard_run(int64_t median_ns, int salt, int impl, int workload, const std::string& status = "passed",
                       int baseline_variant = kBaselineVariant) {
  OwnRun r = test::example_run(median_ns, salt, false, {}, impl);
  if (impl == baseline_variant) {
    r.implementation["metadata"]["authors"] = nlohmann::json::array({{{"name", "baseline"}}});
    r.run["spec"]["implementationDigest"] = evidence::manifest_digest(r.implementation);
  }
  if (workload) {
    r.workload["spec"]["tensors"]["input"]["data"]["seed"] = 230485 + workload;
    r.run["spec"]["workloadDigest"] = evidence::manifest_digest(r.workload);
  }
  r.run["spec"]["status"] = status;
  return r;
}

std::string implementation_of(Store& s, const RecordResult& r) {
  return s.db().query("SELECT implementation_id FROM benchmark_runs WHERE id = ?", {r.run_id})[0].text(0);
}

TEST(Leaderboard, AverageSpeedupOverTheBaselinePassRateAndLatencySpread) {
  auto s = Store::open(":memory:");
  // Variant 1 (the baseline role) ran three workloads; variant 2 is 2x and 3x
  // faster on two of them; variant 3 failed once and matched the baseline once.
  auto base = s->record_run(leaderboard_run(9000, 1, 1, 0));
  s->record_run(leaderboard_run(18000, 2, 1, 1));
  s->record_run(leaderboard_run(30000, 3, 1, 2));
  auto fast = s->record_run(leaderboard_run(4500, 4, 2, 0));
  s->record_run(leaderboard_run(6000, 5, 2, 1));
  auto mixed = s->record_run(leaderboard_run(9000, 6, 3, 0));
  s->record_run(leaderboard_run(7000, 7, 3, 1, "incorrect_numerical"));
  const std::string v1 = implementation_of(*s, base), v2 = implementation_of(*s, fast), v3 = implementation_of(*s, mixed);

  nlohmann::json lb = leaderboard(*s, {"example_rmsnorm"});
  EXPECT_EQ(lb["baseline"]["id"], v1);
  EXPECT_EQ(lb["baseline"]["chosenBy"], "baseline role");
  ASSERT_EQ(lb["entries"].size(), 3u);
  std::map<std::string, nlohmann::json> by_id;
  for (const auto& e : lb["entries"]) by_id[e["id"]] = e;
  EXPECT_EQ(lb["entries"][0]["id"], v2);  // highest average speedup first
  EXPECT_DOUBLE_EQ(by_id[v2]["avgSpeedup"].get<double>(), (2.0 + 3.0) / 2);
  EXPECT_DOUBLE_EQ(by_id[v2]["geomeanSpeedup"].get<double>(), std::sqrt(6.0));
  EXPECT_EQ(by_id[v2]["cohortsCompared"], 2);
  EXPECT_DOUBLE_EQ(by_id[v2]["latency"]["medianNs"].get<double>(), 5250);
  EXPECT_EQ(by_id[v2]["latency"]["valuesNs"], nlohmann::json::array({4500.0, 6000.0}));
  EXPECT_TRUE(by_id[v1]["baseline"].get<bool>());
  EXPECT_DOUBLE_EQ(by_id[v1]["avgSpeedup"].get<double>(), 1.0);
  EXPECT_EQ(by_id[v1]["cohortsCompared"], 3);
  EXPECT_DOUBLE_EQ(by_id[v1]["latency"]["maxNs"].get<double>(), 30000);
  // The failed run counts against the pass rate and is not compared.
  EXPECT_EQ(by_id[v3]["runs"], 2);
  EXPECT_DOUBLE_EQ(by_id[v3]["passRate"].get<double>(), 0.5);
  EXPECT_EQ(by_id[v3]["cohortsCompared"], 1);
  EXPECT_EQ(by_id[v3]["workloads"], 2);

  // Another baseline: variant 1 is now 1/2 and 1/3 as fast.
  nlohmann::json against_v2 = leaderboard(*s, {"example_rmsnorm", "", "", v2});
  EXPECT_EQ(against_v2["baseline"]["chosenBy"], "asked");
  for (const auto& e : against_v2["entries"]) {
    if (e["id"] == v1) EXPECT_DOUBLE_EQ(e["avgSpeedup"].get<double>(), (0.5 + 1.0 / 3) / 2);
  }
  EXPECT_THROW(leaderboard(*s, {"example_rmsnorm", "", "", "no-such-implementation"}), Error);

  // Filters: the device (the examples run on a B200) and the author.
  EXPECT_EQ(leaderboard(*s, {"example_rmsnorm", "b200"})["entries"].size(), 3u);
  EXPECT_TRUE(leaderboard(*s, {"example_rmsnorm", "H100"})["entries"].empty());
  EXPECT_EQ(lb["devices"], nlohmann::json::array({"NVIDIA B200 SXM"}));
  EXPECT_EQ(leaderboard(*s, {"example_rmsnorm", "", "FICTIONAL-author"})["entries"].size(), 2u);
  EXPECT_EQ(leaderboard(*s, {"example_rmsnorm", "", "baseline"})["entries"].size(), 1u);
  EXPECT_TRUE(leaderboard(*s, {"example_rmsnorm", "", "someone else"})["entries"].empty());
}

// KernelIndex gives a speedup only against an implementation whose role is baseline: a competitor with passed
// runs in more cohorts is not one, and without any baseline no speedup is shown.
TEST(Leaderboard, SpeedupOnlyAgainstAnImplementationWithTheBaselineRole) {
  const int none = 0;
  auto s = Store::open(":memory:");
  for (int w = 0; w < 3; ++w) s->record_run(leaderboard_run(9000, 1 + w, 2, w, "passed", none));
  auto only = leaderboard(*s, {"example_rmsnorm"});
  EXPECT_TRUE(only["baseline"].is_null());
  ASSERT_EQ(only["entries"].size(), 1u);
  EXPECT_TRUE(only["entries"][0]["avgSpeedup"].is_null());
  EXPECT_EQ(only["entries"][0]["cohortsCompared"], 0);

  // The baseline-role variant 1 ran fewer workloads than competitor 2, yet it is the baseline.
  auto base = s->record_run(leaderboard_run(18000, 10, 1, 0));
  s->record_run(leaderboard_run(18000, 11, 1, 1));
  auto lb = leaderboard(*s, {"example_rmsnorm"});
  EXPECT_EQ(lb["baseline"]["id"], implementation_of(*s, base));
  for (const auto& e : lb["entries"]) {
    EXPECT_EQ(e["baselineRole"], e["id"] == implementation_of(*s, base));
    if (e["id"] != implementation_of(*s, base)) {
      EXPECT_DOUBLE_EQ(e["avgSpeedup"].get<double>(), 2.0);
    }
  }
}

}  // namespace
}  // namespace kindex::store

namespace kindex::store {
namespace {

// The strongest evidence of the original's implementation (not the reruns' "variant-1").
std::string implementation_evidence(Store& s) {
  const nlohmann::json view = operation_view(s, "example_rmsnorm");
  for (const auto& i : view["implementations"])
    if (i["slug"] != "variant-1") return i["evidence"].get<std::string>();
  return "";
}

}  // namespace

TEST(Reruns, PassingGpuRerunsMakeTheRunTheyReproduceVerifiedThenReplicatedWithoutRewritingIt) {
  auto s = Store::open(":memory:");
  OwnRun reported = test::example_run(9000, 1);
  reported.origin = "manifest";  // published elsewhere: reported
  const RecordResult original = s->record_run(reported);
  auto row = [&] { return s->db().query("SELECT * FROM benchmark_runs WHERE id = ?", {original.run_id})[0].cells; };
  const auto stored = row();
  EXPECT_EQ(run_view(*s, original.run_id)["run"]["evidence"], "reported");

  // A rerun on the CPU path and a GPU rerun that failed are linked, and verify nothing.
  s->record_run(test::rerun_of(original.run_digest, 2, "NVIDIA H200", false));
  s->record_run(test::rerun_of(original.run_digest, 3, "NVIDIA H200", true, "incorrect_numerical"));
  nlohmann::json v = run_view(*s, original.run_id);
  EXPECT_EQ(v["reruns"].size(), 2u);
  EXPECT_EQ(v["run"]["evidence"], "reported");
  EXPECT_EQ(implementation_evidence(*s), "reported");

  // A passing GPU rerun of another implementation (an --impl override) is linked, and verifies nothing.
  OwnRun other = test::rerun_of(original.run_digest, 7, "NVIDIA H200", true);
  other.run["metadata"]["labels"][kSameImplementationLabel] = "false";
  s->record_run(other);
  EXPECT_EQ(run_view(*s, original.run_id)["reruns"].size(), 3u);
  EXPECT_EQ(run_view(*s, original.run_id)["run"]["evidence"], "reported");

  // One passing GPU rerun: verified, in the run's views, its cohort's ranking and its implementation's evidence.
  const RecordResult gpu = s->record_run(test::rerun_of(original.run_digest, 4, "NVIDIA H200", true));
  v = run_view(*s, original.run_id);
  EXPECT_EQ(v["run"]["evidence"], "verified");
  EXPECT_EQ(run_view(*s, gpu.run_id)["rerunOf"]["id"], original.run_id);
  for (const Ranked& m : s->cohort(original.comparison_key))
    if (m.id == original.run_id) EXPECT_EQ(m.evidence, EvidenceLevel::verified);
  EXPECT_EQ(implementation_evidence(*s), "verified");
  // A second passing rerun in the same environment is no independent replication; one in another environment is.
  s->record_run(test::rerun_of(original.run_digest, 5, "NVIDIA H200", true));
  EXPECT_EQ(run_view(*s, original.run_id)["run"]["evidence"], "verified");
  s->record_run(test::rerun_of(original.run_digest, 6, "NVIDIA H100 80GB HBM3", true));
  EXPECT_EQ(run_view(*s, original.run_id)["run"]["evidence"], "replicated");
  EXPECT_EQ(implementation_evidence(*s), "replicated");
  // Retracting a rerun takes back what it gave.
  auto h100 = s->db().query("SELECT id FROM benchmark_runs WHERE hardware_model = 'NVIDIA H100 80GB HBM3'");
  s->retract_run(h100.at(0).text(0), "wrong clocks", "2026-09-01T00:00:00Z");
  EXPECT_EQ(run_view(*s, original.run_id)["run"]["evidence"], "verified");

  EXPECT_EQ(row(), stored) << "the original's row was rewritten";
  EXPECT_EQ(s->db().query("SELECT COUNT(*) FROM run_reruns")[0].integer(0), 6);
}

TEST(Reruns, ARerunRecordedBeforeItsOriginalIsLinkedWhenTheOriginalArrives) {
  auto s = Store::open(":memory:");
  OwnRun reported = test::example_run(9000, 1);
  reported.origin = "manifest";
  const std::string digest = evidence::manifest_digest(reported.run);
  const RecordResult rerun = s->record_run(test::rerun_of(digest, 2, "NVIDIA H200", true));
  nlohmann::json v = run_view(*s, rerun.run_id);
  EXPECT_EQ(v["rerunOf"]["inStore"], false);
  EXPECT_EQ(v["rerunOf"]["runDigest"], digest);
  const RecordResult original = s->record_run(reported);
  EXPECT_EQ(run_view(*s, rerun.run_id)["rerunOf"]["id"], original.run_id);
  EXPECT_EQ(run_view(*s, original.run_id)["run"]["evidence"], "verified");
}

TEST(Reruns, RerunLabelsThatAreNotARunDigestOrABooleanAreRefusedAndNothingIsStored) {
  auto s = Store::open(":memory:");
  try {
    s->record_run(test::rerun_of("run 42", 2, "NVIDIA H200", true));
    FAIL() << "a reproduces_run label that is no runDigest was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.field(), "run.metadata.labels.reproduces_run");
    EXPECT_EQ(e.value(), "run 42");
  }
  OwnRun unclear = test::rerun_of(std::string("sha256:") + std::string(64, 'a'), 3, "NVIDIA H200", true);
  unclear.run["metadata"]["labels"][kSameImplementationLabel] = "maybe";
  try {
    s->record_run(unclear);
    FAIL() << "a rerun_same_implementation label that is neither true nor false was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.field(), "run.metadata.labels.rerun_same_implementation");
  }
  EXPECT_EQ(s->db().query("SELECT COUNT(*) FROM benchmark_runs")[0].integer(0), 0);
}

}  // namespace kindex::store
