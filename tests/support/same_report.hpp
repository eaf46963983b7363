#pragma once
// Two comparator Reports of one comparison (host and device, or serial and strided) agree field by field; numbers
// agree when equal or both NaN. `label` names the case in failure messages.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "compare/compare.hpp"

namespace kindex::test {

inline void expect_same_number(double a, double b, const char* field, const std::string& label) {
  if (std::isnan(a))
    EXPECT_TRUE(std::isnan(b)) << label << ": " << field << " NaN and " << b;
  else
    EXPECT_EQ(a, b) << label << ": " << field;
}

inline void expect_same_report(const compare::Report& a, const compare::Report& b, const std::string& label) {
  EXPECT_EQ(a.output, b.output) << label;
  EXPECT_EQ(a.rule, b.rule) << label;
  EXPECT_EQ(a.passed, b.passed) << label;
  EXPECT_EQ(a.numel, b.numel) << label;
  expect_same_number(a.max_abs_error, b.max_abs_error, "max_abs_error", label);
  expect_same_number(a.max_rel_error, b.max_rel_error, "max_rel_error", label);
  EXPECT_EQ(a.matched_ratio, b.matched_ratio) << label;
  EXPECT_EQ(a.mismatches, b.mismatches) << label;
  EXPECT_EQ(a.nonfinite, b.nonfinite) << label;
  EXPECT_EQ(a.reference_nonfinite, b.reference_nonfinite) << label;
  EXPECT_EQ(a.all_zero, b.all_zero) << label;
  EXPECT_EQ(a.first_failure, b.first_failure) << label;
  expect_same_number(a.first_failure_actual, b.first_failure_actual, "first_failure_actual", label);
  expect_same_number(a.first_failure_expected, b.first_failure_expected, "first_failure_expected", label);
  EXPECT_EQ(a.reason, b.reason) << label;
}

}  // namespace kindex::test
