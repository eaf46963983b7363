#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

#include "runner/measurement.hpp"

namespace kindex::runner {

TEST(Statistics, PercentilesInterpolateLinearlyLikeNumpy) {
  std::vector<double> s = {10, 20, 30, 40, 50};
  EXPECT_DOUBLE_EQ(percentile(s, 0.5), 30);
  EXPECT_DOUBLE_EQ(percentile(s, 0.05), 12);  // position 0.2 between 10 and 20
  EXPECT_DOUBLE_EQ(percentile(s, 0.95), 48);  // position 3.8 between 40 and 50
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 0.5), 2.5);
  EXPECT_THROW(percentile({}, 0.5), std::invalid_argument);
}

TEST(Statistics, SummaryOfAKnownSample) {
  // Unsorted on purpose; one outlier.
  Summary s = summarize({7, 1, 3, 5, 100, 3, 4});
  EXPECT_EQ(s.count, 7u);
  EXPECT_DOUBLE_EQ(s.median, 4);
  EXPECT_DOUBLE_EQ(s.mean, 123.0 / 7.0);
  EXPECT_DOUBLE_EQ(s.minimum, 1);
  EXPECT_DOUBLE_EQ(s.maximum, 100);
  // sorted 1 3 3 4 5 7 100: p05 at 0.3 -> 1.6, p95 at 5.7 -> 7 + 0.7 * 93
  EXPECT_DOUBLE_EQ(s.p05, 1.6);
  EXPECT_NEAR(s.p95, 72.1, 1e-9);
  // |x - 4| = 3 3 1 0 1 1 96 -> sorted 0 1 1 1 3 3 96 -> median 1
  EXPECT_DOUBLE_EQ(s.mad, 1);
}

TEST(Statistics, MedianIntervalBracketsTheMedian) {
  std::vector<double> s;
  for (int i = 1; i <= 50; ++i) s.push_back(i);
  Summary r = summarize(s);
  // n = 50: ranks floor(25 - 6.93) = 18 and ceil(26 + 6.93) = 33 (1-based).
  EXPECT_DOUBLE_EQ(r.ci95_low, 18);
  EXPECT_DOUBLE_EQ(r.ci95_high, 33);
  EXPECT_LE(r.ci95_low, r.median);
  EXPECT_GE(r.ci95_high, r.median);
  Summary one = summarize({5});
  EXPECT_DOUBLE_EQ(one.ci95_low, 5);
  EXPECT_DOUBLE_EQ(one.ci95_high, 5);
}

TEST(Statistics, TrialsAreTheMeanOfPerTrialMedians) {
  TrialSummary t = summarize_trials({{1, 2, 3}, {10, 20, 30, 40}, {5}});
  ASSERT_EQ(t.trial_medians.size(), 3u);
  EXPECT_DOUBLE_EQ(t.trial_medians[1], 25);
  EXPECT_DOUBLE_EQ(t.latency, (2.0 + 25.0 + 5.0) / 3.0);
  EXPECT_EQ(t.pooled.count, 8u);
  EXPECT_DOUBLE_EQ(t.pooled.median, 7.5);
  EXPECT_THROW(summarize_trials({{}, {}}), std::invalid_argument);
}

}  // namespace kindex::runner
