#include "compare/compare.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <mutex>
#include <vector>

#include "core/error.hpp"
#include "core/half.hpp"
#include "core/parallel.hpp"

namespace kindex::compare {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

void check_views(const std::string& output, const TensorView& actual, const TensorView& expected) {
  const char* where = "compare";
  if (actual.shape != expected.shape)
    throw Error(where, output, shape_string(actual.shape),
                "solution shape differs from the reference's " + shape_string(expected.shape));
  if (actual.dtype != expected.dtype)
    throw Error(where, output, std::string(dtype_name(actual.dtype)),
                "solution dtype differs from the reference's " + std::string(dtype_name(expected.dtype)));
  const DType t = actual.dtype;
  if (t != DType::bf16 && t != DType::f16 && t != DType::f32 && t != DType::f64)
    throw Error(where, output, std::string(dtype_name(t)), "is not a floating dtype");
  for (const TensorView* v : {&actual, &expected}) {
    const char* which = v == &actual ? "solution" : "reference";
    if (v->where != Where::host) throw Error(where, output, which, "tensor is not in host memory");
    if (v->numel() > 0 && !v->is_contiguous()) throw Error(where, output, which, "tensor is not contiguous");
    if (v->numel() > 0 && !v->data) throw Error(where, output, which, "tensor has no data");
  }
}

// Element i of a contiguous floating view as fp32, as `tensor.to(torch.float32)` gives it.
template <class Fn>
decltype(auto) with_loader(DType t, Fn&& fn) {
  switch (t) {
    case DType::bf16:
      return fn([](const void* d, int64_t i) { return bf16_to_float(static_cast<const uint16_t*>(d)[i]); });
    case DType::f16:
      return fn([](const void* d, int64_t i) { return f16_to_float(static_cast<const uint16_t*>(d)[i]); });
    case DType::f64:
      return fn([](const void* d, int64_t i) { return float(static_cast<const double*>(d)[i]); });
    default:
      return fn([](const void* d, int64_t i) { return static_cast<const float*>(d)[i]; });
  }
}

// torch.max semantics: NaN wins.
void max_into(double& acc, double v) {
  if (std::isnan(acc)) return;
  if (std::isnan(v) || v > acc) acc = v;
}

struct Tally {
  int64_t mismatches = 0, nonfinite = 0, reference_nonfinite = 0;
  bool solution_inf = false, any_nan = false, solution_nonzero = false;
  double max_abs = 0, max_rel = 0, reference_sq = 0;
  int64_t first_failure = -1, first_nonfinite = -1, first_reference_nonzero = -1;

  void merge(const Tally& o) {
    mismatches += o.mismatches;
    nonfinite += o.nonfinite;
    reference_nonfinite += o.reference_nonfinite;
    solution_inf |= o.solution_inf;
    any_nan |= o.any_nan;
    solution_nonzero |= o.solution_nonzero;
    max_into(max_abs, o.max_abs);
    max_into(max_rel, o.max_rel);
    reference_sq += o.reference_sq;
    auto first = [](int64_t& a, int64_t b) {
      if (b >= 0 && (a < 0 || b < a)) a = b;
    };
    first(first_failure, o.first_failure);
    first(first_nonfinite, o.first_nonfinite);
    first(first_reference_nonzero, o.first_reference_nonzero);
  }
};

// Runs `element(x, y, i, tally)` over all elements in parallel and merges the per-chunk tallies.
template <class Element>
Tally tally(const TensorView& actual, const TensorView& expected, Element element) {
  Tally total;
  std::mutex mu;
  with_loader(actual.dtype, [&](auto load) {
    parallel_for(
        actual.numel(),
        [&](int64_t begin, int64_t end) {
          Tally t;
          for (int64_t i = begin; i < end; ++i) element(load(actual.data, i), load(expected.data, i), i, t);
          std::lock_guard<std::mutex> lock(mu);
          total.merge(t);
        },
        1 << 16);
    return 0;
  });
  return total;
}

std::string format(const char* fmt, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

void set_first_failure(Report& r, int64_t i, const TensorView& actual, const TensorView& expected) {
  r.first_failure = i;
  if (i < 0) return;
  with_loader(actual.dtype, [&](auto load) {
    r.first_failure_actual = load(actual.data, i);
    r.first_failure_expected = load(expected.data, i);
    return 0;
  });
}

std::string at_first(const Report& r) {
  return format("; first at [%lld]: %.8g vs %.8g", (long long)r.first_failure, r.first_failure_actual,
                r.first_failure_expected);
}

}  // namespace

std::string_view rule_name(Rule r) { return r == Rule::flashinfer_bench ? "flashinfer-bench" : "sol-execbench"; }

Report compare_fib(const std::string& output, const TensorView& actual, const TensorView& expected,
                   const FibTolerance& tol) {
  check_views(output, actual, expected);
  const float atol = float(tol.atol), rtol = float(tol.rtol), eps = 1e-8f;
  Tally t = tally(actual, expected, [&](float x, float y, int64_t i, Tally& t) {
    const float abs = std::fabs(x - y), rel = abs / (std::fabs(y) + eps);
    const bool finite = std::isfinite(x);
    if (!finite) {
      ++t.nonfinite;
      if (std::isinf(x)) t.solution_inf = true;
      if (t.first_nonfinite < 0) t.first_nonfinite = i;
    }
    if (!std::isfinite(y)) ++t.reference_nonfinite;
    if (x != 0.0f) t.solution_nonzero = true;
    if (!finite || (abs > atol && rel > rtol)) {
      ++t.mismatches;
      if (t.first_failure < 0) t.first_failure = i;
    }
    max_into(t.max_abs, abs);
    max_into(t.max_rel, rel);
  });

  Report r;
  r.output = output;
  r.rule = Rule::flashinfer_bench;
  r.numel = actual.numel();
  r.mismatches = t.mismatches;
  r.nonfinite = t.nonfinite;
  r.reference_nonfinite = t.reference_nonfinite;
  r.all_zero = r.numel > 0 && !t.solution_nonzero;
  r.matched_ratio = r.numel ? std::clamp(1.0 - double(t.mismatches) / double(r.numel), 0.0, 1.0) : 1.0;
  set_first_failure(r, t.first_failure, actual, expected);
  if (t.nonfinite) {
    r.passed = false;
    r.max_abs_error = r.max_rel_error = t.solution_inf ? kInf : kNaN;
    set_first_failure(r, t.first_nonfinite, actual, expected);
    r.reason = format("%lld non-finite value(s) in the solution", (long long)t.nonfinite) + at_first(r);
    return r;
  }
  r.max_abs_error = r.numel ? t.max_abs : 0.0;
  r.max_rel_error = r.numel ? t.max_rel : 0.0;
  r.passed = r.matched_ratio >= tol.required_ratio;
  r.reason = r.passed ? "ok"
                      : format("%lld of %lld elements exceed both atol=%g and rtol=%g (matched %.6f < %g)",
                               (long long)r.mismatches, (long long)r.numel, tol.atol, tol.rtol, r.matched_ratio,
                               tol.required_ratio) +
                            at_first(r);
  return r;
}

Report compare_sol(const std::string& output, const TensorView& actual, const TensorView& expected,
                   const SolTolerance& tol) {
  check_views(output, actual, expected);
  const float atol = float(tol.atol), rtol = float(tol.rtol);
  Tally t = tally(actual, expected, [&](float x, float y, int64_t i, Tally& t) {
    const bool x_finite = std::isfinite(x), y_finite = std::isfinite(y);
    if (!x_finite) {
      ++t.nonfinite;
      if (std::isinf(x)) t.solution_inf = true;
    }
    if (!y_finite) ++t.reference_nonfinite;
    if (std::isnan(x) || std::isnan(y)) t.any_nan = true;
    if ((!x_finite || !y_finite) && t.first_nonfinite < 0) t.first_nonfinite = i;
    if (x != 0.0f) t.solution_nonzero = true;
    if (y != 0.0f && t.first_reference_nonzero < 0) t.first_reference_nonzero = i;
    t.reference_sq += double(y) * double(y);
    const float abs = std::fabs(x - y);
    const float bound = atol + rtol * std::fabs(y);
    if (abs > bound || !std::isfinite(abs)) {
      ++t.mismatches;
      if (t.first_failure < 0) t.first_failure = i;
    }
    max_into(t.max_abs, abs);
    max_into(t.max_rel, abs / std::max(std::fabs(y), atol));
  });

  Report r;
  r.output = output;
  r.rule = Rule::sol_execbench;
  r.numel = actual.numel();
  r.mismatches = t.mismatches;
  r.nonfinite = t.nonfinite;
  r.reference_nonfinite = t.reference_nonfinite;
  r.all_zero = r.numel > 0 && !t.solution_nonzero;
  r.matched_ratio = r.numel ? std::clamp(1.0 - double(t.mismatches) / double(r.numel), 0.0, 1.0) : 1.0;
  set_first_failure(r, t.first_failure, actual, expected);
  if (t.nonfinite || t.reference_nonfinite) {
    r.passed = false;
    r.max_abs_error = r.max_rel_error = t.any_nan ? kNaN : kInf;
    set_first_failure(r, t.first_nonfinite, actual, expected);
    r.reason = format("non-finite values: %lld in the solution, %lld in the reference", (long long)t.nonfinite,
                      (long long)t.reference_nonfinite) +
               at_first(r);
    return r;
  }
  if (r.all_zero && t.reference_sq > 0) {
    r.passed = false;
    r.max_abs_error = r.max_rel_error = double(float(std::sqrt(t.reference_sq)));
    set_first_failure(r, t.first_reference_nonzero, actual, expected);
    r.reason = "the solution is all zeros while the reference is not" + at_first(r);
    return r;
  }
  r.max_abs_error = r.numel ? t.max_abs : 0.0;
  r.max_rel_error = r.numel ? t.max_rel : 0.0;
  r.passed = r.matched_ratio >= tol.required_ratio;
  if (!r.passed) {
    r.reason = format("matched ratio %.6f < %g: %lld of %lld elements outside atol=%g + rtol=%g*|ref|", r.matched_ratio,
                      tol.required_ratio, (long long)r.mismatches, (long long)r.numel, tol.atol, tol.rtol) +
               at_first(r);
  } else if (tol.max_error_cap && r.max_abs_error > *tol.max_error_cap) {
    r.passed = false;
    r.reason = format("max abs error %.8g above the cap %g", r.max_abs_error, *tol.max_error_cap);
  } else {
    r.reason = "ok";
  }
  return r;
}

Summary combine(std::span<const Report> reports) {
  Summary s;
  for (const Report& r : reports) {
    max_into(s.max_abs_error, r.max_abs_error);
    max_into(s.max_rel_error, r.max_rel_error);
    s.min_matched_ratio = std::min(s.min_matched_ratio, r.matched_ratio);
    s.mismatches += r.mismatches;
    if (!r.passed) {
      if (s.passed) s.reason = r.output + ": " + r.reason;
      s.passed = false;
      ++s.failed_reports;
    }
  }
  if (s.passed) s.reason = "ok";
  return s;
}

}  // namespace kindex::compare
