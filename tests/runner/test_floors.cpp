#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "runner/record/environment.hpp"
#include "runner/record/floors.hpp"
#include "runner/execute/pipeline.hpp"
#include "runner/record/derive.hpp"
#include "catalog/builtin.hpp"
#include "core/error.hpp"
#include "runner/execute/problem.hpp"
#include "core/tensor.hpp"
#include "problem_manifest/problem_manifest.hpp"

namespace kindex::runner {

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
  // headroom-v1 is the store's formula on the run's manifests: the same bytes, counted from the WorkloadCase.
  const catalog::Problem problem = catalog::builtin_problem("gqa_paged_decode_h24_kv4_d128_ps64");
  const catalog::Workload* seed = nullptr;
  for (const auto& wl : problem.workloads)
    if (wl.axes.at("num_pages") == 425 && wl.axes.at("batch_size") == 1) seed = &wl;
  ASSERT_NE(seed, nullptr);
  const evidence::Manifest op = problem_manifest::operation_spec(problem.definition);
  const evidence::Manifest wl = problem_manifest::workload_case(problem.definition, *seed, op);
  EXPECT_FALSE(headroom_v1_floor(op.document, wl.document, "NVIDIA GeForce RTX 4090"));
  const std::optional<Floor> f = headroom_v1_floor(op.document, wl.document, "NVIDIA B200");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->method, "headroom-v1");
  EXPECT_EQ(f->bound, "bandwidth");
  EXPECT_DOUBLE_EQ(f->bytes, double(seed->axes.at("len_indptr") * 4 + seed->axes.at("num_kv_indices") * 4) +
                                 caches + 24 * 128 * 2 + 4);
  EXPECT_EQ(std::lround(f->floor_s * 1e8), 696);  // 6.96 us
  EXPECT_DOUBLE_EQ(f->floor_s, f->bytes / 8e12);
  EXPECT_NE(f->basis.find("bandwidth floor only"), std::string::npos);
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

}  // namespace kindex::runner

namespace kindex::runner {

namespace {

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

// The bundled L2/003 workload of (B, S).
WorkItem l2_003_item(int64_t b, int64_t s) {
  static const catalog::Problem problem = catalog::builtin_problem(catalog::kSolGqaRopeBackward);
  for (const auto& w : problem.workloads)
    if (w.axes.at("batch_size") == b && w.axes.at("seq_len") == s) return {&problem.definition, &w};
  ADD_FAILURE() << "no L2/003 workload " << b << "x" << s;
  return {};
}

// An L2/003 run of (B, S) that took `latency_s` on the GPU, with its bytes counted.
RunResult l2_003_run(int64_t b, int64_t s, double latency_s) {
  RunResult r;
  r.definition = catalog::kSolGqaRopeBackward;
  r.axes = {{"batch_size", b}, {"seq_len", s}};
  r.timed_on_device = true;
  r.timing.trials_ns = {{latency_s * 1e9, latency_s * 1e9, latency_s * 1e9}};
  r.work.compulsory_bytes = 3e8;
  return r;
}

}  // namespace

// kindex bench --baseline: T_b measured in one run on this machine (benchmarks/gpu/backward_vs_torch.py's JSON) replaces the
// published table in the SOL score, and the run says where its T_b came from.
TEST(Floors, MeasuredBaselineFileGivesTheSolScoresTb) {
  const std::string path = write_temp("baseline_ok.json", R"({"device": {"name": "NVIDIA H200"}, "workloads": [
      {"batch_size": 4, "seq_len": 1024, "t_b_ms": 3.0, "kindex": {"median_ms": 2.2}},
      {"batch_size": 1, "seq_len": 131, "t_b_ms": 0.5}]})");
  const BaselineTimes b = load_baseline_times(path);
  EXPECT_EQ("NVIDIA H200", b.device);
  EXPECT_DOUBLE_EQ(3.0e-3, *b.find(4, 1024));
  EXPECT_DOUBLE_EQ(0.5e-3, *b.find(1, 131));
  EXPECT_FALSE(b.find(2, 1024));

  Environment env;
  env.has_gpu = true;
  env.gpu_name = "NVIDIA H200";
  RunResult published = l2_003_run(4, 1024, 2.0e-3);
  derive(published, l2_003_item(4, 1024), env, std::nullopt);
  EXPECT_DOUBLE_EQ(2.155e-3, *published.t_baseline_s);  // protocols.md's torch.compile time
  EXPECT_NE(std::string::npos, published.t_baseline_source.find("published"));
  RunResult measured = l2_003_run(4, 1024, 2.0e-3);
  derive(measured, l2_003_item(4, 1024), env, std::nullopt, b);
  EXPECT_DOUBLE_EQ(3.0e-3, *measured.t_baseline_s);
  EXPECT_NE(std::string::npos, measured.t_baseline_source.find(path));
  EXPECT_DOUBLE_EQ(sol_score(2.0e-3, *measured.t_sol_s, 3.0e-3), *measured.sol_score);
  EXPECT_GT(*measured.sol_score, *published.sol_score);  // the same kernel against a slower baseline
  RunResult absent = l2_003_run(2, 1024, 2.0e-3);  // not in the file: no score rather than a mixed one
  derive(absent, l2_003_item(2, 1024), env, std::nullopt, b);
  EXPECT_FALSE(absent.t_baseline_s);
  EXPECT_FALSE(absent.sol_score);
  EXPECT_NE(std::string::npos, absent.to_json().dump().find("t_sol_s"));
  EXPECT_NE(std::string::npos, measured.to_json().dump().find("\"t_baseline_source\""));
}

TEST(Floors, BadBaselineFilesNameTheFieldAndValue) {
  auto error_of = [](const std::string& name, const std::string& text) {
    try {
      load_baseline_times(text.empty() ? ::testing::TempDir() + "no_such_baseline.json" : write_temp(name, text));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(std::string::npos, error_of("missing", "").find("cannot be read"));
  EXPECT_NE(std::string::npos, error_of("b1.json", "[1, 2").find("is not a JSON object"));
  EXPECT_NE(std::string::npos, error_of("b2.json", R"({"workloads": []})").find("device.name"));
  const std::string empty = error_of("b3.json", R"({"device": {"name": "NVIDIA H200"}, "workloads": []})");
  EXPECT_NE(std::string::npos, empty.find("workloads")) << empty;
  const std::string negative = error_of("b4.json", R"({"device": {"name": "NVIDIA H200"}, "workloads": [
      {"batch_size": 1, "seq_len": 128, "t_b_ms": 0.4}, {"batch_size": 1, "seq_len": 131, "t_b_ms": -1}]})");
  EXPECT_NE(std::string::npos, negative.find("workloads[1].t_b_ms")) << negative;
  EXPECT_NE(std::string::npos, negative.find("-1")) << negative;
  const std::string missing = error_of("b5.json", R"({"device": {"name": "NVIDIA H200"}, "workloads": [
      {"batch_size": 1, "t_b_ms": 0.4}]})");
  EXPECT_NE(std::string::npos, missing.find("workloads[0].seq_len")) << missing;
  const std::string fractional = error_of("b6.json", R"({"device": {"name": "NVIDIA H200"}, "workloads": [
      {"batch_size": 1.5, "seq_len": 128, "t_b_ms": 0.4}]})");
  EXPECT_NE(std::string::npos, fractional.find("positive integers")) << fractional;
}

}  // namespace kindex::runner
