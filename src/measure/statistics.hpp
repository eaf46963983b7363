#pragma once
// Order statistics of timing samples, as the runner reports them: median (primary), mean, minimum, maximum,
// p05, p95, MAD and a distribution-free 95% interval of the median. Percentiles interpolate linearly between
// order statistics (numpy's default), so small known samples give values a reader can check by hand.
#include <cstddef>
#include <vector>

namespace kindex::measure {

struct Summary {
  size_t count = 0;
  double median = 0, mean = 0, minimum = 0, maximum = 0, p05 = 0, p95 = 0;
  double mad = 0;                      // median absolute deviation from the median (unscaled)
  double ci95_low = 0, ci95_high = 0;  // 95% interval of the median (binomial order-statistic ranks)
};

// q in [0, 1]; the samples need not be sorted. Throws std::invalid_argument on an empty sample.
double percentile(std::vector<double> samples, double q);
double median(std::vector<double> samples);
Summary summarize(const std::vector<double>& samples);

// The sources' headline latency over several timing trials: the median of each trial, then the mean of those
// medians (FlashInfer-Bench: 3 trials; SOL-ExecBench: 1). The other statistics pool every sample.
struct TrialSummary {
  Summary pooled;
  std::vector<double> trial_medians;
  double latency = 0;  // mean of trial_medians
};
TrialSummary summarize_trials(const std::vector<std::vector<double>>& trials);

}  // namespace kindex::measure
