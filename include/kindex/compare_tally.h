/* The tally of one output's comparison: what compare::compare_fib / compare_sol count over the elements before they
 * judge. A C struct, so the device comparator (libkindex_gpu_reference.so: kindex_gpu_reference_compare) hands it
 * across its C ABI; element_rule.hpp fills it, on the host and on the device alike. */
#ifndef KINDEX_COMPARE_TALLY_H
#define KINDEX_COMPARE_TALLY_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kindex_compare_tally {
  int64_t mismatches;          /* elements outside the tolerance (non-finite ones included) */
  int64_t nonfinite;           /* NaN/inf in the solution */
  int64_t reference_nonfinite; /* NaN/inf in the reference */
  double reference_sq;         /* sum of the reference's squares (the norm SOL reports for an all-zero solution) */
  float max_abs, max_rel;      /* maxima as torch.max computes them: NaN wins */
  /* flat index (-1: none) and the two values there (as fp32) of the first failing element, the first non-finite
   * one (FlashInfer-Bench: in the solution; SOL-ExecBench: in either), the first non-zero reference element */
  int64_t first_failure, first_nonfinite, first_reference_nonzero;
  float first_failure_actual, first_failure_expected;
  float first_nonfinite_actual, first_nonfinite_expected;
  float first_reference_nonzero_actual, first_reference_nonzero_expected;
  uint8_t solution_inf;     /* an inf (not only NaN) in the solution */
  uint8_t any_nan;          /* a NaN on either side */
  uint8_t solution_nonzero; /* the solution has a non-zero element */
  uint8_t reserved[5];
} kindex_compare_tally;

#ifdef __cplusplus
}
#endif

#endif
