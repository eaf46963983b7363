#include "measure/statistics.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace kindex::measure {

static double sorted_percentile(const std::vector<double>& s, double q) {
  double pos = q * double(s.size() - 1);
  size_t lo = size_t(std::floor(pos));
  size_t hi = std::min(lo + 1, s.size() - 1);
  return s[lo] + (s[hi] - s[lo]) * (pos - double(lo));
}

double percentile(std::vector<double> samples, double q) {
  if (samples.empty()) throw std::invalid_argument("percentile of an empty sample");
  std::sort(samples.begin(), samples.end());
  return sorted_percentile(samples, std::clamp(q, 0.0, 1.0));
}

double median(std::vector<double> samples) { return percentile(std::move(samples), 0.5); }

Summary summarize(const std::vector<double>& samples) {
  if (samples.empty()) throw std::invalid_argument("summary of an empty sample");
  std::vector<double> s = samples;
  std::sort(s.begin(), s.end());
  Summary r;
  r.count = s.size();
  r.median = sorted_percentile(s, 0.5);
  r.mean = std::accumulate(s.begin(), s.end(), 0.0) / double(s.size());
  r.minimum = s.front();
  r.maximum = s.back();
  r.p05 = sorted_percentile(s, 0.05);
  r.p95 = sorted_percentile(s, 0.95);
  std::vector<double> deviations(s.size());
  for (size_t i = 0; i < s.size(); ++i) deviations[i] = std::fabs(s[i] - r.median);
  r.mad = median(std::move(deviations));
  // The median lies between order statistics j and k (1-based) with probability >= 95%, where
  // j = n/2 - 1.96 sqrt(n)/2 and k = 1 + n/2 + 1.96 sqrt(n)/2 (normal approximation of Binomial(n, 1/2)).
  double n = double(s.size());
  double half_width = 1.96 * std::sqrt(n) / 2.0;
  auto rank = [&](double r1) { return size_t(std::clamp(r1, 1.0, n)) - 1; };
  r.ci95_low = s[rank(std::floor(n / 2.0 - half_width))];
  r.ci95_high = s[rank(std::ceil(1.0 + n / 2.0 + half_width))];
  return r;
}

TrialSummary summarize_trials(const std::vector<std::vector<double>>& trials) {
  TrialSummary t;
  std::vector<double> all;
  for (const auto& trial : trials) {
    if (trial.empty()) continue;
    t.trial_medians.push_back(median(trial));
    all.insert(all.end(), trial.begin(), trial.end());
  }
  if (all.empty()) throw std::invalid_argument("summary of trials without samples");
  t.pooled = summarize(all);
  t.latency = std::accumulate(t.trial_medians.begin(), t.trial_medians.end(), 0.0) / double(t.trial_medians.size());
  return t;
}

}  // namespace kindex::measure
