// GPU tests of kindex_gqa_rope_backward (SOL-ExecBench L2/003): every bundled workload against the CPU reference
// with the SOL comparator (>= 99% of elements within max_atol + 0.05 |ref|, no NaN/Inf, not all zero), outputs
// poisoned with NaN before each call, a second call bit-identical to the first, the other dK/dV summation (split or
// not) also against the reference, a CUDA-graph replay identical to a direct call, the attention variants
// (schedules, tilings, stream plans) bit-identical, the default plan per device (wgmma on compute capability 9.0,
// mma_sync elsewhere; where wgmma is the default, mma_sync is checked against the reference too), and the C ABI's
// answers to bad params. Inputs come
// from the catalog (SOL rules), the ground truth from kindex::reference::gqa_rope_backward, the verdict from
// kindex::compare::compare_sol.
//
// Rounds of fresh inputs (seeds 200, 201, ...): KINDEX_BACKWARD_ROUNDS if set, else 10 for workloads up to 1024
// tokens and 2 above (the CPU reference of the 4096-token cases is the slow part). KINDEX_BACKWARD_CASES, if set,
// restricts the workloads to a comma-separated list such as "1x128,4x1024".
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <span>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "catalog/builtin.hpp"
#include "catalog/inputs.hpp"
#include "compare/compare.hpp"
#include "core/half.hpp"
#include "core/tensor.hpp"
#include "kernels/layer_backward/backward.hpp"
#include "kindex/kindex.h"
#include "reference/reference.hpp"
#include "support/paths.hpp"

namespace {

using kindex::DType;
using kindex::Tensor;

struct Case {
  int batch_size, seq_len;
  double atol;
};
// The 16 SOL workloads in workload.jsonl order with their max_atol (checked against the catalog and tests/data/specs).
constexpr Case kCases[] = {{1, 691, 0.039}, {2, 449, 0.059}, {2, 128, 0.057}, {16, 256, 0.14},
                           {1, 1024, 0.041}, {1, 131, 0.049}, {1, 2048, 0.045}, {1, 293, 0.054},
                           {16, 128, 0.15}, {4, 1024, 0.08},  {8, 384, 0.11},  {1, 128, 0.066},
                           {1, 512, 0.039}, {1, 256, 0.043}, {2, 1024, 0.057}, {4, 512, 0.096}};
constexpr double kRtol = 0.05;
constexpr float kScaling = 0.08838834764831845f;
constexpr uint64_t kSeed = 200;

bool have_device() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

#define CUDA_OK(expr)                                                                  \
  do {                                                                                 \
    cudaError_t err_ = (expr);                                                         \
    ASSERT_EQ(err_, cudaSuccess) << #expr << ": " << cudaGetErrorString(err_);         \
  } while (0)

const char* const kOutputNames[] = {"grad_hidden_states", "grad_q_weight", "grad_k_weight", "grad_v_weight",
                                    "grad_o_weight"};

std::map<std::string, std::vector<int64_t>> shapes(int64_t b, int64_t s) {
  return {{"grad_output", {b, s, 5120}},        {"hidden_states", {b, s, 5120}},  {"cos", {b, s, 128}},
          {"sin", {b, s, 128}},                 {"q_weight", {4096, 5120}},       {"k_weight", {1024, 5120}},
          {"v_weight", {1024, 5120}},           {"o_weight", {5120, 4096}},       {"query_states", {b, 32, s, 128}},
          {"key_states", {b, 32, s, 128}},      {"value_states", {b, 32, s, 128}}, {"attn_weights", {b, 32, s, s}},
          {"attn_output", {b, s, 4096}},        {"grad_hidden_states", {b, s, 5120}},
          {"grad_q_weight", {4096, 5120}},      {"grad_k_weight", {1024, 5120}}, {"grad_v_weight", {1024, 5120}},
          {"grad_o_weight", {5120, 4096}}};
}

// The bundled SOL workload with these axes (the catalog's copy of workload.jsonl: tolerances, scalar inputs).
const kindex::catalog::Workload& catalog_workload(const Case& c) {
  static const auto all = kindex::catalog::builtin_workloads(kindex::catalog::kSolGqaRopeBackward);
  for (const auto& w : all)
    if (w.axes.at("batch_size") == c.batch_size && w.axes.at("seq_len") == c.seq_len) return w;
  throw std::runtime_error("no bundled workload " + std::to_string(c.batch_size) + "x" + std::to_string(c.seq_len));
}

// Inputs by the catalog's SOL rules (randn activations, weights randn/sqrt(fan_in), cos/sin of clamped randn
// angles, softmax rows for attn_weights).
std::map<std::string, Tensor> make_inputs(const Case& c, uint64_t seed) {
  static const auto def = kindex::catalog::find_builtin(kindex::catalog::kSolGqaRopeBackward);
  if (!def) throw std::runtime_error("the SOL L2/003 definition is not bundled");
  auto in = kindex::catalog::generate_inputs(*def, catalog_workload(c), seed);
  if (float(in.scalars.at("scaling")) != kScaling) throw std::runtime_error("unexpected scaling");
  return std::move(in.tensors);
}

struct DeviceBuffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  explicit DeviceBuffer(size_t n) : bytes(n) {
    if (cudaMalloc(&ptr, n) != cudaSuccess) ptr = nullptr;
  }
  ~DeviceBuffer() {
    if (ptr) cudaFree(ptr);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

// One workload on the device: inputs uploaded, outputs and workspace allocated, params filled.
struct DeviceProblem {
  int64_t b, s;
  std::map<std::string, std::unique_ptr<DeviceBuffer>> buffers;
  std::unique_ptr<DeviceBuffer> workspace;
  kindex_gqa_rope_backward_params params = KINDEX_GQA_ROPE_BACKWARD_PARAMS_INIT;

  DeviceProblem(int64_t b_, int64_t s_, const std::map<std::string, Tensor>& inputs) : b(b_), s(s_) {
    for (const auto& [name, shape] : shapes(b, s)) {
      buffers[name] = std::make_unique<DeviceBuffer>(size_t(kindex::shape_numel(shape)) * 2);
      if (auto it = inputs.find(name); it != inputs.end() && buffers[name]->ptr)
        cudaMemcpy(buffers[name]->ptr, it->second.data(), it->second.nbytes(), cudaMemcpyHostToDevice);
    }
    auto in = [&](const char* n) -> const void* { return buffers.at(n)->ptr; };
    auto out = [&](const char* n) { return buffers.at(n)->ptr; };
    params = {sizeof(kindex_gqa_rope_backward_params),
              int32_t(b),
              int32_t(s),
              in("grad_output"),
              in("hidden_states"),
              in("cos"),
              in("sin"),
              in("q_weight"),
              in("k_weight"),
              in("v_weight"),
              in("o_weight"),
              in("query_states"),
              in("key_states"),
              in("value_states"),
              in("attn_weights"),
              in("attn_output"),
              kScaling,
              out("grad_hidden_states"),
              out("grad_q_weight"),
              out("grad_k_weight"),
              out("grad_v_weight"),
              out("grad_o_weight")};
    size_t ws = 0;
    if (kindex_gqa_rope_backward_workspace_size(&params, &ws) == KINDEX_STATUS_OK)
      workspace = std::make_unique<DeviceBuffer>(ws);
  }
  bool allocated() const {
    for (const auto& [name, buf] : buffers)
      if (!buf->ptr) return false;
    return workspace && workspace->ptr;
  }
  void poison_outputs() const {  // 0xFFFF is a bf16 NaN: any element the kernels leave unwritten fails
    for (const char* name : kOutputNames) cudaMemset(buffers.at(name)->ptr, 0xFF, buffers.at(name)->bytes);
  }
  kindex_status run(cudaStream_t stream) const {
    return kindex_gqa_rope_backward(&params, workspace->ptr, workspace->bytes, stream);
  }
  std::map<std::string, Tensor> download() const {
    std::map<std::string, Tensor> out;
    auto shape = shapes(b, s);
    for (const char* name : kOutputNames) {
      Tensor t(DType::bf16, shape.at(name));
      cudaMemcpy(t.data(), buffers.at(name)->ptr, t.nbytes(), cudaMemcpyDeviceToHost);
      out.emplace(name, std::move(t));
    }
    return out;
  }
};

std::map<std::string, Tensor> cpu_reference(int64_t b, int64_t s, const std::map<std::string, Tensor>& in) {
  std::map<std::string, Tensor> out;
  auto shape = shapes(b, s);
  for (const char* name : kOutputNames) out.emplace(name, Tensor(DType::bf16, shape.at(name)));
  auto i = [&](const char* n) -> const void* { return in.at(n).data(); };
  auto o = [&](const char* n) { return out.at(n).data(); };
  const kindex_gqa_rope_backward_params p{sizeof(kindex_gqa_rope_backward_params),
                                           int32_t(b),
                                           int32_t(s),
                                           i("grad_output"),
                                           i("hidden_states"),
                                           i("cos"),
                                           i("sin"),
                                           i("q_weight"),
                                           i("k_weight"),
                                           i("v_weight"),
                                           i("o_weight"),
                                           i("query_states"),
                                           i("key_states"),
                                           i("value_states"),
                                           i("attn_weights"),
                                           i("attn_output"),
                                           kScaling,
                                           o("grad_hidden_states"),
                                           o("grad_q_weight"),
                                           o("grad_k_weight"),
                                           o("grad_v_weight"),
                                           o("grad_o_weight")};
  kindex::reference::gqa_rope_backward(p);
  return out;
}

int rounds_for(const Case& c) {
  if (const char* env = std::getenv("KINDEX_BACKWARD_ROUNDS")) return std::max(1, std::atoi(env));
  return int64_t(c.batch_size) * c.seq_len <= 1024 ? 10 : 2;
}

bool selected(const Case& c) {
  const char* env = std::getenv("KINDEX_BACKWARD_CASES");
  if (!env) return true;
  std::stringstream list(env);
  std::string item;
  const std::string want = std::to_string(c.batch_size) + "x" + std::to_string(c.seq_len);
  while (std::getline(list, item, ','))
    if (item == want) return true;
  return false;
}

bool bit_equal(const std::map<std::string, Tensor>& x, const std::map<std::string, Tensor>& y) {
  for (const auto& [name, t] : x)
    if (std::memcmp(t.data(), y.at(name).data(), t.nbytes()) != 0) return false;
  return true;
}

class BackwardWorkload : public testing::TestWithParam<Case> {};

TEST_P(BackwardWorkload, MatchesCpuReferenceWithSolComparator) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const Case c = GetParam();
  if (!selected(c)) GTEST_SKIP() << "not in KINDEX_BACKWARD_CASES";
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const int rounds = rounds_for(c);
  for (int round = 0; round < rounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round) + " seed " + std::to_string(kSeed + round));
    const auto inputs = make_inputs(c, kSeed + round);
    DeviceProblem dev(c.batch_size, c.seq_len, inputs);
    ASSERT_TRUE(dev.allocated());
    dev.poison_outputs();
    ASSERT_EQ(dev.run(stream), KINDEX_STATUS_OK) << kindex_last_error();
    CUDA_OK(cudaStreamSynchronize(stream));
    CUDA_OK(cudaGetLastError());
    const auto actual = dev.download();
    if (round == 0) {  // deterministic: a second call on fresh poison gives the same bits
      dev.poison_outputs();
      ASSERT_EQ(dev.run(stream), KINDEX_STATUS_OK) << kindex_last_error();
      CUDA_OK(cudaStreamSynchronize(stream));
      EXPECT_TRUE(bit_equal(actual, dev.download())) << "two calls on the same inputs differ";
    }
    // Other splits of the dK/dV sums over CTAs (attention.hpp column_splits; 1 = none) sum in other fp32 orders, so
    // they are checked against the reference too: no split in every round, at most 2 and 4 parts in the first. Where
    // the default is wgmma (compute capability 9.0) the mma_sync kernels, which sum in other orders again, are
    // checked too: their default plan (store_dp, {4, 4}) in every round (twice in the first: bit-identical), and
    // with no split in the first; and the wgmma kernels' other schedule and tiling in the first.
    namespace kb = kindex::kernels::backward;
    std::vector<std::pair<std::string, std::map<std::string, Tensor>>> results;
    results.emplace_back("", actual);
    std::vector<std::pair<std::string, kb::RunOptions>> others;
    for (int cap : {1, 2, 4}) {
      if (round > 0 && cap != 1) continue;
      kb::RunOptions options;
      options.max_column_splits = cap;
      others.emplace_back(" splits<=" + std::to_string(cap), options);
    }
    if (kb::default_kernels() == kb::AttentionKernels::wgmma) {
      kb::RunOptions options;
      options.kernels = kb::AttentionKernels::mma_sync;
      others.emplace_back(" mma_sync", options);
      if (round == 0) {
        options.max_column_splits = 1;
        others.emplace_back(" mma_sync splits<=1", options);
        kb::RunOptions wgmma_store;
        wgmma_store.kernels = kb::AttentionKernels::wgmma;
        wgmma_store.schedule = kb::AttentionSchedule::store_dp;
        wgmma_store.tiling = {4, 4};
        others.emplace_back(" wgmma store_dp 4x4", wgmma_store);
      }
    }
    for (const auto& [label, options] : others) {
      dev.poison_outputs();
      ASSERT_NO_THROW(
          kb::run(dev.params, dev.workspace->ptr, dev.workspace->bytes, stream, kb::Parts::all, options));
      CUDA_OK(cudaStreamSynchronize(stream));
      results.emplace_back(label, dev.download());
      if (round == 0 && label == " mma_sync") {  // deterministic too
        dev.poison_outputs();
        ASSERT_NO_THROW(
            kb::run(dev.params, dev.workspace->ptr, dev.workspace->bytes, stream, kb::Parts::all, options));
        CUDA_OK(cudaStreamSynchronize(stream));
        EXPECT_TRUE(bit_equal(results.back().second, dev.download())) << "two mma_sync calls on the same inputs differ";
      }
      if (label == " wgmma store_dp 4x4") {  // the wgmma kernels are bit-identical across schedules and tilings
        EXPECT_TRUE(bit_equal(actual, results.back().second)) << "the default (wgmma) and wgmma store_dp 4x4 differ";
      }
    }
    const auto expected = cpu_reference(c.batch_size, c.seq_len, inputs);
    for (const auto& [which, result] : results) {
      for (const char* name : kOutputNames) {
        const kindex::compare::SolTolerance tol{catalog_workload(c).tolerance->max_atol,
                                                catalog_workload(c).tolerance->max_rtol, 0.99, std::nullopt};
        const auto r = kindex::compare::compare_sol(name, result.at(name).view(), expected.at(name).view(), tol);
        std::cout << "[backward] B=" << c.batch_size << " S=" << c.seq_len << " round=" << round << which << " "
                  << name << " matched=" << r.matched_ratio << " max_abs=" << r.max_abs_error << " "
                  << (r.passed ? "ok" : r.reason) << "\n";
        EXPECT_TRUE(r.passed) << name << which << ": " << r.reason << " (matched " << r.matched_ratio
                              << ", max abs " << r.max_abs_error << ")";
      }
    }
    if (testing::Test::HasFailure()) break;
  }
  cudaStreamDestroy(stream);
}

std::string case_name(const testing::TestParamInfo<Case>& info) {
  return "B" + std::to_string(info.param.batch_size) + "_S" + std::to_string(info.param.seq_len);
}
INSTANTIATE_TEST_SUITE_P(Sol, BackwardWorkload, testing::ValuesIn(kCases), case_name);

TEST(Backward, WorkloadTableMatchesCatalog) {
  const auto all = kindex::catalog::builtin_workloads(kindex::catalog::kSolGqaRopeBackward);
  ASSERT_EQ(all.size(), std::size(kCases));
  for (const Case& c : kCases) {
    const auto& w = catalog_workload(c);
    ASSERT_TRUE(w.tolerance.has_value());
    EXPECT_NEAR(w.tolerance->max_atol, c.atol, 1e-9);
    EXPECT_NEAR(w.tolerance->max_rtol, kRtol, 1e-12);
  }
}

TEST(Backward, WorkloadTableMatchesUpstream) {
  const std::string path = kindex::test::data_dir() +
                           "/specs/sol-execbench/L2/003_grouped_query_attention_with_rope_backward/workload.jsonl";
  std::ifstream file(path);
  if (!file) GTEST_SKIP() << "no " << path;
  std::string line;
  size_t i = 0;
  while (std::getline(file, line)) {
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line);
    ASSERT_LT(i, std::size(kCases));
    EXPECT_EQ(j["axes"]["batch_size"].get<int>(), kCases[i].batch_size) << "line " << i;
    EXPECT_EQ(j["axes"]["seq_len"].get<int>(), kCases[i].seq_len) << "line " << i;
    EXPECT_NEAR(j["tolerance"]["max_atol"].get<double>(), kCases[i].atol, 1e-9) << "line " << i;
    ++i;
  }
  EXPECT_EQ(i, std::size(kCases));
}

TEST(Backward, GraphReplayMatchesDirectCall) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const auto inputs = make_inputs({1, 131, 0.049}, kSeed);
  DeviceProblem dev(1, 131, inputs);
  ASSERT_TRUE(dev.allocated());
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  dev.poison_outputs();
  ASSERT_EQ(dev.run(stream), KINDEX_STATUS_OK) << kindex_last_error();  // also creates plans, streams, events
  CUDA_OK(cudaStreamSynchronize(stream));
  const auto direct = dev.download();

  cudaGraph_t graph;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const kindex_status st = dev.run(stream);
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  ASSERT_EQ(st, KINDEX_STATUS_OK) << kindex_last_error();
  cudaGraphExec_t exec;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  dev.poison_outputs();
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaGraphLaunch(exec, stream));
  CUDA_OK(cudaStreamSynchronize(stream));
  EXPECT_TRUE(bit_equal(direct, dev.download()));
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

// Runs every variant on the case's inputs (outputs poisoned before each) and expects the first variant's outputs
// bit for bit from all the others.
void expect_bit_identical(const Case& c, std::span<const kindex::kernels::backward::RunOptions> variants) {
  namespace kb = kindex::kernels::backward;
  SCOPED_TRACE(std::to_string(c.batch_size) + "x" + std::to_string(c.seq_len));
  DeviceProblem dev(c.batch_size, c.seq_len, make_inputs(c, kSeed + 7));
  ASSERT_TRUE(dev.allocated());
  std::map<std::string, Tensor> first;
  for (size_t i = 0; i < variants.size(); ++i) {
    SCOPED_TRACE("variant " + std::to_string(i));
    dev.poison_outputs();
    ASSERT_NO_THROW(
        kb::run(dev.params, dev.workspace->ptr, dev.workspace->bytes, nullptr, kb::Parts::all, variants[i]));
    CUDA_OK(cudaDeviceSynchronize());
    if (i == 0) first = dev.download();
    else EXPECT_TRUE(bit_equal(first, dev.download()));
  }
}

// The mma_sync kernels' schedules (dP recomputed or stored), tilings (4 or 8 warps per CTA) and stream plans must all
// give bit-identical outputs: every warp does the same arithmetic in the same order, and round(dP) is the same bf16
// value either way. Together with the CPU-reference test of mma_sync's default plan this verifies the other variants.
TEST(Backward, AttentionSchedulesAreBitIdentical) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  namespace kb = kindex::kernels::backward;
  using S = kb::AttentionSchedule;
  const kb::AttentionKernels M = kb::AttentionKernels::mma_sync;
  const int splits = int(kb::kMaxColumnSplits);
  const kb::RunOptions variants[] = {
      {S::store_dp, {4, 4}, kb::StreamPlan::v3, splits, M},
      {S::recompute_dp, {4, 4}, kb::StreamPlan::v3, splits, M},
      {S::store_dp, {8, 8}, kb::StreamPlan::value_stream, splits, M},
      {S::recompute_dp, {8, 8}, kb::StreamPlan::value_high, splits, M},
      {S::store_dp, {8, 4}, kb::StreamPlan::v3, splits, M},
      {S::store_dp, {4, 8}, kb::StreamPlan::value_stream, splits, M},
      {S::store_dp, {4, 4}, kb::StreamPlan::rows_high, splits, M},
      {S::recompute_dp, {8, 8}, kb::StreamPlan::rows_high, splits, M},
      {std::nullopt, {}, kb::StreamPlan::v3, splits, M},  // mma_sync's default plan
  };
  for (const Case& c : {Case{1, 131, 0}, Case{2, 449, 0}, Case{1, 1024, 0}, Case{16, 128, 0}, Case{1, 691, 0}})
    ASSERT_NO_FATAL_FAILURE(expect_bit_identical(c, variants));
}

// The wgmma kernels sum in other fp32 orders than mma.sync (checked against the CPU reference above), but among
// themselves the schedules, tilings and stream plans must be bit-identical: the dP of the grad_q pass
// (recompute_dp) is the same wgmma sequence as the one the row_sums pass stores (store_dp), and a CTA of two
// warpgroups runs for each the same instructions on the same operands as a CTA of one.
TEST(Backward, WgmmaSchedulesAreBitIdentical) {
  namespace kb = kindex::kernels::backward;
  if (!have_device() || !kb::wgmma_supported()) GTEST_SKIP() << "needs a device of compute capability 9.0";
  using S = kb::AttentionSchedule;
  const kb::AttentionKernels W = kb::AttentionKernels::wgmma;
  const kb::RunOptions variants[] = {
      {S::store_dp, {4, 4}, kb::StreamPlan::v3, int(kb::kMaxColumnSplits), W},
      {S::recompute_dp, {4, 4}, kb::StreamPlan::v3, int(kb::kMaxColumnSplits), W},
      {S::store_dp, {0, 0}, kb::StreamPlan::rows_high, int(kb::kMaxColumnSplits), W},
      {S::recompute_dp, {4, 4}, kb::StreamPlan::value_high, int(kb::kMaxColumnSplits), W},
      {S::store_dp, {8, 8}, kb::StreamPlan::v3, int(kb::kMaxColumnSplits), W},
      {S::recompute_dp, {8, 4}, kb::StreamPlan::v3, int(kb::kMaxColumnSplits), W},
      {S::store_dp, {4, 8}, kb::StreamPlan::value_stream, int(kb::kMaxColumnSplits), W},
      {},  // the device's default plan: wgmma here
  };
  for (const Case& c : {Case{1, 131, 0}, Case{2, 449, 0}, Case{1, 1024, 0}, Case{16, 128, 0}})
    ASSERT_NO_FATAL_FAILURE(expect_bit_identical(c, variants));
}

// The plan the C ABI runs (backward.hpp resolve): wgmma + recompute_dp + {8, 8} on a device of compute capability
// 9.0 when the build holds sm_90a code, mma_sync + store_dp + {4, 4} everywhere else (sm_80, sm_100, a PTX JIT);
// fields set by the caller are kept.
TEST(Backward, DefaultPlanFollowsTheDevice) {
  namespace kb = kindex::kernels::backward;
  using S = kb::AttentionSchedule;
  const kb::AttentionPlan wgmma = kb::default_plan(kb::AttentionKernels::wgmma);
  EXPECT_EQ(wgmma.kernels, kb::AttentionKernels::wgmma);
  EXPECT_EQ(wgmma.schedule, S::recompute_dp);
  EXPECT_EQ(wgmma.tiling, (kb::AttentionTiling{8, 8}));
  const kb::AttentionPlan mma = kb::default_plan(kb::AttentionKernels::mma_sync);
  EXPECT_EQ(mma.kernels, kb::AttentionKernels::mma_sync);
  EXPECT_EQ(mma.schedule, S::store_dp);
  EXPECT_EQ(mma.tiling, (kb::AttentionTiling{4, 4}));
  if (!have_device()) GTEST_SKIP() << "no CUDA device";

  int device = 0, major = 0, minor = 0;
  CUDA_OK(cudaGetDevice(&device));
  CUDA_OK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  CUDA_OK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  const std::string archs = "," KINDEX_TEST_CUDA_ARCHS ",";
  const bool hopper = major == 9 && minor == 0 && archs.find(",90a,") != std::string::npos;
  SCOPED_TRACE("compute capability " + std::to_string(major) + "." + std::to_string(minor) + ", archs " + archs);
  const kb::AttentionPlan expected = hopper ? wgmma : mma;
  EXPECT_EQ(kb::wgmma_supported(), hopper);
  EXPECT_EQ(kb::default_kernels(), expected.kernels);
  const kb::RunOptions resolved = kb::resolve({});
  EXPECT_EQ(resolved.kernels, expected.kernels);
  EXPECT_EQ(resolved.schedule, expected.schedule);
  EXPECT_EQ(resolved.tiling, expected.tiling);
  EXPECT_EQ(resolved.streams, kb::kDefaultStreamPlan);

  kb::RunOptions mma_only;  // the kernels set, the rest from their plan
  mma_only.kernels = kb::AttentionKernels::mma_sync;
  const kb::RunOptions resolved_mma = kb::resolve(mma_only);
  EXPECT_EQ(resolved_mma.schedule, S::store_dp);
  EXPECT_EQ(resolved_mma.tiling, (kb::AttentionTiling{4, 4}));
  const kb::RunOptions given{S::store_dp, {4, 8}, kb::StreamPlan::rows_high, 2, kb::AttentionKernels::wgmma};
  const kb::RunOptions kept = kb::resolve(given);
  EXPECT_EQ(kept.schedule, S::store_dp);
  EXPECT_EQ(kept.tiling, (kb::AttentionTiling{4, 8}));
  EXPECT_EQ(kept.streams, kb::StreamPlan::rows_high);
  EXPECT_EQ(kept.max_column_splits, 2);
  EXPECT_EQ(kept.kernels, kb::AttentionKernels::wgmma);
}

// Bad params need no device: validation runs before anything is enqueued.
kindex_gqa_rope_backward_params fake_params() {
  static char dummy[256] __attribute__((aligned(256)));  // never dereferenced on the bad-param paths below
  kindex_gqa_rope_backward_params p = KINDEX_GQA_ROPE_BACKWARD_PARAMS_INIT;
  p.batch_size = 1;
  p.seq_len = 128;
  const void** in[] = {&p.grad_output, &p.hidden_states, &p.cos,         &p.sin,          &p.q_weight,
                       &p.k_weight,    &p.v_weight,      &p.o_weight,    &p.query_states, &p.key_states,
                       &p.value_states, &p.attn_weights, &p.attn_output};
  for (const void** x : in) *x = dummy;
  void** out[] = {&p.grad_hidden_states, &p.grad_q_weight, &p.grad_k_weight, &p.grad_v_weight, &p.grad_o_weight};
  for (void** x : out) *x = dummy;
  p.scaling = kScaling;
  return p;
}

TEST(Backward, BadParamsNameTheField) {
  size_t bytes = 0;
  EXPECT_EQ(kindex_gqa_rope_backward_workspace_size(nullptr, &bytes), KINDEX_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kindex_last_error()).find("params"), std::string::npos) << kindex_last_error();
  EXPECT_EQ(kindex_gqa_rope_backward(nullptr, nullptr, 0, nullptr), KINDEX_STATUS_INVALID_ARGUMENT);

  auto p = fake_params();
  p.batch_size = 0;
  EXPECT_EQ(kindex_gqa_rope_backward_workspace_size(&p, &bytes), KINDEX_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kindex_last_error()).find("batch_size = 0"), std::string::npos) << kindex_last_error();
  EXPECT_EQ(kindex_gqa_rope_backward(&p, nullptr, 0, nullptr), KINDEX_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kindex_last_error()).find("batch_size"), std::string::npos) << kindex_last_error();

  p = fake_params();
  p.seq_len = -5;
  EXPECT_EQ(kindex_gqa_rope_backward_workspace_size(&p, &bytes), KINDEX_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kindex_last_error()).find("seq_len = -5"), std::string::npos) << kindex_last_error();

  p = fake_params();
  ASSERT_EQ(kindex_gqa_rope_backward_workspace_size(&p, &bytes), KINDEX_STATUS_OK) << kindex_last_error();
  EXPECT_GT(bytes, size_t(128) * 6144 * 2);
  p.attn_weights = nullptr;
  EXPECT_EQ(kindex_gqa_rope_backward(&p, nullptr, bytes, nullptr), KINDEX_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kindex_last_error()).find("attn_weights = NULL"), std::string::npos) << kindex_last_error();

  p = fake_params();
  p.grad_k_weight = static_cast<char*>(p.grad_k_weight) + 2;
  EXPECT_EQ(kindex_gqa_rope_backward(&p, nullptr, bytes, nullptr), KINDEX_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kindex_last_error()).find("grad_k_weight"), std::string::npos) << kindex_last_error();
  EXPECT_NE(std::string(kindex_last_error()).find("aligned"), std::string::npos) << kindex_last_error();

  p = fake_params();
  p.scaling = NAN;
  EXPECT_EQ(kindex_gqa_rope_backward(&p, nullptr, bytes, nullptr), KINDEX_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kindex_last_error()).find("scaling"), std::string::npos) << kindex_last_error();

  p = fake_params();
  EXPECT_EQ(kindex_gqa_rope_backward(&p, const_cast<void*>(p.cos), bytes - 1, nullptr),
            KINDEX_STATUS_WORKSPACE_TOO_SMALL);
  EXPECT_NE(std::string(kindex_last_error()).find("workspace_bytes = " + std::to_string(bytes - 1)),
            std::string::npos)
      << kindex_last_error();
  EXPECT_EQ(kindex_gqa_rope_backward(&p, nullptr, bytes, nullptr), KINDEX_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kindex_last_error()).find("workspace = NULL"), std::string::npos) << kindex_last_error();

  // A good call clears the previous message.
  EXPECT_EQ(kindex_gqa_rope_backward_workspace_size(&p, &bytes), KINDEX_STATUS_OK);
  EXPECT_STREQ(kindex_last_error(), "");
}

}  // namespace
