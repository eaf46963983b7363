#include "catalog/builtin.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "catalog/loader.hpp"
#include "helpers.hpp"
#include "support/paths.hpp"

namespace kindex::catalog {
namespace {

namespace fs = std::filesystem;

fs::path specs() { return fs::path(test::data_dir()) / "specs"; }

TEST(Builtin, ListsTheSeventeenDecodeDefinitionsAndSol) {
  auto names = list_builtin();
  ASSERT_EQ(names.size(), 18u);
  size_t decode = 0;
  for (const auto& n : names) decode += parse_decode_name(n).has_value();
  EXPECT_EQ(decode, 17u);
  EXPECT_EQ(names.back(), kSolGqaRopeBackward);
  for (const char* seed : {"gqa_paged_decode_h32_kv4_d128_ps1", "gqa_paged_decode_h24_kv4_d128_ps64"})
    EXPECT_NE(std::find(names.begin(), names.end(), seed), names.end()) << seed;
}

// The family generator reproduces every upstream definition (axes, inputs, outputs, constraints), and the bundled
// copies are the upstream files.
TEST(Builtin, FamilyGeneratorEqualsEveryUpstreamDefinition) {
  size_t checked = 0;
  for (const auto& entry : fs::directory_iterator(specs() / "flashinfer-trace" / "definitions" / "gqa_paged")) {
    Definition upstream = load_definition(entry.path());
    SCOPED_TRACE(upstream.name);
    auto params = parse_decode_name(upstream.name);
    ASSERT_TRUE(params);
    EXPECT_EQ(params->name(), upstream.name);
    Definition generated = decode_definition(*params);
    std::string difference;
    EXPECT_TRUE(same_signature(generated, upstream, &difference)) << difference;
    EXPECT_EQ(generated.input("kv_last_page_len") != nullptr, params->page_size > 1);
    EXPECT_EQ(upstream.input("kv_last_page_len") != nullptr, params->page_size > 1);
    EXPECT_NE(generated.reference.find("assert num_qo_heads == " + std::to_string(params->num_qo_heads) + "\n"),
              std::string::npos);

    auto bundled = find_builtin(upstream.name);
    ASSERT_TRUE(bundled);
    EXPECT_TRUE(same_signature(*bundled, upstream));
    EXPECT_EQ(bundled->reference, upstream.reference);
    EXPECT_EQ(bundled->description, upstream.description);
    EXPECT_EQ(bundled->raw, upstream.raw);
    auto dp = decode_family_params(upstream);
    ASSERT_TRUE(dp);
    EXPECT_EQ(dp->name(), upstream.name);
    ++checked;
  }
  EXPECT_EQ(checked, 17u);
}

TEST(Builtin, GeneratedNamesAndInvalidNames) {
  auto def = find_builtin("gqa_paged_decode_h12_kv3_d64_ps16");
  ASSERT_TRUE(def);
  EXPECT_EQ(def->axis("num_qo_heads")->value, 12);
  EXPECT_EQ(def->axis("head_dim")->value, 64);
  EXPECT_EQ(def->axis("page_size")->value, 16);
  EXPECT_TRUE(def->input("kv_last_page_len"));
  EXPECT_EQ(decode_family_params(*def)->group_size(), 4);
  EXPECT_TRUE(builtin_workloads(def->name).empty());
  for (const char* bad :
       {"gqa_paged_decode_h12_kv5_d64_ps16", "gqa_paged_decode_h12_kv3_d64", "gqa_paged_decode_h0_kv1_d64_ps1",
        "gqa_paged_decode_h012_kv3_d64_ps16", "gqa_paged_decode_h12_kv3_d64_ps16x", "nope"})
    EXPECT_FALSE(find_builtin(bad)) << bad;
  EXPECT_KINDEX_ERROR(builtin_problem("nope"), "builtin", "name", "nope");
  EXPECT_FALSE(decode_family_params(*find_builtin(kSolGqaRopeBackward)));
}

TEST(Builtin, SolDefinitionIsTheUpstreamFile) {
  auto dir = specs() / "sol-execbench" / "L2" / "003_grouped_query_attention_with_rope_backward";
  Definition upstream = load_definition(dir / "definition.json");
  auto bundled = find_builtin("L2/003_grouped_query_attention_with_rope_backward");
  ASSERT_TRUE(bundled);
  EXPECT_TRUE(same_signature(*bundled, upstream));
  EXPECT_EQ(bundled->reference, upstream.reference);
  EXPECT_TRUE(is_sol_gqa_rope_backward(*bundled));
  auto published = builtin_file("sol-execbench/L2/003_grouped_query_attention_with_rope_backward/published-b200.json");
  ASSERT_TRUE(published);
  EXPECT_EQ(nlohmann::json::parse(*published)["per_workload"].size(), 16u);
}

TEST(Builtin, Ps1WorkloadsKeepUpstreamUuidsAndAxes) {
  auto upstream = load_workloads(
      specs() / "flashinfer-trace" / "workloads" / "gqa_paged" / "gqa_paged_decode_h32_kv4_d128_ps1.jsonl",
      *find_builtin("gqa_paged_decode_h32_kv4_d128_ps1"));
  auto bundled = builtin_workloads("gqa_paged_decode_h32_kv4_d128_ps1");
  ASSERT_EQ(bundled.size(), 48u);
  ASSERT_EQ(upstream.size(), 48u);
  std::map<int64_t, int> per_batch;
  for (size_t i = 0; i < 48; ++i) {
    EXPECT_EQ(bundled[i].uuid, upstream[i].uuid);
    EXPECT_EQ(bundled[i].axes, upstream[i].axes);
    EXPECT_EQ(bundled[i].inputs.at("sm_scale").value, upstream[i].inputs.at("sm_scale").value);
    // The captured blobs are not public: the index tensors come from the page-table generator.
    EXPECT_EQ(bundled[i].inputs.at("kv_indices").kind, InputSpec::Kind::random);
    per_batch[bundled[i].axes.at("batch_size")]++;
  }
  EXPECT_EQ(per_batch, (std::map<int64_t, int>{{1, 16}, {16, 16}, {64, 16}}));
}

TEST(Builtin, Ps64WorkloadsAreTheProtocolCases) {
  const std::vector<std::array<int64_t, 3>> expected = {
      {2, 1348, 130},     {4, 1610, 247},    {4, 1729, 275},     {1, 425, 361},      {8, 6458, 471},
      {8, 6785, 527},     {1, 1266, 882},    {16, 14913, 993},   {32, 20673, 1954},  {32, 21889, 2178},
      {8, 8888, 3176},    {64, 22913, 3939}, {64, 25089, 4387},  {4, 6180, 4583},    {16, 14977, 6068},
      {128, 27201, 7865}, {8, 14271, 7941},  {128, 31809, 8761}, {32, 20737, 12162}, {16, 19713, 16593}};
  const std::string name = "gqa_paged_decode_h24_kv4_d128_ps64";
  auto w = builtin_workloads(name);
  ASSERT_EQ(w.size(), 20u);
  std::set<std::string> uuids;
  for (size_t i = 0; i < 20; ++i) {
    auto [b, p, k] = expected[i];
    EXPECT_EQ(w[i].axes, (std::map<std::string, int64_t>{
                             {"batch_size", b}, {"num_pages", p}, {"len_indptr", b + 1}, {"num_kv_indices", k}}));
    EXPECT_EQ(w[i].uuid,
              stable_uuid(name + "/b" + std::to_string(b) + "/p" + std::to_string(p) + "/i" + std::to_string(k)));
    EXPECT_NEAR(w[i].inputs.at("sm_scale").value, 0.08838834764831843, 1e-15);
    uuids.insert(w[i].uuid);
  }
  EXPECT_EQ(uuids.size(), 20u);
  EXPECT_EQ(stable_uuid("x").size(), 36u);
  EXPECT_EQ(stable_uuid("x")[14], '8');  // version 8
}

TEST(Builtin, SolWorkloadsCarryTheirTolerances) {
  auto dir = specs() / "sol-execbench" / "L2" / "003_grouped_query_attention_with_rope_backward";
  auto bundled = builtin_workloads(kSolGqaRopeBackward);
  auto upstream = load_workloads(dir / "workload.jsonl", *find_builtin(kSolGqaRopeBackward));
  ASSERT_EQ(bundled.size(), 16u);
  for (size_t i = 0; i < 16; ++i) {
    EXPECT_EQ(bundled[i].uuid, upstream[i].uuid);
    EXPECT_EQ(bundled[i].axes, upstream[i].axes);
    ASSERT_TRUE(bundled[i].tolerance);
    EXPECT_EQ(bundled[i].tolerance->max_atol, upstream[i].tolerance->max_atol);
    EXPECT_EQ(bundled[i].tolerance->max_rtol, 0.05);
    EXPECT_NEAR(bundled[i].inputs.at("scaling").value, 0.08838834764831845, 1e-15);
  }
}

TEST(Builtin, EveryOtherDecodeDefinitionHasGeneratedWorkloads) {
  for (const auto& name : list_builtin()) {
    if (name == "gqa_paged_decode_h32_kv4_d128_ps1" || name == "gqa_paged_decode_h24_kv4_d128_ps64" ||
        name == kSolGqaRopeBackward)
      continue;
    auto w = builtin_workloads(name);
    ASSERT_EQ(w.size(), 3u) << name;
    EXPECT_EQ(w[0].axes.at("batch_size"), 1);
    EXPECT_EQ(w[1].axes.at("batch_size"), 4);
    EXPECT_EQ(w[2].axes.at("batch_size"), 16);
    EXPECT_EQ(w[2].uuid, make_decode_workload(*find_builtin(name), 16, 1409, 512).uuid);
  }
}

TEST(Builtin, SmallWorkloads) {
  auto small = [](const std::string& name, int64_t batch, int64_t pages) {
    auto def = *find_builtin(name);
    for (const auto& w : builtin_workloads(name))
      if (w.axes.at("batch_size") == batch && w.axes.at("num_pages") == pages) return is_small(def, w);
    ADD_FAILURE() << "no workload " << batch << "/" << pages;
    return false;
  };
  const std::string ps1 = "gqa_paged_decode_h32_kv4_d128_ps1", ps64 = "gqa_paged_decode_h24_kv4_d128_ps64";
  // Every ps1 case up to batch 16 (at most 23079 tokens, 32348 pages) runs on the CPU; the largest do not.
  auto def1 = *find_builtin(ps1);
  for (const auto& w : builtin_workloads(ps1))
    if (w.axes.at("batch_size") <= 16) {
      EXPECT_TRUE(is_small(def1, w)) << w.uuid;
    }
  EXPECT_FALSE(small(ps1, 64, 61535));
  EXPECT_TRUE(small(ps64, 1, 425));    // 23104 tokens, 27.9M cache elements in all
  EXPECT_FALSE(small(ps64, 2, 1348));  // 44M elements per cache
  EXPECT_FALSE(small(ps64, 16, 19713));
  auto sol = *find_builtin(kSolGqaRopeBackward);
  int sol_small = 0;
  for (const auto& w : builtin_workloads(kSolGqaRopeBackward)) {
    EXPECT_EQ(is_small(sol, w), w.axes.at("batch_size") * w.axes.at("seq_len") <= 256);
    sol_small += is_small(sol, w);
  }
  EXPECT_EQ(sol_small, 4);  // (1,128) (2,128) (1,131) (1,256)
}

TEST(Builtin, DataIsEmbedded) {
  auto paths = builtin_file_paths();
  EXPECT_GE(paths.size(), 17u + 17u + 3u);
  // Each embedded file is byte-identical to the definitions/ folder it was built from.
  for (const auto& p : paths)
    EXPECT_EQ(*builtin_file(p), test::read_file(fs::path(test::source_dir()) / "definitions" / p)) << p;
}

}  // namespace
}  // namespace kindex::catalog
