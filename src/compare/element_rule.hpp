#pragma once
// The per-element half of the two correctness rules (compare.hpp says what each source computes), written once for
// the host comparator (compare.cpp) and the device one (gpu_reference/compare.cu), so the two cannot drift: an
// element is tallied into a kindex_compare_tally (include/kindex/compare_tally.h), tallies of disjoint ranges merge
// in any order, and compare::fib_report / sol_report judge the total. Every fp32 operation is rounded once, in the
// sources' order: explicit __f*_rn intrinsics on the device (nvcc would fuse atol + rtol * |y| into an FMA), and
// compare.cpp is built with -ffp-contract=off. The one figure whose bits can depend on the merge order is
// reference_sq (a double sum); it only reaches a Report as float(sqrt(sum)).
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kindex/compare_tally.h"

#ifdef __CUDACC__
#define KX_COMPARE_FN __host__ __device__ inline
#else
#define KX_COMPARE_FN inline
#endif

namespace kindex::compare {

using Tally = kindex_compare_tally;

namespace rule {

#if defined(__CUDA_ARCH__)
KX_COMPARE_FN float sub(float a, float b) { return __fsub_rn(a, b); }
KX_COMPARE_FN float add(float a, float b) { return __fadd_rn(a, b); }
KX_COMPARE_FN float mul(float a, float b) { return __fmul_rn(a, b); }
KX_COMPARE_FN float div(float a, float b) { return __fdiv_rn(a, b); }
KX_COMPARE_FN double add(double a, double b) { return __dadd_rn(a, b); }
KX_COMPARE_FN double mul(double a, double b) { return __dmul_rn(a, b); }
KX_COMPARE_FN uint32_t bits(float a) { return __float_as_uint(a); }
KX_COMPARE_FN float magnitude(float a) { return fabsf(a); }
#else
KX_COMPARE_FN float sub(float a, float b) { return a - b; }
KX_COMPARE_FN float add(float a, float b) { return a + b; }
KX_COMPARE_FN float mul(float a, float b) { return a * b; }
KX_COMPARE_FN float div(float a, float b) { return a / b; }
KX_COMPARE_FN double add(double a, double b) { return a + b; }
KX_COMPARE_FN double mul(double a, double b) { return a * b; }
KX_COMPARE_FN uint32_t bits(float a) {
  uint32_t b;
  std::memcpy(&b, &a, sizeof b);
  return b;
}
KX_COMPARE_FN float magnitude(float a) { return std::fabs(a); }
#endif

KX_COMPARE_FN bool is_nan(float a) { return (bits(a) & 0x7fffffffu) > 0x7f800000u; }
KX_COMPARE_FN bool is_inf(float a) { return (bits(a) & 0x7fffffffu) == 0x7f800000u; }
KX_COMPARE_FN bool is_finite(float a) { return (bits(a) & 0x7f800000u) != 0x7f800000u; }
// std::max's choice: the first unless it is less than the second (so a NaN first stays).
KX_COMPARE_FN float larger(float a, float b) { return a < b ? b : a; }

// torch.max semantics: NaN wins (over fp32 elements here, over reports' doubles in compare::combine).
template <class T>
KX_COMPARE_FN void max_into(T& acc, T v) {
  if (acc != acc) return;
  if (v != v || v > acc) acc = v;
}

KX_COMPARE_FN void first_into(int64_t& at, float& actual, float& expected, int64_t i, float x, float y) {
  if (i >= 0 && (at < 0 || i < at)) at = i, actual = x, expected = y;
}

}  // namespace rule

// A tally of no elements.
KX_COMPARE_FN Tally empty_tally() {
  Tally t{};
  t.first_failure = t.first_nonfinite = t.first_reference_nonzero = -1;
  return t;
}

// Adds `o` (a disjoint range) into `t`.
KX_COMPARE_FN void merge(Tally& t, const Tally& o) {
  t.mismatches += o.mismatches;
  t.nonfinite += o.nonfinite;
  t.reference_nonfinite += o.reference_nonfinite;
  t.reference_sq = rule::add(t.reference_sq, o.reference_sq);
  rule::max_into(t.max_abs, o.max_abs);
  rule::max_into(t.max_rel, o.max_rel);
  rule::first_into(t.first_failure, t.first_failure_actual, t.first_failure_expected, o.first_failure,
                   o.first_failure_actual, o.first_failure_expected);
  rule::first_into(t.first_nonfinite, t.first_nonfinite_actual, t.first_nonfinite_expected, o.first_nonfinite,
                   o.first_nonfinite_actual, o.first_nonfinite_expected);
  rule::first_into(t.first_reference_nonzero, t.first_reference_nonzero_actual, t.first_reference_nonzero_expected,
                   o.first_reference_nonzero, o.first_reference_nonzero_actual, o.first_reference_nonzero_expected);
  t.solution_inf |= o.solution_inf;
  t.any_nan |= o.any_nan;
  t.solution_nonzero |= o.solution_nonzero;
}

// FlashInfer-Bench: element i with solution x and reference y (both as fp32). Elements must come in increasing i
// within one tally (the first-* fields keep the first they see).
KX_COMPARE_FN void fib_element(Tally& t, float x, float y, int64_t i, float atol, float rtol) {
  const float abs = rule::magnitude(rule::sub(x, y));
  const float rel = rule::div(abs, rule::add(rule::magnitude(y), 1e-8f));
  const bool finite = rule::is_finite(x);
  if (!finite) {
    ++t.nonfinite;
    if (rule::is_inf(x)) t.solution_inf = 1;
    rule::first_into(t.first_nonfinite, t.first_nonfinite_actual, t.first_nonfinite_expected, i, x, y);
  }
  if (!rule::is_finite(y)) ++t.reference_nonfinite;
  if (x != 0.0f) t.solution_nonzero = 1;
  if (!finite || (abs > atol && rel > rtol)) {
    ++t.mismatches;
    rule::first_into(t.first_failure, t.first_failure_actual, t.first_failure_expected, i, x, y);
  }
  rule::max_into(t.max_abs, abs);
  rule::max_into(t.max_rel, rel);
}

// SOL-ExecBench: element i with solution x and reference y (both as fp32).
KX_COMPARE_FN void sol_element(Tally& t, float x, float y, int64_t i, float atol, float rtol) {
  const bool x_finite = rule::is_finite(x), y_finite = rule::is_finite(y);
  if (!x_finite) {
    ++t.nonfinite;
    if (rule::is_inf(x)) t.solution_inf = 1;
  }
  if (!y_finite) ++t.reference_nonfinite;
  if (rule::is_nan(x) || rule::is_nan(y)) t.any_nan = 1;
  if (!x_finite || !y_finite)
    rule::first_into(t.first_nonfinite, t.first_nonfinite_actual, t.first_nonfinite_expected, i, x, y);
  if (x != 0.0f) t.solution_nonzero = 1;
  if (y != 0.0f)
    rule::first_into(t.first_reference_nonzero, t.first_reference_nonzero_actual, t.first_reference_nonzero_expected,
                     i, x, y);
  t.reference_sq = rule::add(t.reference_sq, rule::mul(double(y), double(y)));
  const float abs = rule::magnitude(rule::sub(x, y));
  const float bound = rule::add(atol, rule::mul(rtol, rule::magnitude(y)));
  if (abs > bound || !rule::is_finite(abs)) {
    ++t.mismatches;
    rule::first_into(t.first_failure, t.first_failure_actual, t.first_failure_expected, i, x, y);
  }
  rule::max_into(t.max_abs, abs);
  rule::max_into(t.max_rel, rule::div(abs, rule::larger(rule::magnitude(y), atol)));
}

}  // namespace kindex::compare
