#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "bench/floors.hpp"
#include "bench/problem.hpp"
#include "core/tensor.hpp"

namespace kindex::bench {

namespace {

// Host tensors for a decode call: page table given, caches of num_pages pages, batch from the indptr.
struct DecodeCall {
  std::vector<Tensor> owned;
  CallArgs args;
  DecodeCall(int64_t heads, int64_t kv_heads, int64_t page_size, int64_t num_pages, std::vector<int32_t> indptr,
             std::vector<int32_t> indices, std::vector<int32_t> last) {
    const int64_t batch = int64_t(indptr.size()) - 1;
    auto add = [&](TensorMap& m, const char* name, DType t, std::vector<int64_t> shape) -> Tensor& {
      owned.emplace_back(t, shape);
      m[name] = owned.back().view();
      return owned.back();
    };
    owned.reserve(16);
    add(args.inputs, "q", DType::bf16, {batch, heads, 128});
    add(args.inputs, "k_cache", DType::bf16, {num_pages, page_size, kv_heads, 128});
    add(args.inputs, "v_cache", DType::bf16, {num_pages, page_size, kv_heads, 128});
    std::memcpy(add(args.inputs, "kv_indptr", DType::i32, {batch + 1}).data(), indptr.data(), indptr.size() * 4);
    std::memcpy(add(args.inputs, "kv_indices", DType::i32, {int64_t(indices.size())}).data(), indices.data(),
                indices.size() * 4);
    if (!last.empty())
      std::memcpy(add(args.inputs, "kv_last_page_len", DType::i32, {batch}).data(), last.data(), last.size() * 4);
    args.scalars["sm_scale"] = 0.088;
    add(args.outputs, "output", DType::bf16, {batch, heads, 128});
    add(args.outputs, "lse", DType::f32, {batch, heads});
  }
};

}  // namespace

TEST(Floors, DatasheetsOfTheProtocol) {
  auto h200 = datasheet_for("NVIDIA H200");
  ASSERT_TRUE(h200);
  EXPECT_DOUBLE_EQ(h200->dram_bytes_per_s, 4800e9);
  EXPECT_DOUBLE_EQ(h200->dense_flops_per_s, 989e12);
  auto h100 = datasheet_for("NVIDIA H100 80GB HBM3");
  ASSERT_TRUE(h100);
  EXPECT_DOUBLE_EQ(h100->dram_bytes_per_s, 3350e9);
  auto b200 = datasheet_for("NVIDIA B200");
  ASSERT_TRUE(b200);
  EXPECT_DOUBLE_EQ(b200->dram_bytes_per_s, 8000e9);
  EXPECT_DOUBLE_EQ(b200->dense_flops_per_s, 2250e12);
  EXPECT_FALSE(datasheet_for("NVIDIA GeForce RTX 4090"));
}

// Seed 003: gqa_paged_decode_h24_kv4_d128_ps64, num_pages 425: 425 x 64 x 4 x 128 x 2 B x 2 = 55.7 MB at
// 8 TB/s (B200) = 6.96 us, bandwidth-bound (no arithmetic formula for the family).
TEST(Floors, HeadroomV1OfSeed003Is6Point96Microseconds) {
  std::vector<int32_t> indptr = {0, 361};
  std::vector<int32_t> indices(361);
  for (int i = 0; i < 361; ++i) indices[size_t(i)] = (i * 7) % 425;
  DecodeCall call(24, 4, 64, 425, indptr, indices, {17});
  WorkCount w = count_work(ProblemKind::paged_decode, call.args);
  const double caches = 425.0 * 64 * 4 * 128 * 2 * 2;
  EXPECT_DOUBLE_EQ(caches, 55705600.0);
  // every declared input tensor: the caches, q (1x24x128 bf16), kv_indptr (2), kv_indices (361), last_page_len (1)
  EXPECT_DOUBLE_EQ(w.declared_input_bytes, caches + 24 * 128 * 2 + 2 * 4 + 361 * 4 + 4);
  EXPECT_FALSE(w.headroom_flops);
  Floor f = headroom_v1_floor(w, *datasheet_for("NVIDIA B200"));
  EXPECT_EQ(f.method, "headroom-v1");
  EXPECT_EQ(f.bound, "bandwidth");
  EXPECT_EQ(std::lround(f.floor_s * 1e8), 696);  // 6.96 us
  EXPECT_NEAR(f.floor_s, 55713200.0 / 8e12, 1e-15);
  EXPECT_NE(f.basis.find("bandwidth floor only"), std::string::npos);
}

TEST(Floors, HeadroomFlopFormulas) {
  EXPECT_DOUBLE_EQ(gemm_flops(8192, 8192, 8192), 2.0 * 8192.0 * 8192.0 * 8192.0);
  EXPECT_DOUBLE_EQ(attention_flops(2, 32, 1024, 1024, 128), 4.0 * 2 * 32 * 1024 * 1024 * 128);
  WorkCount w;
  w.declared_input_bytes = 3.0 * 8192 * 8192 * 2;
  w.headroom_flops = gemm_flops(8192, 8192, 8192);
  Floor f = headroom_v1_floor(w, *datasheet_for("NVIDIA H200"));
  EXPECT_EQ(f.bound, "compute");
  EXPECT_DOUBLE_EQ(f.floor_s, *w.headroom_flops / 989e12);
}

TEST(Floors, KindexFloorCountsOnlyTheTokensADecodeReads) {
  // Two sequences share page 3 (the prefix); sequence 0 reads 3 pages (last holds 10 tokens), sequence 1 two
  // pages (last holds 64). 100 pages exist. Distinct tokens: page 3 full (64), page 50 (64), page 7 (10),
  // page 9 (64) = 202.
  DecodeCall call(8, 1, 64, 100, {0, 3, 5}, {3, 50, 7, 3, 9}, {10, 64});
  WorkCount w = count_work(ProblemKind::paged_decode, call.args);
  const double kv = 2.0 * 202 * 1 * 128 * 2;
  const double small = 2 * 8 * 128 * 2 /*q*/ + 2 * 8 * 128 * 2 /*output*/ + 2 * 8 * 4 /*lse*/ + 3 * 4 + 5 * 4 + 2 * 4;
  EXPECT_DOUBLE_EQ(w.referenced_bytes, kv + small);
  // arithmetic counts every (sequence, token): 138 + 128 tokens
  EXPECT_DOUBLE_EQ(w.flops, 4.0 * (138 + 128) * 8 * 128);
  MeasuredRates rates = *published_measured_rates("NVIDIA H200");
  EXPECT_DOUBLE_EQ(rates.copy_bytes_per_s, 4.28e12);
  EXPECT_DOUBLE_EQ(rates.tensor_flops_per_s, 784e12);
  Floor f = kindex_floor(w, rates);
  EXPECT_DOUBLE_EQ(f.floor_s, (kv + small) / 4.28e12);
  EXPECT_EQ(f.bound, "bandwidth");
  EXPECT_NE(f.basis.find("4.28 TB/s"), std::string::npos);
}

TEST(Floors, SolTSolAndScore) {
  // MACs = 104,857,600 B S + 16,384 B S^2
  EXPECT_DOUBLE_EQ(l2_003_macs(1, 128), 104857600.0 * 128 + 16384.0 * 128 * 128);
  EXPECT_DOUBLE_EQ(l2_003_macs(4, 1024), 104857600.0 * 4096 + 16384.0 * 4 * 1024 * 1024);
  // compute-bound at (4, 1024): 2 * 5.0e11 MAC / 989.4e12
  const double macs = l2_003_macs(4, 1024);
  EXPECT_DOUBLE_EQ(sol_t_sol_seconds(macs, 1e9), 2 * macs / 989.4e12);
  EXPECT_NEAR(sol_t_sol_seconds(macs, 1e9) * 1e3, 1.0071, 1e-4);
  // bandwidth-bound when the bytes dominate
  EXPECT_DOUBLE_EQ(sol_t_sol_seconds(1e6, 4.8e9), 1e-3);
  // S = 1 at T_SOL, 0.5 at T_b, between otherwise
  EXPECT_DOUBLE_EQ(sol_score(0.2e-3, 0.2e-3, 1e-3), 1.0);
  EXPECT_DOUBLE_EQ(sol_score(1e-3, 0.2e-3, 1e-3), 0.5);
  EXPECT_NEAR(sol_score(0.4e-3, 0.2e-3, 1e-3), 0.8, 1e-12);
  // T_b tables: H200 from protocols.md, B200 published
  EXPECT_DOUBLE_EQ(*l2_003_baseline_seconds("NVIDIA H200", 4, 1024), 2.155e-3);
  EXPECT_DOUBLE_EQ(*l2_003_baseline_seconds("NVIDIA B200", 1, 691), 0.675327e-3);
  EXPECT_DOUBLE_EQ(*l2_003_published_b200_sol_seconds(1, 2048), 0.3134e-3);
  EXPECT_FALSE(l2_003_baseline_seconds("NVIDIA H200", 3, 333));
  EXPECT_FALSE(l2_003_baseline_seconds("NVIDIA A100", 4, 1024));
}

TEST(Floors, H200TSolGeomeanMatchesProtocols) {
  // protocols.md: H200 T_SOL with datasheet peaks has a geomean of 0.211 ms over the 16 workloads.
  const int64_t cases[16][2] = {{1, 691},  {2, 449},  {2, 128}, {16, 256}, {1, 1024}, {1, 131}, {1, 2048}, {1, 293},
                                {16, 128}, {4, 1024}, {8, 384}, {1, 128},  {1, 512},  {1, 256}, {2, 1024}, {4, 512}};
  double log_sum = 0;
  for (const auto& c : cases) {
    const double b = double(c[0]), s = double(c[1]);
    // compulsory bytes: 13 bf16 inputs read once + 5 bf16 outputs written once
    const double weights = (4096.0 * 5120 + 2 * 1024.0 * 5120 + 5120.0 * 4096) * 2;
    const double inputs =
        (2 * b * s * 5120 + 2 * b * s * 128 + 3 * b * 32 * s * 128 + b * 32 * s * s + b * s * 4096) * 2 + weights;
    const double outputs = b * s * 5120 * 2 + weights;
    log_sum += std::log(sol_t_sol_seconds(l2_003_macs(c[0], c[1]), inputs + outputs));
  }
  EXPECT_NEAR(std::exp(log_sum / 16) * 1e3, 0.211, 0.0015);
}

}  // namespace kindex::bench
