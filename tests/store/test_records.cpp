// ranking-v1, evidence levels, records and their append-only history, floors and suite scores.
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "store/fixtures.hpp"
#include "store/import.hpp"
#include "store/query.hpp"
#include "store/ranking.hpp"

namespace kindex::store {
namespace {

Ranked run(std::string id, double v, std::optional<double> lo = {}, std::optional<double> hi = {},
           EvidenceLevel e = EvidenceLevel::reported) {
  Ranked r;
  r.id = std::move(id);
  r.value = v;
  r.low = lo;
  r.high = hi;
  r.evidence = e;
  return r;
}

TEST(Ranking, DenseRanksWithEqualValuesTied) {
  std::vector<Ranked> rs = {run("c", 30), run("a", 10), run("b", 10), run("d", 40)};
  rank_v1(rs, true);
  EXPECT_EQ(rs[0].rank, 1);
  EXPECT_EQ(rs[1].rank, 1);
  EXPECT_EQ(rs[2].id, "c");
  EXPECT_EQ(rs[2].rank, 2);
  EXPECT_EQ(rs[3].rank, 3);
}

TEST(Ranking, OverlappingIntervalsTieOnlyOutsideSourceNativeCohorts) {
  std::vector<Ranked> rs = {run("a", 10, 9, 11), run("b", 10.5, 10.8, 12), run("c", 12.5, 11.9, 13)};
  auto controlled = rs;
  rank_v1(controlled, false);
  // a~b overlap, b~c overlap (a and c do not): ties are pairwise with the run above, not transitive closures.
  EXPECT_EQ(controlled[1].rank, 1);
  EXPECT_EQ(controlled[2].rank, 1);
  rank_v1(rs, true);
  EXPECT_EQ(rs[1].rank, 2);
  EXPECT_EQ(rs[2].rank, 3);
  std::vector<Ranked> apart = {run("a", 10, 9, 10.1), run("b", 10.5, 10.2, 12)};
  rank_v1(apart, false);
  EXPECT_EQ(apart[1].rank, 2);
}

TEST(Ranking, AtEqualLatencyTheVerifiedRunComesFirst) {
  std::vector<Ranked> rs = {run("reported", 10), run("verified", 10, {}, {}, EvidenceLevel::verified)};
  rank_v1(rs, true);
  EXPECT_EQ(rs[0].id, "verified");
  EXPECT_EQ(rs[0].rank, rs[1].rank);
}

TEST(Ranking, EvidenceLevels) {
  EXPECT_EQ(evidence_level({}), EvidenceLevel::reported);
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

TEST(Records, RecordRunRefusesManifestsThatDoNotMatchTheRun) {
  auto s = Store::open(":memory:");
  auto r = test::example_run(8000, 1);
  r.run["spec"]["protocolDigest"] = "sha256:" + std::string(64, 'a');
  EXPECT_THROW(s->record_run(r), Error);
  EXPECT_EQ(s->counts()["benchmark_runs"], 0);
}

}  // namespace
}  // namespace kindex::store
