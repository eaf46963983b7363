// The device input generator (libkindex_gpu_reference: kindex_gpu_reference_fill_random) against the host one
// (catalog::fill_random): every element bit for bit, for each kind the catalog generates — normal in bf16, fp16 and
// fp32 with and without a scale, a paged KV cache with unused pages, SOL-ExecBench's cos / sin of clamped angles,
// softmax rows and weights / sqrt(fan_in) — and for whole workloads as the runner draws them. Skips without a device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "runner/execute/libraries.hpp"
#include "catalog/builtin.hpp"
#include "catalog/inputs.hpp"
#include "core/random.hpp"
#include "gpu_reference/gpu_reference.hpp"

namespace {

using kindex::DType;
using kindex::Tensor;
using kindex::catalog::RandomFill;

bool have_device() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

// The device's tensor for `fill`, copied back to the host.
Tensor draw_on_device(const RandomFill& f, uint64_t seed) {
  Tensor host(f.dtype, f.shape);
  void* dev = nullptr;
  EXPECT_EQ(cudaMalloc(&dev, host.nbytes() ? host.nbytes() : 1), cudaSuccess);
  cudaMemset(dev, 0x5A, host.nbytes());  // so an element the kernel skips shows
  const kindex_random_fill abi = kindex::runner::random_fill_abi(f, seed);
  EXPECT_EQ(kindex::gpu_reference::fill_random(abi, dev, nullptr), KINDEX_STATUS_OK);
  EXPECT_EQ(cudaMemcpy(host.data(), dev, host.nbytes(), cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(dev);
  return host;
}

// The index of the first element whose bits differ, or -1.
int64_t first_difference(const Tensor& a, const Tensor& b) {
  const size_t size = kindex::dtype_size(a.dtype());
  for (int64_t i = 0; i < a.numel(); ++i)
    if (std::memcmp(static_cast<const char*>(a.data()) + i * size, static_cast<const char*>(b.data()) + i * size,
                    size) != 0)
      return i;
  return -1;
}

void expect_same_bits(const RandomFill& f, uint64_t seed, const std::string& what) {
  Tensor host(f.dtype, f.shape);
  kindex::catalog::fill_random(host, f, seed);
  Tensor device = draw_on_device(f, seed);
  const int64_t at = first_difference(host, device);
  EXPECT_EQ(at, -1) << what << ": element " << at << " host " << host.view().get(at) << " device "
                    << device.view().get(at);
}

RandomFill fill(RandomFill::Kind kind, DType dtype, std::vector<int64_t> shape, const char* stream) {
  RandomFill f;
  f.kind = kind;
  f.dtype = dtype;
  f.shape = std::move(shape);
  f.stream = kindex::stream_id(stream);
  return f;
}

}  // namespace

TEST(RandomFill, EveryKindAndDtypeMatchesTheHostBitForBit) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  for (DType dtype : {DType::bf16, DType::f16, DType::f32}) {
    const std::string name(kindex::dtype_name(dtype));
    // An odd length: the last Box-Muller pair is half used.
    expect_same_bits(fill(RandomFill::Kind::normal, dtype, {3, 1001}, "q"), 1, "normal " + name);
    auto scaled = fill(RandomFill::Kind::normal, dtype, {640, 512}, "q_weight");
    scaled.scale = 1.0 / std::sqrt(512.0);
    expect_same_bits(scaled, 200, "weight / sqrt(fan_in) " + name);
    expect_same_bits(fill(RandomFill::Kind::cos_of_angle, dtype, {2, 77, 128}, "rope_angle"), 201, "cos " + name);
    expect_same_bits(fill(RandomFill::Kind::sin_of_angle, dtype, {2, 77, 128}, "rope_angle"), 201, "sin " + name);
    auto softmax = fill(RandomFill::Kind::softmax_rows, dtype, {2, 4, 131, 131}, "attn_weights");
    softmax.row = 131;
    expect_same_bits(softmax, 202, "softmax rows " + name);
  }
  // A paged cache: every third page unused (zeros).
  auto paged = fill(RandomFill::Kind::normal, DType::bf16, {90, 16, 4, 128}, "k_cache");
  paged.page_elems = 16 * 4 * 128;
  for (int p = 0; p < 90; ++p) paged.pages_used.push_back(p % 3 != 0);
  expect_same_bits(paged, 3, "paged cache");
}

// Whole workloads of the three seed problems, as the runner draws them: the plan (plan_random_floats) on the
// device gives generate_inputs' tensors.
TEST(RandomFill, SeedWorkloadsMatchGenerateInputs) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const std::string problems[] = {"gqa_paged_decode_h32_kv4_d128_ps1", "gqa_paged_decode_h24_kv4_d128_ps64",
                                  std::string(kindex::catalog::kSolGqaRopeBackward)};
  for (const std::string& problem_name : problems) {
    auto problem = kindex::catalog::builtin_problem(problem_name);
    const auto& def = problem.definition;
    const auto& w = problem.workloads.at(0);
    const uint64_t seed = kindex::catalog::default_seed(def) + 1;
    auto host = kindex::catalog::generate_inputs(def, w, seed);
    auto plan = kindex::catalog::generate_inputs(def, w, seed, {.plan_random_floats = true});
    ASSERT_FALSE(plan.random.empty()) << problem_name;
    for (const auto& [name, f] : plan.random) {
      ASSERT_EQ(plan.tensors.count(name), 0u) << name;
      Tensor device = draw_on_device(f, seed);
      const Tensor& expected = host.tensors.at(name);
      ASSERT_EQ(device.shape(), expected.shape()) << name;
      const int64_t at = first_difference(expected, device);
      EXPECT_EQ(at, -1) << problem_name << " " << name << ": element " << at;
    }
    for (const auto& [name, t] : plan.tensors) EXPECT_EQ(first_difference(t, host.tensors.at(name)), -1) << name;
  }
}
