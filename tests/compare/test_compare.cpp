// The comparators on hand-built vectors, one per boundary of each rule, with the error figures checked exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "compare/compare.hpp"
#include "core/error.hpp"
#include "core/half.hpp"
#include "core/tensor.hpp"
#include "support/same_report.hpp"

using namespace kindex;
using namespace kindex::compare;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

Tensor make(const std::vector<float>& values, DType dtype = DType::f32) {
  Tensor t(dtype, {int64_t(values.size())});
  for (size_t i = 0; i < values.size(); ++i) t.set(int64_t(i), values[i]);
  return t;
}

Report fib(const std::vector<float>& x, const std::vector<float>& y, FibTolerance tol = {}) {
  return compare_fib("out", make(x).view(), make(y).view(), tol);
}
Report sol(const std::vector<float>& x, const std::vector<float>& y, SolTolerance tol = {}) {
  return compare_sol("out", make(x).view(), make(y).view(), tol);
}

}  // namespace

TEST(FibComparator, FailsOnlyWhereBothToleranceAreExceeded) {
  // |x-y| = 0.05 > atol but relative 0.005 <= rtol: passes.
  EXPECT_TRUE(fib({10.05f}, {10.0f}).passed);
  // |x-y| = 0.004 <= atol but relative 4 > rtol: passes.
  EXPECT_TRUE(fib({0.005f}, {0.001f}).passed);
  // Both exceeded: fails, with the element named.
  Report r = fib({0.0f, 1.015f}, {0.0f, 1.0f});
  EXPECT_FALSE(r.passed);
  EXPECT_EQ(r.mismatches, 1);
  EXPECT_EQ(r.first_failure, 1);
  EXPECT_EQ(r.first_failure_actual, double(1.015f));
  EXPECT_EQ(r.first_failure_expected, 1.0);
  EXPECT_DOUBLE_EQ(r.matched_ratio, 0.5);
  EXPECT_NE(r.reason.find("exceed both"), std::string::npos) << r.reason;
}

TEST(FibComparator, EveryElementMustPassByDefault) {
  std::vector<float> y(1000, 1.0f), x = y;
  x[999] = 2.0f;
  Report r = fib(x, y);
  EXPECT_FALSE(r.passed);
  EXPECT_DOUBLE_EQ(r.matched_ratio, 0.999);
  EXPECT_TRUE(fib(x, y, {.required_ratio = 0.999}).passed);
}

TEST(FibComparator, ErrorFiguresAreTheSourcesFormulas) {
  // abs = {0, 0.5, 0.25}; rel = abs / (|y| + 1e-8) = {0, 0.2, 1} (1e-8 vanishes next to 0.25 in fp32).
  Report r = fib({1.0f, 2.0f, 0.5f}, {1.0f, 2.5f, 0.25f}, {.atol = 1.0, .rtol = 1.0});
  EXPECT_TRUE(r.passed);
  EXPECT_EQ(r.max_abs_error, 0.5);
  EXPECT_EQ(r.max_rel_error, 1.0);
  EXPECT_EQ(r.first_failure, -1);
  EXPECT_EQ(r.reason, "ok");
  // A zero reference divides by 1e-8 (in fp32).
  r = fib({0.001f}, {0.0f});
  EXPECT_TRUE(r.passed);
  EXPECT_EQ(r.max_rel_error, double(0.001f / 1e-8f));
}

TEST(FibComparator, NonFiniteSolutionFails) {
  Report r = fib({1.0f, kNaN, 1.0f}, {1.0f, 1.0f, 1.0f});
  EXPECT_FALSE(r.passed);
  EXPECT_EQ(r.nonfinite, 1);
  EXPECT_TRUE(std::isnan(r.max_abs_error));
  EXPECT_TRUE(std::isnan(r.max_rel_error));
  EXPECT_EQ(r.first_failure, 1);
  // With an inf present, the source reports inf.
  r = fib({kNaN, -kInf}, {1.0f, 1.0f});
  EXPECT_FALSE(r.passed);
  EXPECT_EQ(r.nonfinite, 2);
  EXPECT_EQ(r.max_abs_error, double(kInf));
}

TEST(FibComparator, EmptySequenceLseCannotPassWithTheReferencesAnswer) {
  // Reference lse -inf with solution -inf: non-finite solution, fails.
  EXPECT_FALSE(fib({-kInf}, {-kInf}).passed);
  // The source's quirk: a finite solution against -inf gives abs = inf > atol but rel = inf/inf = NaN, and
  // NaN > rtol is false, so the element counts as matched. kindex reproduces it (max_rel is NaN).
  Report r = fib({0.0f}, {-kInf});
  EXPECT_TRUE(r.passed);
  EXPECT_EQ(r.max_abs_error, double(kInf));
  EXPECT_TRUE(std::isnan(r.max_rel_error));
  EXPECT_EQ(r.reference_nonfinite, 1);
}

TEST(FibComparator, AllZeroSolutionIsOnlyFlagged) {
  Report r = fib({0.0f, 0.0f}, {0.001f, -0.002f});
  EXPECT_TRUE(r.passed);
  EXPECT_TRUE(r.all_zero);
}

TEST(SolComparator, MatchesWithinAtolPlusRtolTimesReference) {
  // |x-y| = 0.015 > atol and > rtol relative, yet <= atol + rtol*|y| = 0.02: matches under SOL, fails FIB.
  EXPECT_TRUE(sol({1.015f}, {1.0f}, {.required_ratio = 1.0}).passed);
  EXPECT_FALSE(fib({1.015f}, {1.0f}).passed);
  // 0.025 > 0.02: mismatch.
  Report r = sol({1.025f}, {1.0f}, {.required_ratio = 1.0});
  EXPECT_FALSE(r.passed);
  EXPECT_EQ(r.mismatches, 1);
  EXPECT_EQ(r.first_failure, 0);
  // atol alone: a zero reference allows |x| <= atol.
  EXPECT_TRUE(sol({0.01f}, {0.0f}, {.required_ratio = 1.0}).passed);
  EXPECT_FALSE(sol({0.0101f}, {0.0f}, {.required_ratio = 1.0}).passed);
}

TEST(SolComparator, NinetyNinePercentMustMatch) {
  std::vector<float> y(1000, 1.0f), x = y;
  for (int i = 0; i < 10; ++i) x[size_t(i * 100)] = 5.0f;
  Report r = sol(x, y);
  EXPECT_TRUE(r.passed) << r.reason;  // 990 / 1000 = 0.99
  EXPECT_DOUBLE_EQ(r.matched_ratio, 0.99);
  EXPECT_EQ(r.first_failure, 0);
  x[999] = 5.0f;
  r = sol(x, y);
  EXPECT_FALSE(r.passed);  // 989 / 1000 = 0.989
  EXPECT_DOUBLE_EQ(r.matched_ratio, 0.989);
  EXPECT_EQ(r.mismatches, 11);
  EXPECT_NE(r.reason.find("0.989"), std::string::npos) << r.reason;
  EXPECT_TRUE(sol(x, y, {.required_ratio = 0.98}).passed);
}

TEST(SolComparator, ErrorFiguresAreTheSourcesFormulas) {
  // max_rel = abs / max(|y|, atol): {0, 0.5/2.5, 0.25/0.25, 0.005/0.01}.
  Report r =
      sol({1.0f, 2.0f, 0.5f, 0.005f}, {1.0f, 2.5f, 0.25f, 0.0f}, {.atol = 1.0, .rtol = 0.0, .required_ratio = 1});
  EXPECT_TRUE(r.passed);
  EXPECT_EQ(r.max_abs_error, 0.5);
  r = sol({0.0f, 0.5f, 0.005f}, {0.0f, 0.25f, 0.0f}, {.atol = 0.01, .rtol = 1.0, .required_ratio = 1});
  EXPECT_TRUE(r.passed);
  EXPECT_EQ(r.max_abs_error, 0.25);
  EXPECT_EQ(r.max_rel_error, 1.0);
  r = sol({0.005f}, {0.0f});
  EXPECT_EQ(r.max_rel_error, double(0.005f / 0.01f));
}

TEST(SolComparator, NonFiniteInEitherTensorFails) {
  Report r = sol({1.0f, kInf}, {1.0f, 1.0f});
  EXPECT_FALSE(r.passed);
  EXPECT_EQ(r.nonfinite, 1);
  EXPECT_EQ(r.max_abs_error, double(kInf));
  EXPECT_EQ(r.first_failure, 1);
  r = sol({1.0f, 1.0f}, {1.0f, kNaN});
  EXPECT_FALSE(r.passed);
  EXPECT_EQ(r.reference_nonfinite, 1);
  EXPECT_TRUE(std::isnan(r.max_abs_error));
  EXPECT_FALSE(sol({-kInf}, {-kInf}).passed);  // matching infinities fail too
}

TEST(SolComparator, AllZeroSolutionFailsUnlessTheReferenceIsZero) {
  Report r = sol({0.0f, 0.0f, 0.0f}, {0.0f, 3.0f, -4.0f});
  EXPECT_FALSE(r.passed);
  EXPECT_TRUE(r.all_zero);
  EXPECT_EQ(r.max_abs_error, 5.0);  // the reference's L2 norm, as the source reports it
  EXPECT_EQ(r.max_rel_error, 5.0);
  EXPECT_EQ(r.first_failure, 1);
  // Tiny references fail too, though every element is within atol.
  EXPECT_FALSE(sol({0.0f, 0.0f}, {1e-4f, 0.0f}).passed);
  EXPECT_TRUE(sol({0.0f, 0.0f}, {0.0f, 0.0f}).passed);
}

TEST(SolComparator, MaxErrorCap) {
  std::vector<float> y(200, 1.0f), x = y;
  x[7] = 100.0f;
  EXPECT_TRUE(sol(x, y).passed);
  Report r = sol(x, y, {.max_error_cap = 10.0});
  EXPECT_FALSE(r.passed);
  EXPECT_NE(r.reason.find("cap"), std::string::npos) << r.reason;
}

TEST(Comparators, ReadEveryFloatingDtype) {
  for (DType t : {DType::bf16, DType::f16, DType::f32, DType::f64}) {
    Tensor x = make({1.0f, 2.0f, 3.0f}, t), y = make({1.0f, 2.0f, 3.5f}, t);
    Report r = compare_sol("out", x.view(), y.view(), {.atol = 0.0, .rtol = 0.0, .required_ratio = 1.0});
    EXPECT_FALSE(r.passed) << dtype_name(t);
    EXPECT_EQ(r.max_abs_error, 0.5) << dtype_name(t);
    EXPECT_EQ(r.first_failure_expected, 3.5) << dtype_name(t);
  }
}

TEST(Comparators, ShapeAndDtypeMismatchesNameTheOutput) {
  Tensor a = make({1, 2, 3}), b = make({1, 2}), c = make({1, 2, 3}, DType::bf16);
  try {
    compare_fib("lse", a.view(), b.view());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.field(), "lse");
    EXPECT_EQ(e.value(), "[3]");
  }
  try {
    compare_sol("grad_q_weight", a.view(), c.view());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.field(), "grad_q_weight");
    EXPECT_NE(std::string(e.what()).find("bfloat16"), std::string::npos) << e.what();
  }
  Tensor i(DType::i32, {3});
  EXPECT_THROW(compare_fib("idx", i.view(), i.view()), Error);
}

TEST(Comparators, EmptyTensorsPass) {
  EXPECT_TRUE(fib({}, {}).passed);
  EXPECT_TRUE(sol({}, {}).passed);
}

TEST(Comparators, LargeTensorsCountExactlyInParallel) {
  const int64_t n = 3'000'001;
  Tensor x(DType::bf16, {n}), y(DType::bf16, {n});
  uint16_t* xs = x.ptr<uint16_t>();
  uint16_t* ys = y.ptr<uint16_t>();
  for (int64_t i = 0; i < n; ++i) {
    ys[i] = float_to_bf16(1.0f);
    xs[i] = float_to_bf16(i % 100'000 == 99'999 ? 3.0f : 1.0f);
  }
  Report r = compare_fib("big", x.view(), y.view());
  EXPECT_EQ(r.mismatches, 30);
  EXPECT_EQ(r.first_failure, 99'999);
  EXPECT_EQ(r.max_abs_error, 2.0);
  EXPECT_EQ(r.max_rel_error, double(2.0f / (1.0f + 1e-8f)));
  EXPECT_DOUBLE_EQ(r.matched_ratio, 1.0 - 30.0 / double(n));
}

TEST(Comparators, CombineFoldsOutputsAndTrials) {
  std::vector<Report> reports = {sol({1.0f}, {1.0f}), sol({1.0f, 1.0f}, {1.0f, 3.0f}), fib({1.5f}, {1.0f})};
  reports[1].output = "grad_k_weight";
  Summary s = combine(reports);
  EXPECT_FALSE(s.passed);
  EXPECT_EQ(s.failed_reports, 2);
  EXPECT_EQ(s.max_abs_error, 2.0);
  EXPECT_DOUBLE_EQ(s.min_matched_ratio, 0.0);
  EXPECT_EQ(s.mismatches, 2);
  EXPECT_EQ(s.reason.rfind("grad_k_weight: ", 0), 0u) << s.reason;
  reports.push_back(fib({kNaN}, {1.0f}));
  EXPECT_TRUE(std::isnan(combine(reports).max_abs_error));  // NaN wins, as torch.max
  EXPECT_TRUE(combine(std::vector<Report>{sol({1.0f}, {1.0f})}).passed);
  EXPECT_EQ(combine(std::vector<Report>{}).reason, "ok");
}

// The device comparator's order: each of T threads tallies a grid-stride range (i, i + T, ...), the tallies merge in a
// tree, and fib_report / sol_report judge the total. On data with NaN, inf, zeros and failures everywhere, every
// Report field equals the host comparator's (which merges contiguous chunks in whatever order they finish).
TEST(Comparators, TalliesMergedInAnyOrderGiveTheHostsReport) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  const size_t n = 100003;
  std::vector<float> x(n), y(n);
  for (size_t i = 0; i < n; ++i) {
    y[i] = i % 13 == 0 ? 0.0f : float(int(normal(rng) * 4));  // integers: the sum of squares is exact in any order
    x[i] = i % 17 == 0 ? y[i] + 0.5f : y[i];
  }
  auto strided = [&](bool fib_rule, const std::vector<float>& xs, const std::vector<float>& ys, int threads) {
    std::vector<Tally> partial(threads, empty_tally());
    for (int t = 0; t < threads; ++t)
      for (size_t i = size_t(t); i < xs.size(); i += size_t(threads)) {
        if (fib_rule)
          fib_element(partial[t], xs[i], ys[i], int64_t(i), 1e-2f, 1e-2f);
        else
          sol_element(partial[t], xs[i], ys[i], int64_t(i), 1e-2f, 1e-2f);
      }
    for (int width = 1; width < threads; width *= 2)
      for (int t = 0; t + width < threads; t += 2 * width) merge(partial[t], partial[t + width]);
    const int64_t numel = int64_t(xs.size());
    return fib_rule ? fib_report("out", numel, partial[0]) : sol_report("out", numel, partial[0]);
  };
  auto expect_same = [&](const std::vector<float>& xs, const std::vector<float>& ys, const char* what) {
    for (bool fib_rule : {true, false})
      for (int threads : {1, 3, 256, 1000}) {
        const Report h = fib_rule ? fib(xs, ys) : sol(xs, ys);
        const Report d = strided(fib_rule, xs, ys, threads);
        const std::string label = std::string(what) + (fib_rule ? " fib " : " sol ") + std::to_string(threads);
        kindex::test::expect_same_report(h, d, label);
      }
  };
  expect_same(x, y, "failures");
  std::vector<float> zeros(n, 0.0f);
  expect_same(zeros, y, "all-zero solution");
  std::vector<float> late_nan = x, late_inf = x;
  late_nan[n - 3] = kNaN;
  late_inf[n - 2] = -kInf;
  late_inf[70000] = kNaN;
  expect_same(late_nan, y, "NaN late");
  expect_same(late_inf, y, "inf and NaN");
  expect_same(x, late_inf, "inf and NaN in the reference");
}
