#include "catalog/inputs.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "catalog/builtin.hpp"
#include "catalog/constraints.hpp"
#include "catalog/page_table.hpp"
#include "catalog/safetensors.hpp"
#include "core/random.hpp"
#include "helpers.hpp"
#include "support/paths.hpp"

namespace kindex::catalog {
namespace {

const std::string kPs1 = "gqa_paged_decode_h32_kv4_d128_ps1";
const std::string kPs64 = "gqa_paged_decode_h24_kv4_d128_ps64";

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

TEST(Inputs, DecodeInputsFollowTheDefinitionAndPassItsChecks) {
  Definition def = *find_builtin(kPs64);
  Workload w = builtin_workloads(kPs64)[3];  // (1, 425, 361)
  Inputs in = generate_inputs(def, w, 5);
  auto axes = resolve_axes(def, w);
  EXPECT_NO_THROW(check_inputs(def, axes, in, "test"));
  EXPECT_EQ(in.tensors.at("q").shape(), (std::vector<int64_t>{1, 24, 128}));
  EXPECT_EQ(in.tensors.at("k_cache").shape(), (std::vector<int64_t>{425, 64, 4, 128}));
  EXPECT_EQ(in.tensors.at("k_cache").dtype(), DType::bf16);
  EXPECT_EQ(in.tensors.at("kv_indptr").get(1), 361);
  EXPECT_NEAR(in.scalars.at("sm_scale"), 0.08838834764831843, 1e-15);
  // q is standard normal.
  TensorView q = in.tensors.at("q").view();
  double sum = 0, sq = 0;
  for (int64_t i = 0; i < q.numel(); ++i) sum += q.get(i), sq += q.get(i) * q.get(i);
  EXPECT_NEAR(sum / double(q.numel()), 0.0, 0.1);
  EXPECT_NEAR(sq / double(q.numel()), 1.0, 0.1);
  // The page table is the generator's for this workload.
  PageTable pt = generate_page_table(1, 425, 361, 64, page_table_seed(w));
  EXPECT_EQ(std::memcmp(in.tensors.at("kv_indices").data(), pt.kv_indices.data(), 361 * 4), 0);
}

// A workload's kv_indptr "lengths" reaches the generator: its index tensors are the generator's table for that
// distribution (same seed), and only kv_indptr's key counts.
TEST(Inputs, TheWorkloadsLengthDistributionReachesThePageTable) {
  Definition def = *find_builtin(kPs64);
  const Workload base = builtin_workloads(kPs64)[14];  // (16, 14977, 6068)
  GenerateOptions options;
  options.skip_random_floats = true;
  const Inputs plain = generate_inputs(def, base, 1, options);
  std::set<std::vector<int32_t>> indptrs;
  for (LengthDistribution d : {LengthDistribution::exponential, LengthDistribution::equal,
                               LengthDistribution::long_tail, LengthDistribution::one_long}) {
    SCOPED_TRACE(std::string(length_distribution_name(d)));
    Workload w = base;
    w.inputs["kv_indptr"].lengths = length_distribution_name(d);
    EXPECT_EQ(page_table_lengths(w), d);
    Inputs in = generate_inputs(def, w, 1, options);
    PageTableOptions o;
    o.lengths = d;
    PageTable pt = generate_page_table(16, 14977, 6068, 64, page_table_seed(w), o);
    const Tensor& indptr = in.tensors.at("kv_indptr");
    EXPECT_EQ(std::vector<int32_t>(indptr.ptr<int32_t>(), indptr.ptr<int32_t>() + 17), pt.kv_indptr);
    EXPECT_EQ(std::memcmp(in.tensors.at("kv_indices").data(), pt.kv_indices.data(), 6068 * 4), 0);
    EXPECT_EQ(std::memcmp(in.tensors.at("kv_last_page_len").data(), pt.kv_last_page_len.data(), 16 * 4), 0);
    EXPECT_NO_THROW(check_inputs(def, resolve_axes(def, w), in, "test", /*allow_missing=*/true));
    indptrs.insert(pt.kv_indptr);
    // "exponential" written out is the default: the same table as no key at all.
    if (d == LengthDistribution::exponential) {
      EXPECT_TRUE(same_bytes(in.tensors.at("kv_indices"), plain.tensors.at("kv_indices")));
    }
  }
  EXPECT_EQ(indptrs.size(), 4u);
  Workload unknown = base;
  unknown.inputs["kv_indptr"].lengths = "zipf";  // only a hand-built workload can hold one
  EXPECT_KINDEX_ERROR(generate_inputs(def, unknown, 1, options), base.uuid, "inputs.kv_indptr.lengths", "zipf");
}

TEST(Inputs, OnlyReferencedPagesAreDrawnAndTheirValuesDoNotDependOnWhichAre) {
  Definition def = *find_builtin(kPs64);
  Workload w = builtin_workloads(kPs64)[3];  // 425 pages, 361 referenced
  Inputs in = generate_inputs(def, w, 5);
  const Tensor& k = in.tensors.at("k_cache");
  Tensor full(k.dtype(), k.shape());  // what FlashInfer-Bench's rule draws for every page
  fill_normal(full, 5, stream_id("k_cache"));
  std::vector<char> used(425, 0);
  for (int64_t i = 0; i < in.tensors.at("kv_indices").numel(); ++i) used[size_t(in.tensors.at("kv_indices").get(i))] = 1;
  const int64_t page_elems = k.numel() / 425;
  int unused = 0;
  for (int64_t p = 0; p < 425; ++p) {
    bool zeros = true, same = true;
    for (int64_t e = p * page_elems; e < (p + 1) * page_elems; ++e) {
      zeros = zeros && k.get(e) == 0.0;
      same = same && k.get(e) == full.get(e);
    }
    if (used[size_t(p)]) {
      EXPECT_TRUE(same) << "page " << p;
      EXPECT_FALSE(zeros) << "page " << p;
    } else {
      EXPECT_TRUE(zeros) << "page " << p;
      ++unused;
    }
  }
  EXPECT_GT(unused, 0);
}

// The plan the runner hands to the device generator (plan_random_floats) describes every random float tensor and
// nothing else; drawing it with fill_random gives generate_inputs' tensors, byte for byte.
TEST(Inputs, APlanDrawnLaterGivesTheSameTensors) {
  for (const std::string& name : {kPs1, kPs64, std::string(kSolGqaRopeBackward)}) {
    Problem problem = builtin_problem(name);
    const Workload& w = problem.workloads.at(2);
    const uint64_t seed = default_seed(problem.definition) + 2;
    Inputs drawn = generate_inputs(problem.definition, w, seed);
    Inputs plan = generate_inputs(problem.definition, w, seed, {.plan_random_floats = true});
    ASSERT_FALSE(plan.random.empty()) << name;
    EXPECT_EQ(plan.tensors.size() + plan.random.size(), drawn.tensors.size()) << name;
    for (const auto& [input, fill] : plan.random) {
      EXPECT_EQ(plan.tensors.count(input), 0u) << input;
      Tensor t(fill.dtype, fill.shape);
      fill_random(t, fill, seed);
      EXPECT_TRUE(same_bytes(t, drawn.tensors.at(input))) << name << " " << input;
    }
    for (const auto& [input, t] : plan.tensors) EXPECT_TRUE(same_bytes(t, drawn.tensors.at(input))) << input;
    EXPECT_TRUE(drawn.random.empty());
  }
  // A paged cache's plan marks exactly the pages the page table references.
  Problem ps64 = builtin_problem(kPs64);
  Inputs plan = generate_inputs(ps64.definition, ps64.workloads.at(3), 1, {.plan_random_floats = true});
  const RandomFill& k = plan.random.at("k_cache");
  std::vector<uint8_t> expected(k.pages_used.size(), 0);
  for (int64_t i = 0; i < plan.tensors.at("kv_indices").numel(); ++i)
    expected[size_t(plan.tensors.at("kv_indices").get(i))] = 1;
  EXPECT_EQ(k.pages_used, expected);
  EXPECT_EQ(k.page_elems, 64 * 4 * 128);
}

TEST(Inputs, ReproducibleSeedsAndFixedPageTables) {
  Definition def = *find_builtin(kPs1);
  Workload w = builtin_workloads(kPs1)[1];
  Inputs a = generate_inputs(def, w, 11), b = generate_inputs(def, w, 11), c = generate_inputs(def, w, 12);
  for (const auto& [name, t] : a.tensors) EXPECT_TRUE(same_bytes(t, b.tensors.at(name))) << name;
  EXPECT_FALSE(same_bytes(a.tensors.at("q"), c.tensors.at("q")));
  EXPECT_FALSE(same_bytes(a.tensors.at("k_cache"), c.tensors.at("k_cache")));
  // A workload's page table does not change between trials, as a captured blob would not.
  EXPECT_TRUE(same_bytes(a.tensors.at("kv_indices"), c.tensors.at("kv_indices")));
  EXPECT_TRUE(same_bytes(a.tensors.at("kv_indptr"), c.tensors.at("kv_indptr")));
}

TEST(Inputs, ConstraintsHoldForEveryBundledDecodeWorkload) {
  for (const std::string& name : list_builtin()) {
    Definition def = *find_builtin(name);
    if (!decode_family_params(def)) continue;
    for (const Workload& w : builtin_workloads(name)) {
      SCOPED_TRACE(name + " " + w.uuid);
      GenerateOptions opt;
      opt.skip_random_floats = true;  // the page tables are what the constraints read
      Inputs in = generate_inputs(def, w, 1, opt);
      EXPECT_NO_THROW(check_inputs(def, resolve_axes(def, w), in, "test", /*allow_missing=*/true));
    }
  }
}

class BadDecodeInputs : public testing::Test {
 protected:
  void SetUp() override {
    def = *find_builtin(kPs64);
    w = make_decode_workload(def, 4, 60, 40);
    axes = resolve_axes(def, w);
    in = generate_inputs(def, w, 3);
    ASSERT_NO_THROW(check_inputs(def, axes, in, "wl"));
  }
  int32_t* indptr() { return in.tensors.at("kv_indptr").ptr<int32_t>(); }
  int32_t* indices() { return in.tensors.at("kv_indices").ptr<int32_t>(); }
  int32_t* last() { return in.tensors.at("kv_last_page_len").ptr<int32_t>(); }
  Definition def;
  Workload w;
  std::map<std::string, int64_t> axes;
  Inputs in;
};

TEST_F(BadDecodeInputs, PageIdOutOfRange) {
  indices()[17] = 60;
  EXPECT_KINDEX_ERROR(check_inputs(def, axes, in, "wl"), "wl", "kv_indices[17]", "60");
}

TEST_F(BadDecodeInputs, NonMonotonicIndptr) {
  std::swap(indptr()[1], indptr()[2]);
  EXPECT_KINDEX_ERROR(check_inputs(def, axes, in, "wl"), "wl", "kv_indptr[", "");
}

TEST_F(BadDecodeInputs, LastPageLenZeroOrAbovePageSize) {
  int32_t b = indptr()[1] > indptr()[0] ? 0 : 1;
  last()[b] = 0;
  EXPECT_KINDEX_ERROR(check_inputs(def, axes, in, "wl"), "wl", "kv_last_page_len[" + std::to_string(b) + "]", "0");
  last()[b] = 65;
  EXPECT_KINDEX_ERROR(check_inputs(def, axes, in, "wl"), "wl", "kv_last_page_len[" + std::to_string(b) + "]", "65");
}

TEST_F(BadDecodeInputs, ConstraintViolation) {
  indptr()[4] = 39;  // num_kv_indices == kv_indptr[-1].item() fails
  EXPECT_KINDEX_ERROR(check_inputs(def, axes, in, "wl"), "wl", "constraints[1]", "40 == 39");
}

TEST_F(BadDecodeInputs, DtypeAndShapeMismatch) {
  in.tensors["q"] = Tensor(DType::f32, {4, 24, 128});
  EXPECT_KINDEX_ERROR(check_inputs(def, axes, in, "wl"), "wl", "q.dtype", "float32");
  in.tensors["q"] = Tensor(DType::bf16, {4, 24, 64});
  EXPECT_KINDEX_ERROR(check_inputs(def, axes, in, "wl"), "wl", "q.shape", "[4, 24, 64]");
  in.tensors.erase("q");
  EXPECT_KINDEX_ERROR(check_inputs(def, axes, in, "wl"), "wl", "q", "");
}

TEST(Inputs, SolRules) {
  Definition def = *find_builtin(kSolGqaRopeBackward);
  EXPECT_EQ(default_seed(def), 200u);
  Workload w;
  for (const Workload& x : builtin_workloads(kSolGqaRopeBackward))
    if (x.axes.at("batch_size") == 1 && x.axes.at("seq_len") == 128) w = x;
  ASSERT_FALSE(w.uuid.empty());
  Inputs in = generate_inputs(def, w, default_seed(def));
  EXPECT_NO_THROW(check_inputs(def, resolve_axes(def, w), in, "sol"));
  EXPECT_NEAR(in.scalars.at("scaling"), 0.08838834764831845, 1e-15);

  auto stddev = [](const Tensor& tensor) {
    TensorView t = tensor.view();
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < t.numel(); ++i) s += t.get(i), s2 += t.get(i) * t.get(i);
    double m = s / double(t.numel());
    return std::sqrt(s2 / double(t.numel()) - m * m);
  };
  // Weights: randn / sqrt(fan_in), fan_in = shape[1].
  EXPECT_NEAR(stddev(in.tensors.at("q_weight")) * std::sqrt(5120.0), 1.0, 0.02);
  EXPECT_NEAR(stddev(in.tensors.at("o_weight")) * std::sqrt(4096.0), 1.0, 0.02);
  EXPECT_NEAR(stddev(in.tensors.at("hidden_states")), 1.0, 0.02);
  // cos and sin come from one tensor of clamped angles.
  TensorView cos = in.tensors.at("cos").view(), sin = in.tensors.at("sin").view();
  bool saw_clamp = false;
  for (int64_t i = 0; i < cos.numel(); ++i) {
    double c = cos.get(i), s = sin.get(i);
    EXPECT_NEAR(c * c + s * s, 1.0, 0.02);
    if (c <= -0.999) saw_clamp = true;  // angles beyond pi are clamped to pi
  }
  EXPECT_TRUE(saw_clamp);
  // attn_weights: softmax rows of fp32 randn, in bf16.
  TensorView attn = in.tensors.at("attn_weights").view();
  ASSERT_EQ(attn.shape, (std::vector<int64_t>{1, 32, 128, 128}));
  for (int64_t r = 0; r < 32 * 128; r += 97) {
    double row = 0;
    for (int64_t c = 0; c < 128; ++c) {
      EXPECT_GT(attn.get(r * 128 + c), 0.0);
      row += attn.get(r * 128 + c);
    }
    EXPECT_NEAR(row, 1.0, 0.02);
  }
  Inputs again = generate_inputs(def, w, default_seed(def));
  EXPECT_TRUE(same_bytes(in.tensors.at("attn_weights"), again.tensors.at("attn_weights")));
}

TEST(Inputs, SafetensorsInputsAreReadFromDisk) {
  Definition def = *find_builtin(kPs1);
  PageTable pt = generate_page_table(2, 50, 9, 1, 77);
  Tensor indptr(DType::i32, {3}), indices(DType::i32, {9});
  std::memcpy(indptr.data(), pt.kv_indptr.data(), 12);
  std::memcpy(indices.data(), pt.kv_indices.data(), 36);
  test::TempDir dir;
  auto line = [&](const std::string& key) {
    nlohmann::json w = {
        {"uuid", "u"},
        {"axes", {{"batch_size", 2}, {"num_pages", 50}, {"len_indptr", 3}, {"num_kv_indices", 9}}},
        {"inputs",
         {{"kv_indptr", {{"type", "safetensors"}, {"path", "./blob/t.safetensors"}, {"tensor_key", "kv_indptr"}}},
          {"kv_indices", {{"type", "safetensors"}, {"path", "./blob/t.safetensors"}, {"tensor_key", key}}},
          {"sm_scale", {{"type", "scalar"}, {"value", 0.5}}}}}};
    return nlohmann::json{{"definition", kPs1}, {"workload", w}}.dump();
  };
  std::filesystem::create_directories(dir.path() / "blob");
  write_safetensors(dir.path() / "blob" / "t.safetensors", {{"kv_indptr", indptr}, {"kv_indices", indices}});
  Workload w = parse_workload_line(line("kv_indices"), def, "w.jsonl", 1, dir.path().string());
  Inputs in = generate_inputs(def, w, 1);
  EXPECT_TRUE(same_bytes(in.tensors.at("kv_indices"), indices));
  EXPECT_NO_THROW(check_inputs(def, resolve_axes(def, w), in, "w"));

  Workload bad_key = parse_workload_line(line("nope"), def, "w.jsonl", 1, dir.path().string());
  EXPECT_KINDEX_ERROR(generate_inputs(def, bad_key, 1), "t.safetensors", "tensor_key", "nope");
  Workload wrong_tensor = parse_workload_line(line("kv_indptr"), def, "w.jsonl", 1, dir.path().string());
  EXPECT_KINDEX_ERROR(generate_inputs(def, wrong_tensor, 1), "t.safetensors", "kv_indptr.shape", "[3]");
  Workload missing_file =
      parse_workload_line(line("kv_indices"), def, "w.jsonl", 1, (dir.path() / "elsewhere").string());
  EXPECT_KINDEX_ERROR(generate_inputs(def, missing_file, 1), "t.safetensors", "", "");
}

}  // namespace
}  // namespace kindex::catalog
