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

// Runs `element(tally, x, y, i)` over all elements in parallel (each chunk in increasing i) and merges the chunks.
template <class Element>
Tally tally(const TensorView& actual, const TensorView& expected, Element element) {
  Tally total = empty_tally();
  std::mutex mu;
  with_loader(actual.dtype, [&](auto load) {
    parallel_for(
        actual.numel(),
        [&](int64_t begin, int64_t end) {
          Tally t = empty_tally();
          for (int64_t i = begin; i < end; ++i) element(t, load(actual.data, i), load(expected.data, i), i);
          std::lock_guard<std::mutex> lock(mu);
          merge(total, t);
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

void set_first(Report& r, int64_t at, float actual, float expected) {
  r.first_failure = at;
  if (at < 0) return;
  r.first_failure_actual = actual;
  r.first_failure_expected = expected;
}

std::string at_first(const Report& r) {
  return format("; first at [%lld]: %.8g vs %.8g", (long long)r.first_failure, r.first_failure_actual,
                r.first_failure_expected);
}

}  // namespace

std::string_view rule_name(Rule r) { return r == Rule::flashinfer_bench ? "flashinfer-bench" : "sol-execbench"; }

void check_views(const std::string& output, const TensorView& actual, const TensorView& expected, Where memory) {
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
    if (v->where != memory)
      throw Error(where, output, which,
                  memory == Where::host ? "tensor is not in host memory" : "tensor is not in device memory");
    if (v->numel() > 0 && !v->is_contiguous()) throw Error(where, output, which, "tensor is not contiguous");
    if (v->numel() > 0 && !v->data) throw Error(where, output, which, "tensor has no data");
  }
}

namespace {

// One output compared on the host under a rule: `element` tallies each pair (the rule's per-element code, inlined
// into the loop), `make_report` gives the rule's verdict on the tally.
template <class Tolerance, class Element, class MakeReport>
Report compare_on_host(const std::string& output, const TensorView& actual, const TensorView& expected,
                       const Tolerance& tol, Element element, MakeReport make_report) {
  check_views(output, actual, expected, Where::host);
  const float atol = float(tol.atol), rtol = float(tol.rtol);
  const Tally t =
      tally(actual, expected, [&](Tally& t, float x, float y, int64_t i) { element(t, x, y, i, atol, rtol); });
  return make_report(output, actual.numel(), t, tol);
}

}  // namespace

Report compare_fib(const std::string& output, const TensorView& actual, const TensorView& expected,
                   const FibTolerance& tol) {
  const auto element = [](Tally& t, float x, float y, int64_t i, float atol, float rtol) {
    fib_element(t, x, y, i, atol, rtol);
  };
  return compare_on_host(output, actual, expected, tol, element, fib_report);
}

Report compare_sol(const std::string& output, const TensorView& actual, const TensorView& expected,
                   const SolTolerance& tol) {
  const auto element = [](Tally& t, float x, float y, int64_t i, float atol, float rtol) {
    sol_element(t, x, y, i, atol, rtol);
  };
  return compare_on_host(output, actual, expected, tol, element, sol_report);
}

namespace {

// What both rules' reports say alike of a tally: counts, the matched ratio, the first failing element.
Report tally_report(const std::string& output, Rule rule, int64_t numel, const Tally& t) {
  Report r;
  r.output = output;
  r.rule = rule;
  r.numel = numel;
  r.mismatches = t.mismatches;
  r.nonfinite = t.nonfinite;
  r.reference_nonfinite = t.reference_nonfinite;
  r.all_zero = r.numel > 0 && !t.solution_nonzero;
  r.matched_ratio = r.numel ? std::clamp(1.0 - double(t.mismatches) / double(r.numel), 0.0, 1.0) : 1.0;
  set_first(r, t.first_failure, t.first_failure_actual, t.first_failure_expected);
  return r;
}

}  // namespace

Report fib_report(const std::string& output, int64_t numel, const Tally& t, const FibTolerance& tol) {
  Report r = tally_report(output, Rule::flashinfer_bench, numel, t);
  if (t.nonfinite) {
    r.passed = false;
    r.max_abs_error = r.max_rel_error = t.solution_inf ? kInf : kNaN;
    set_first(r, t.first_nonfinite, t.first_nonfinite_actual, t.first_nonfinite_expected);
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

Report sol_report(const std::string& output, int64_t numel, const Tally& t, const SolTolerance& tol) {
  Report r = tally_report(output, Rule::sol_execbench, numel, t);
  if (t.nonfinite || t.reference_nonfinite) {
    r.passed = false;
    r.max_abs_error = r.max_rel_error = t.any_nan ? kNaN : kInf;
    set_first(r, t.first_nonfinite, t.first_nonfinite_actual, t.first_nonfinite_expected);
    r.reason = format("non-finite values: %lld in the solution, %lld in the reference", (long long)t.nonfinite,
                      (long long)t.reference_nonfinite) +
               at_first(r);
    return r;
  }
  if (r.all_zero && t.reference_sq > 0) {
    r.passed = false;
    r.max_abs_error = r.max_rel_error = double(float(std::sqrt(t.reference_sq)));
    set_first(r, t.first_reference_nonzero, t.first_reference_nonzero_actual, t.first_reference_nonzero_expected);
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
    rule::max_into(s.max_abs_error, r.max_abs_error);
    rule::max_into(s.max_rel_error, r.max_rel_error);
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
