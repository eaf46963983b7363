#pragma once
// The two correctness rules kindex judges implementations by, exactly as their sources compute them: both cast
// solution x and reference y to fp32 and work in fp32.
//
// FlashInfer-Bench (flashinfer_bench/bench: compute_error_stats + DefaultEvaluator.check_correctness):
//   any inf/NaN in the solution fails (max errors reported as inf, or NaN when there is no inf);
//   abs = |x - y|, rel = abs / (|y| + 1e-8); an element fails only if abs > atol AND rel > rtol (NaN compares false);
//   matched_ratio = 1 - failures / numel must be >= required_ratio (1.0: every element);
//   max_abs / max_rel are the maxima of abs / rel (NaN propagates, as torch.max does).
//   Consequence: a reference lse of -inf (empty sequence) fails against a -inf solution (non-finite), and an
//   empty sequence can never pass with the reference's own answer.
// SOL-ExecBench (sol_execbench/core/bench/correctness.py: check_tensor_sanity + compute_error_stats):
//   any inf/NaN in the solution or the reference fails;
//   a solution that is all zeros while the reference is not fails (max errors = the reference's L2 norm);
//   an element matches if |x - y| <= atol + rtol * |y|; matched_ratio must be >= required_ratio (0.99);
//   optional max_error_cap: max abs error above it fails;
//   max_abs = max |x - y|, max_rel = max |x - y| / max(|y|, atol).
// Both pass an empty tensor (matched_ratio 1).
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "compare/element_rule.hpp"
#include "core/tensor.hpp"

namespace kindex::compare {

enum class Rule : uint8_t { flashinfer_bench, sol_execbench };
std::string_view rule_name(Rule r);  // "flashinfer-bench", "sol-execbench"

struct FibTolerance {
  double atol = 1e-2;
  double rtol = 1e-2;
  double required_ratio = 1.0;
};

struct SolTolerance {
  double atol = 1e-2;
  double rtol = 1e-2;
  double required_ratio = 0.99;  // the harness's value; the dataset's "required_match_ratio" is not used upstream
  std::optional<double> max_error_cap = std::nullopt;  // max abs error above this fails, whatever the ratio
};

// One output of one trial.
struct Report {
  std::string output;  // the output's name
  Rule rule = Rule::flashinfer_bench;
  bool passed = true;
  int64_t numel = 0;
  double max_abs_error = 0;  // as the rule's source computes it (see above)
  double max_rel_error = 0;
  double matched_ratio = 1;
  int64_t mismatches = 0;             // elements outside the tolerance (non-finite ones included)
  int64_t nonfinite = 0;              // NaN/inf elements in the solution
  int64_t reference_nonfinite = 0;    // NaN/inf elements in the reference
  bool all_zero = false;              // the solution is all zeros (fails SOL when the reference is not)
  int64_t first_failure = -1;         // flat index of the first failing element, -1 if none
  double first_failure_actual = 0;    // solution value there (as fp32)
  double first_failure_expected = 0;  // reference value there
  std::string reason;                 // one line: why it failed, or "ok"
};

// Throws kindex::Error naming `output` when shapes or dtypes differ, or a view is not a contiguous tensor of a
// floating dtype in `memory`.
void check_views(const std::string& output, const TensorView& actual, const TensorView& expected, Where memory);

// Host tensors (check_views), tallied in parallel (kindex::parallel_for) and judged by fib_report / sol_report.
Report compare_fib(const std::string& output, const TensorView& actual, const TensorView& expected,
                   const FibTolerance& tolerance = {});
Report compare_sol(const std::string& output, const TensorView& actual, const TensorView& expected,
                   const SolTolerance& tolerance = {});

// The verdict on a tally of `numel` elements (element_rule.hpp), wherever it was counted: the device comparator
// (libkindex_gpu_reference.so) hands its tally to these, so a device comparison reports what the host one would.
Report fib_report(const std::string& output, int64_t numel, const Tally& tally, const FibTolerance& tolerance = {});
Report sol_report(const std::string& output, int64_t numel, const Tally& tally, const SolTolerance& tolerance = {});

// Several outputs and trials together, as the harnesses fold them: passed only if every report passed; the
// maxima of the error figures (NaN wins); the smallest matched ratio; the first failing report's reason.
struct Summary {
  bool passed = true;
  double max_abs_error = 0;
  double max_rel_error = 0;
  double min_matched_ratio = 1;
  int64_t mismatches = 0;
  int64_t failed_reports = 0;
  std::string reason;  // "<output>: <reason>" of the first failing report, or "ok"
};
Summary combine(std::span<const Report> reports);

}  // namespace kindex::compare
