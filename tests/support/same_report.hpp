#pragma once
// Two comparator Reports of one comparison (host and device, or serial and strided) agree field by field; numbers
// agree when equal or both NaN. `label` names the case in failure messages.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>
#include <utility>

#include "compare/compare.hpp"

namespace kindex::test {

inline void expect_same_number(double a, double b, const char* field, const std::string& label) {
  if (std::isnan(a))
    EXPECT_TRUE(std::isnan(b)) << label << ": " << field << " NaN and " << b;
  else
    EXPECT_EQ(a, b) << label << ": " << field;
}

inline void expect_same_report(const compare::Report& a, const compare::Report& b, const std::string& label) {
  // Fields that are never NaN compare as one tuple; the error magnitudes and the failing values may be NaN.
  auto exact = [](const compare::Report& r) {
    return std::tuple(r.output, int(r.rule), r.passed, r.numel, r.matched_ratio, r.mismatches, r.nonfinite,
                      r.reference_nonfinite, r.all_zero, r.first_failure, r.reason);
  };
  EXPECT_EQ(exact(a), exact(b)) << label;
  for (auto [field, name] : {std::pair{&compare::Report::max_abs_error, "max_abs_error"},
                             std::pair{&compare::Report::max_rel_error, "max_rel_error"},
                             std::pair{&compare::Report::first_failure_actual, "first_failure_actual"},
                             std::pair{&compare::Report::first_failure_expected, "first_failure_expected"}})
    expect_same_number(a.*field, b.*field, name, label);
}

}  // namespace kindex::test
