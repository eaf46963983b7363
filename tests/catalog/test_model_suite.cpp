// The model-shaped decode suite (definitions/model_suite, written by its generate.py): a dataset kindex reads from
// disk. Its definitions are the decode family's, its workloads follow the rule its README states, and their page
// tables have the shapes their length distributions promise.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <numeric>
#include <set>
#include <tuple>

#include "catalog/builtin.hpp"
#include "catalog/constraints.hpp"
#include "catalog/fib_export.hpp"
#include "catalog/inputs.hpp"
#include "catalog/loader.hpp"
#include "catalog/safetensors.hpp"
#include "helpers.hpp"
#include "support/paths.hpp"

namespace kindex::catalog {
namespace {

namespace fs = std::filesystem;

fs::path suite() { return fs::path(test::source_dir()) / "definitions" / "model_suite"; }

const std::vector<Problem>& problems() {
  static const std::vector<Problem> p = load_dataset(suite());
  return p;
}

constexpr int64_t kCacheLimit = int64_t(8) << 30;  // K and V together, bytes

int64_t cache_bytes(const DecodeParams& p, int64_t num_pages) {
  return 2 * num_pages * p.page_size * p.num_kv_heads * p.head_dim * 2;
}

std::vector<int64_t> lengths_of(const Inputs& in) {
  const Tensor& t = in.tensors.at("kv_indptr");
  std::vector<int64_t> out;
  for (int64_t b = 0; b + 1 < t.numel(); ++b) out.push_back(int64_t(t.get(b + 1) - t.get(b)));
  return out;
}

TEST(ModelSuite, DefinitionsAreTheDecodeFamilysInTheUpstreamForm) {
  ASSERT_EQ(problems().size(), 102u);
  std::map<std::tuple<int64_t, int64_t, int64_t>, std::set<int64_t>> page_sizes;
  for (const Problem& p : problems()) {
    const Definition& def = p.definition;
    SCOPED_TRACE(def.name);
    auto params = parse_decode_name(def.name);
    ASSERT_TRUE(params);
    const Definition family = decode_definition(*params);
    std::string difference;
    EXPECT_TRUE(same_signature(def, family, &difference)) << difference;
    EXPECT_EQ(decode_family_params(def)->name(), def.name);
    EXPECT_TRUE(params->head_dim == 64 || params->head_dim == 128 || params->head_dim == 256);
    // Where FlashInfer-Bench has a definition of the name, the suite's file is that file (whose reference its
    // authors worded their own way); elsewhere the reference is the family's.
    if (auto upstream = builtin_file("flashinfer-trace/definitions/gqa_paged/" + def.name + ".json")) {
      EXPECT_EQ(test::read_file(def.file), std::string(*upstream));
    } else {
      EXPECT_EQ(def.reference, family.reference);
    }
    page_sizes[{params->num_qo_heads, params->num_kv_heads, params->head_dim}].insert(params->page_size);
  }
  EXPECT_EQ(page_sizes.size(), 34u);
  for (const auto& [config, sizes] : page_sizes) EXPECT_EQ(sizes, (std::set<int64_t>{1, 16, 64}));
}

// The rule of definitions/model_suite/README.md, from the workload lines alone.
TEST(ModelSuite, WorkloadsFollowTheRule) {
  const std::set<int64_t> batches = {1, 4, 16, 64, 256}, contexts = {512, 4096, 32768, 131072};
  std::map<std::string, int> per_distribution;
  std::set<std::pair<int64_t, int64_t>> covered;
  // (definition, batch, context) -> distributions
  std::map<std::tuple<std::string, int64_t, int64_t>, std::set<std::string>> points;
  size_t workloads = 0;
  for (const Problem& p : problems()) {
    const DecodeParams params = *decode_family_params(p.definition);
    for (const Workload& w : p.workloads) {
      SCOPED_TRACE(w.source);
      ++workloads;
      const std::string lengths = w.inputs.at("kv_indptr").lengths;
      ASSERT_TRUE(lengths == "equal" || lengths == "long_tail" || lengths == "one_long") << lengths;
      ++per_distribution[lengths];
      const int64_t batch = w.axes.at("batch_size"), pages = w.axes.at("num_pages"),
                    indices = w.axes.at("num_kv_indices");
      EXPECT_TRUE(batches.count(batch));
      ASSERT_EQ(indices * params.page_size % batch, 0);
      const int64_t context = indices * params.page_size / batch;
      EXPECT_TRUE(contexts.count(context)) << context;
      EXPECT_EQ(pages, (indices * 5 + 3) / 4 + 64);  // ceil(1.25 x num_kv_indices) + 64
      EXPECT_LE(cache_bytes(params, pages), kCacheLimit);
      EXPECT_EQ(w.uuid, stable_uuid(p.definition.name + "/b" + std::to_string(batch) + "/p" + std::to_string(pages) +
                                    "/i" + std::to_string(indices) + "/" + lengths));
      EXPECT_DOUBLE_EQ(w.inputs.at("sm_scale").value, 1.0 / std::sqrt(double(params.head_dim)));
      points[{p.definition.name, batch, context}].insert(lengths);
      covered.insert({batch, context});
    }
  }
  EXPECT_EQ(workloads, 338u);
  EXPECT_EQ(per_distribution["long_tail"], per_distribution["one_long"]);
  // Each point with all three distributions over the same pages, batch 1 (where they coincide) with `equal` only.
  for (const auto& [point, dists] : points)
    EXPECT_EQ(dists.size(), std::get<1>(point) == 1 ? 1u : 3u) << std::get<0>(point) << " b" << std::get<1>(point);
  // Every grid point the smallest configuration (4 q / 1 kv head, d64) can hold in 8 GiB is run somewhere.
  const DecodeParams smallest{4, 1, 64, 1};
  for (int64_t b : batches)
    for (int64_t c : contexts)
      if (cache_bytes(smallest, (b * c * 5 + 3) / 4 + 64) <= kCacheLimit) {
        EXPECT_TRUE(covered.count({b, c})) << "batch " << b << " context " << c;
      }
}

// The tables kindex generates for the suite pass the definitions' checks and have their distributions' shape
// (workloads up to 2^17 page ids: the rest only take longer to generate).
TEST(ModelSuite, PageTablesHaveTheirDistributionsShape) {
  size_t checked = 0;
  std::set<std::string> seen;
  for (const Problem& p : problems()) {
    for (const Workload& w : p.workloads) {
      const int64_t indices = w.axes.at("num_kv_indices"), batch = w.axes.at("batch_size");
      if (indices > (int64_t(1) << 17)) continue;
      SCOPED_TRACE(w.source);
      const Inputs in = generate_inputs(p.definition, w, 1, {.skip_random_floats = true});
      EXPECT_NO_THROW(check_inputs(p.definition, resolve_axes(p.definition, w), in, w.source, /*allow_missing=*/true));
      std::vector<int64_t> len = lengths_of(in);
      const std::string dist = w.inputs.at("kv_indptr").lengths;
      auto [lo, hi] = std::minmax_element(len.begin(), len.end());
      EXPECT_GE(*lo, 1);
      if (dist == "equal") {
        EXPECT_LE(*hi - *lo, 1);
      } else if (dist == "one_long" && batch > 1) {
        EXPECT_GE(*hi, indices / 2);
      }
      if (dist == "long_tail" && batch >= 32 && indices >= 8 * batch) {
        std::sort(len.rbegin(), len.rend());
        EXPECT_GT(2 * std::accumulate(len.begin(), len.begin() + batch / 10, int64_t(0)), indices);
      }
      seen.insert(dist + (batch >= 32 ? " large" : ""));
      ++checked;
    }
  }
  EXPECT_GT(checked, 200u);
  EXPECT_EQ(seen.size(), 6u);  // every distribution checked, at batch >= 32 too
}

// `kindex catalog export --dataset` on the suite: each table in its distribution's folder, bit-identical to what the
// suite's workload gets.
TEST(ModelSuite, ExportsForFlashInferBench) {
  test::TempDir out;
  const std::vector<std::string> names = {"gqa_paged_decode_h8_kv2_d64_ps16", "gqa_paged_decode_h8_kv2_d64_ps64"};
  auto exported = export_flashinfer_bench_dataset(suite(), out.path(), names);
  ASSERT_EQ(exported.size(), 2u);
  const std::vector<Problem> loaded = load_dataset(out.path());
  ASSERT_EQ(loaded.size(), 2u);
  size_t compared = 0;
  for (const Problem& p : loaded) {
    const Problem* given = nullptr;
    for (const Problem& q : problems())
      if (q.definition.name == p.definition.name) given = &q;
    ASSERT_TRUE(given);
    ASSERT_EQ(p.workloads.size(), given->workloads.size());
    for (size_t i = 0; i < p.workloads.size(); ++i) {
      const Workload& w = p.workloads[i];
      const std::string lengths = given->workloads[i].inputs.at("kv_indptr").lengths;
      const std::string blob = "blob/kindex-page-tables/" + p.definition.name + "/" + lengths + "/" + w.uuid +
                               ".safetensors";
      EXPECT_EQ(w.inputs.at("kv_indices").path, blob);
      EXPECT_EQ(read_safetensors(out.path() / blob).metadata.at("lengths"), lengths);
      const Inputs got = generate_inputs(p.definition, w, 1, {.skip_random_floats = true});
      const Inputs want = generate_inputs(given->definition, given->workloads[i], 1, {.skip_random_floats = true});
      for (const char* input : {"kv_indptr", "kv_indices", "kv_last_page_len"}) {
        const Tensor &a = got.tensors.at(input), &b = want.tensors.at(input);
        ASSERT_EQ(a.shape(), b.shape());
        EXPECT_EQ(std::memcmp(a.data(), b.data(), a.nbytes()), 0) << input;
        ++compared;
      }
    }
  }
  EXPECT_GT(compared, 0u);
}

}  // namespace
}  // namespace kindex::catalog
