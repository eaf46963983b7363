// The device comparator (libkindex_gpu_reference: kindex_gpu_reference_compare) against the host one
// (compare::compare_fib / compare_sol): every Report field equal, for both rules, bf16 / fp16 / fp32, on
// adversarial data — NaN and inf on either side, -0, all-zero solutions, elements exactly on the tolerance
// boundary, odd and empty sizes, more than 2^24 elements, first failures in late blocks — and the runner comparing
// a device run's outputs there. Skips without a device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "catalog/builtin.hpp"
#include "compare/compare.hpp"
#include "core/half.hpp"
#include "gpu_reference/gpu_reference.hpp"
#include "runner/measurement.hpp"
#include "runner/execute/libraries.hpp"
#include "runner/runner.hpp"
#include "support/same_report.hpp"

namespace {

using kindex::DType;
using kindex::Tensor;
namespace compare = kindex::compare;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

bool have_device() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

// A host tensor of `dtype` holding `values` (rounded to the dtype).
Tensor make(DType dtype, const std::vector<float>& values) {
  Tensor t(dtype, {int64_t(values.size())});
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::bf16)
      t.ptr<uint16_t>()[i] = kindex::float_to_bf16(values[i]);
    else if (dtype == DType::f16)
      t.ptr<uint16_t>()[i] = kindex::float_to_f16(values[i]);
    else
      t.ptr<float>()[i] = values[i];
  }
  return t;
}

kindex_dtype abi(DType d) {
  return d == DType::bf16 ? KINDEX_DTYPE_BF16 : d == DType::f16 ? KINDEX_DTYPE_FP16 : KINDEX_DTYPE_FP32;
}

struct Tols {
  double atol = 1e-2, rtol = 1e-2;
};

// The device's Report for (actual, expected): both copied to the device, tallied there, judged by the host's verdict.
compare::Report on_device(bool fib, const Tensor& actual, const Tensor& expected, Tols tol) {
  void *a = nullptr, *e = nullptr;
  const size_t bytes = actual.nbytes();
  EXPECT_EQ(cudaMalloc(&a, bytes ? bytes : 1), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&e, bytes ? bytes : 1), cudaSuccess);
  cudaMemcpy(a, actual.data(), bytes, cudaMemcpyHostToDevice);
  cudaMemcpy(e, expected.data(), bytes, cudaMemcpyHostToDevice);
  kindex_compare_tally tally{};
  EXPECT_EQ(kindex::gpu_reference::compare_tally(fib ? KINDEX_COMPARE_FLASHINFER_BENCH : KINDEX_COMPARE_SOL_EXECBENCH,
                                                 abi(actual.dtype()), a, e, actual.numel(), float(tol.atol),
                                                 float(tol.rtol), &tally, nullptr),
            KINDEX_STATUS_OK);
  cudaFree(a);
  cudaFree(e);
  if (fib) return compare::fib_report("out", actual.numel(), tally, {tol.atol, tol.rtol});
  return compare::sol_report("out", actual.numel(), tally, {tol.atol, tol.rtol});
}

compare::Report on_host(bool fib, const Tensor& actual, const Tensor& expected, Tols tol) {
  if (fib) return compare::compare_fib("out", actual.view(), expected.view(), {tol.atol, tol.rtol});
  return compare::compare_sol("out", actual.view(), expected.view(), {tol.atol, tol.rtol});
}

// Compares every field of the two Reports for this data; returns the host's, for the caller's own checks.
compare::Report expect_same(bool fib, const Tensor& actual, const Tensor& expected, const std::string& what,
                            Tols tol = {}) {
  const compare::Report h = on_host(fib, actual, expected, tol);
  const compare::Report d = on_device(fib, actual, expected, tol);
  const std::string label = what + " (" + std::string(kindex::dtype_name(actual.dtype())) + ", " +
                            (fib ? "flashinfer-bench" : "sol-execbench") + ")";
  kindex::test::expect_same_report(h, d, label);
  return h;
}

// n normal values (seeded), and a copy perturbed by relative noise `noise`.
std::pair<std::vector<float>, std::vector<float>> noisy_pair(size_t n, float noise, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> y(n), x(n);
  for (size_t i = 0; i < n; ++i) {
    y[i] = normal(rng);
    x[i] = y[i] * (1 + noise * normal(rng));
  }
  return {x, y};
}

const DType kDtypes[] = {DType::bf16, DType::f16, DType::f32};

}  // namespace

TEST(CompareDevice, RandomDataOfOddSizesMatchesTheHost) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  for (DType dt : kDtypes)
    for (bool fib : {true, false})
      for (size_t n : {size_t(1), size_t(255), size_t(257), size_t(1001), size_t(65537), size_t(300007)}) {
        // Noise large enough that some elements fail (a few percent), so counts, maxima and first failures differ
        // from the trivial ones.
        auto [x, y] = noisy_pair(n, 0.02f, unsigned(n));
        expect_same(fib, make(dt, x), make(dt, y), "random n=" + std::to_string(n));
        expect_same(fib, make(dt, y), make(dt, y), "identical n=" + std::to_string(n));
      }
}

TEST(CompareDevice, NonFiniteValuesOnEitherSideMatchTheHost) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const size_t n = 70001;
  for (DType dt : kDtypes)
    for (bool fib : {true, false}) {
      auto [x, y] = noisy_pair(n, 0.001f, 7);
      auto with = [&](std::vector<float> v, std::initializer_list<std::pair<size_t, float>> at) {
        for (auto [i, value] : at) v[i] = value;
        return make(dt, v);
      };
      expect_same(fib, with(x, {{60000, kNaN}}), make(dt, y), "NaN in the solution");
      expect_same(fib, with(x, {{69999, kInf}, {3, -kInf}}), make(dt, y), "inf in the solution");
      expect_same(fib, with(x, {{50000, kInf}, {50001, kNaN}}), make(dt, y), "inf then NaN in the solution");
      expect_same(fib, make(dt, x), with(y, {{40000, kNaN}}), "NaN in the reference");
      expect_same(fib, make(dt, x), with(y, {{12, -kInf}}), "inf in the reference");
      expect_same(fib, with(x, {{12, -kInf}}), with(y, {{12, -kInf}}), "-inf on both sides");
      expect_same(fib, with(x, {{65000, kInf}}), with(y, {{100, kNaN}}), "inf in one, NaN in the other");
    }
}

TEST(CompareDevice, ZerosAndAllZeroSolutionsMatchTheHost) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const size_t n = 5003;
  for (DType dt : kDtypes)
    for (bool fib : {true, false}) {
      // Integers: the reference's sum of squares is exact in any order, so the all-zero norm is one number.
      std::vector<float> zeros(n, 0.0f), negative_zeros(n, -0.0f), integers(n);
      for (size_t i = 0; i < n; ++i) integers[i] = float(int(i % 7) - 3);
      const compare::Report r = expect_same(fib, make(dt, zeros), make(dt, integers), "all-zero solution");
      EXPECT_TRUE(r.all_zero);
      if (!fib) {
        EXPECT_FALSE(r.passed);
      }
      expect_same(fib, make(dt, zeros), make(dt, zeros), "all zeros on both sides");
      expect_same(fib, make(dt, negative_zeros), make(dt, zeros), "-0 against +0");
      expect_same(fib, make(dt, zeros), make(dt, negative_zeros), "+0 against -0");
      std::vector<float> one_nonzero = zeros;
      one_nonzero[4000] = 1.0f;
      expect_same(fib, make(dt, one_nonzero), make(dt, integers), "one non-zero element");
    }
}

TEST(CompareDevice, ElementsOnTheToleranceBoundaryMatchTheHost) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  for (DType dt : kDtypes)
    for (bool fib : {true, false}) {
      int64_t on_boundary = 0;  // elements with |x - y| exactly atol + rtol * |y| (SOL's boundary), all tolerances
      for (Tols tol : {Tols{0.25, 0.5}, Tols{1e-2, 1e-2}, Tols{1e-3, 2e-2}}) {
        // For each reference value y, solutions at y +- the bound as fp32 computes it (atol + rtol * |y|, each step
        // rounded alone) and their neighbours one ulp of the dtype away: exactly on, just inside and just outside.
        const float atol = float(tol.atol), rtol = float(tol.rtol);
        std::vector<float> x, y;
        std::mt19937 rng(11);
        std::uniform_real_distribution<float> uniform(-8.0f, 8.0f);
        for (int k = 0; k < 4000; ++k) {
          const float yv = k < 64 ? float(k - 32) / 4 : uniform(rng);
          const float yr = float(make(dt, {yv}).get(0));
          volatile float scaled = rtol * std::fabs(yr);
          volatile float bound = atol + scaled;
          for (float sign : {1.0f, -1.0f}) {
            const float xr = float(make(dt, {yr + sign * bound}).get(0));
            for (float candidate : {xr, std::nextafter(xr, kInf), std::nextafter(xr, -kInf)}) {
              const float xc = float(make(dt, {candidate}).get(0));
              if (std::fabs(xc - yr) == bound) ++on_boundary;
              x.push_back(xc);
              y.push_back(yr);
            }
          }
        }
        expect_same(fib, make(dt, x), make(dt, y),
                    "boundary atol=" + std::to_string(tol.atol) + " rtol=" + std::to_string(tol.rtol), tol);
      }
      EXPECT_GT(on_boundary, 0) << "no element lands exactly on the boundary";
    }
}

TEST(CompareDevice, EmptyTensorsPass) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  for (DType dt : kDtypes)
    for (bool fib : {true, false}) {
      const compare::Report r = expect_same(fib, make(dt, {}), make(dt, {}), "empty");
      EXPECT_TRUE(r.passed);
      EXPECT_EQ(r.numel, 0);
    }
}

TEST(CompareDevice, MoreThanTwoToTheTwentyFourElementsMatchTheHost) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const size_t n = (size_t(1) << 24) + 4099;
  for (DType dt : {DType::bf16, DType::f32})
    for (bool fib : {true, false}) {
      auto [x, y] = noisy_pair(n, 0.0005f, 3);
      // Failures only past 2^24 (the first in a late block of the grid-stride loop), then a NaN at the very end.
      x[(size_t(1) << 24) + 7] = y[(size_t(1) << 24) + 7] + 5;
      x[n - 2] = y[n - 2] - 9;
      compare::Report r = expect_same(fib, make(dt, x), make(dt, y), "2^24 + 4099 elements");
      EXPECT_EQ(r.first_failure, int64_t(1) << 24 | 7);
      x[n - 1] = kNaN;
      r = expect_same(fib, make(dt, x), make(dt, y), "2^24 + 4099 elements, NaN last");
      EXPECT_EQ(r.nonfinite, 1);
    }
}

TEST(CompareDevice, BadArgumentsAreRefusedWithTheField) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  kindex_compare_tally tally{};
  EXPECT_EQ(kindex::gpu_reference::compare_tally(KINDEX_COMPARE_SOL_EXECBENCH, KINDEX_DTYPE_INT32, nullptr, nullptr, 4,
                                                 0.01f, 0.01f, &tally, nullptr),
            KINDEX_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(kindex::gpu_reference::compare_tally(kindex_compare_rule(7), KINDEX_DTYPE_FP32, nullptr, nullptr, 4, 0.01f,
                                                 0.01f, &tally, nullptr),
            KINDEX_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(kindex::gpu_reference::compare_tally(KINDEX_COMPARE_SOL_EXECBENCH, KINDEX_DTYPE_FP32, nullptr, nullptr, 4,
                                                 0.01f, 0.01f, &tally, nullptr),
            KINDEX_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(kindex::gpu_reference::compare_tally(KINDEX_COMPARE_SOL_EXECBENCH, KINDEX_DTYPE_FP32, nullptr, nullptr, 4,
                                                 0.01f, 0.01f, nullptr, nullptr),
            KINDEX_STATUS_INVALID_ARGUMENT);
}

namespace kindex::runner {

// kindex against the GPU reference in this process, as the main job runs it: the comparator runs on the device
// (through the loaded libkindex_gpu_reference.so), every run passes, and the phase times add up within the wall time.
TEST(CompareDevice, RunnerComparesDeviceOutputsOnTheDevice) {
  if (!device::available()) GTEST_SKIP() << "no CUDA device";
  ASSERT_NE(device_comparator(), nullptr) << "libkindex_gpu_reference.so lacks kindex_gpu_reference_compare";
  std::vector<catalog::Problem> problems;
  for (const char* name : {"gqa_paged_decode_h32_kv4_d128_ps1", "003_grouped_query_attention_with_rope_backward"})
    problems.push_back(catalog::builtin_problem(name));
  std::vector<WorkItem> items;
  for (const auto& p : problems) items.push_back({&p.definition, select_workloads(p, "small").at(0)});
  BenchOptions o;
  o.implementations = {"kindex"};
  o.trials = 2;
  o.timing_trials = 1;
  o.iterations = 5;
  o.warmup = 1;
  o.isolate = false;
  BenchReport report = run_bench(items, o);
  ASSERT_EQ(report.results.size(), items.size());
  for (const auto& r : report.results) {
    EXPECT_EQ(r.status, RunStatus::passed) << r.definition << ": " << r.message;
    EXPECT_EQ(r.phases.compared_on, "device") << r.definition;
    const PhaseTimes& p = r.phases;
    const double sum =
        p.setup + p.inputs + p.reference + p.implementation + p.compare + p.timing + p.reference_timing;
    EXPECT_GT(p.compare, 0) << r.definition;
    EXPECT_GT(p.timing, 0) << r.definition;
    EXPECT_LE(sum, r.wall_s * 1.0001) << r.definition;
  }
}

}  // namespace kindex::runner
