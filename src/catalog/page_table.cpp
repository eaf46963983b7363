// The page-table generator (docs/catalog.md, "Page tables"). Every draw comes from the counter-based RNG
// keyed by (seed, stream, counter), so a table is a pure function of its arguments.
#include "catalog/page_table.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <unordered_map>

#include "catalog/constraints.hpp"
#include "core/error.hpp"
#include "core/random.hpp"
#include "core/random_math.hpp"

namespace kindex::catalog {

std::string_view length_distribution_name(LengthDistribution d) {
  switch (d) {
    case LengthDistribution::exponential: return "exponential";
    case LengthDistribution::equal: return "equal";
    case LengthDistribution::long_tail: return "long_tail";
    case LengthDistribution::one_long: return "one_long";
  }
  return "exponential";
}

std::optional<LengthDistribution> parse_length_distribution(std::string_view name) {
  for (LengthDistribution d : {LengthDistribution::exponential, LengthDistribution::equal,
                               LengthDistribution::long_tail, LengthDistribution::one_long})
    if (name == length_distribution_name(d)) return d;
  return std::nullopt;
}

std::string_view length_distribution_names() { return "exponential, equal, long_tail, one_long"; }

int64_t PageTable::tokens(int64_t page_size) const {
  int64_t total = 0;
  for (size_t b = 0; b + 1 < kv_indptr.size(); ++b) {
    int64_t pages = kv_indptr[b + 1] - kv_indptr[b];
    if (pages > 0) total += (pages - 1) * page_size + kv_last_page_len[b];
  }
  return total;
}

namespace {

constexpr const char* kWhere = "page-table generator";

// Draws from one named stream in sequence.
class Draws {
 public:
  Draws(uint64_t seed, const char* stream) : seed_(seed), stream_(stream_id(stream)) {}
  double uniform() { return uniform01(seed_, stream_, counter_++); }
  int64_t below(int64_t n) { return std::min<int64_t>(n - 1, int64_t(uniform() * double(n))); }  // [0, n)

 private:
  uint64_t seed_, stream_, counter_ = 0;
};

// Gives each sequence of `which` min_len pages plus its weight's share of the rest (rounded down); the pages left
// over go one each to consecutive sequences from a drawn start.
void split_by_weights(std::vector<int64_t>& lengths, const std::vector<size_t>& which, int64_t total, int64_t min_len,
                      const std::vector<double>& w, Draws& draws) {
  int64_t rest = total - min_len * int64_t(which.size());
  double sum = std::accumulate(w.begin(), w.end(), 0.0);
  int64_t given = 0;
  for (size_t k = 0; k < which.size(); ++k) {
    int64_t share = int64_t(std::floor(double(rest) * w[k] / sum));
    lengths[which[k]] = min_len + share;
    given += share;
  }
  for (int64_t r = rest - given, k = draws.below(int64_t(which.size())); r > 0; --r, ++k)
    lengths[which[size_t(k) % which.size()]] += 1;
}

// Splits `total` evenly over `which`: the remainder one page each to the first sequences.
void equal_split(std::vector<int64_t>& lengths, const std::vector<size_t>& which, int64_t total) {
  const int64_t n = int64_t(which.size());
  for (int64_t k = 0; k < n; ++k) lengths[which[size_t(k)]] = total / n + (k < total % n ? 1 : 0);
}

// The standard normal quantile (Acklam's rational approximation, relative error < 1.2e-9) in the generator's
// libm-free arithmetic, so long_tail tables do not depend on the platform's log.
double normal_quantile(double p) {
  namespace rm = random_math;
  static constexpr double a[6] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                                  1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static constexpr double b[5] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                                  6.680131188771972e+01, -1.328068155288572e+01};
  static constexpr double c[6] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                                  -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static constexpr double d[4] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                                  3.754408661907416e+00};
  auto tail = [&](double u) {  // the lower tail at u in (0, 0.02425]
    const double q = std::sqrt(-2.0 * rm::log_unit(u));
    return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
           ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0);
  };
  constexpr double kLow = 0.02425;
  if (p < kLow) return tail(p);
  if (p > 1.0 - kLow) return -tail(1.0 - p);
  const double q = p - 0.5, r = q * q;
  return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
         (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1.0);
}

// Heavy-tailed lengths: lognormal weights (sigma kLongTailSigma) at stratified quantiles, one draw inside each of
// n equal strata, the strata dealt to the sequences in a drawn order. Stratifying keeps the tail's share close to
// its expectation at every batch size (i.i.d. draws at batch 32 put less than half the pages in the top decile a
// third of the time), so the top 10% of sequences reliably hold most of the pages. Sigma 2 rather than a milder
// 1.5: every sequence's minimum page dilutes the tail, and at 8 pages a sequence 1.5 leaves the top decile < 50%.
constexpr double kLongTailSigma = 2.0;
std::vector<double> long_tail_weights(size_t n, Draws& draws) {
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  for (size_t i = n; i > 1; --i) std::swap(order[i - 1], order[size_t(draws.below(int64_t(i)))]);
  std::vector<double> z(n);
  for (size_t i = 0; i < n; ++i) {
    const double p = std::min((double(i) + draws.uniform()) / double(n), 1.0 - 0x1p-53);
    z[order[i]] = kLongTailSigma * normal_quantile(p);
  }
  // exp(z - max z): the weights relative to the largest, in (0, 1] (the split needs only their ratios).
  const double top = *std::max_element(z.begin(), z.end());
  std::vector<double> w(n);
  for (size_t i = 0; i < n; ++i) w[i] = random_math::exp_nonpositive(z[i] - top);
  return w;
}

// Splits `total` over `which` (each at least min_len) as the distribution says.
void split_lengths(std::vector<int64_t>& lengths, const std::vector<size_t>& which, int64_t total, int64_t min_len,
                   LengthDistribution dist, Draws& draws) {
  if (which.empty()) return;
  const size_t n = which.size();
  switch (dist) {
    case LengthDistribution::exponential: {  // a few long sequences and many short ones, as in a serving batch
      std::vector<double> w(n);
      for (double& x : w) x = -std::log(draws.uniform());
      split_by_weights(lengths, which, total, min_len, w, draws);
      return;
    }
    case LengthDistribution::equal:
      equal_split(lengths, which, total);
      return;
    case LengthDistribution::long_tail:
      split_by_weights(lengths, which, total, min_len, long_tail_weights(n, draws), draws);
      return;
    case LengthDistribution::one_long: {
      // The long one takes half (less when the others' minimum needs more); the others share the rest evenly.
      const size_t at = size_t(draws.below(int64_t(n)));
      const int64_t others = int64_t(n) - 1;
      const int64_t long_len = n == 1 ? total : std::min(total / 2, total - others * min_len);
      std::vector<size_t> rest;
      for (size_t k = 0; k < n; ++k)
        if (k != at) rest.push_back(which[k]);
      lengths[which[at]] = long_len;
      equal_split(lengths, rest, total - long_len);
      return;
    }
  }
}

// k distinct values of [0, n) in random order (sparse Fisher-Yates: memory O(k), not O(n)).
std::vector<int64_t> sample_distinct(int64_t n, int64_t k, Draws& draws) {
  std::unordered_map<int64_t, int64_t> moved;
  auto at = [&](int64_t i) {
    auto it = moved.find(i);
    return it == moved.end() ? i : it->second;
  };
  std::vector<int64_t> out(size_t(std::max<int64_t>(k, 0)));
  for (int64_t i = 0; i < k; ++i) {
    int64_t j = i + draws.below(n - i);
    int64_t vi = at(i), vj = at(j);
    moved[j] = vi;
    out[size_t(i)] = vj;
  }
  return out;
}

enum class Role { normal, empty, one_token, full_one_page, repeats };

}  // namespace

PageTable generate_page_table(int64_t batch_size, int64_t num_pages, int64_t num_kv_indices, int64_t page_size,
                              uint64_t seed, const PageTableOptions& options) {
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  if (batch_size < 1 || batch_size >= kMax)
    throw Error(kWhere, "batch_size", std::to_string(batch_size), "must be in [1, 2^31 - 1)");
  if (num_pages < 1 || num_pages > kMax)
    throw Error(kWhere, "num_pages", std::to_string(num_pages), "must be in [1, 2^31 - 1]");
  if (page_size < 1 || page_size > kMax)
    throw Error(kWhere, "page_size", std::to_string(page_size), "must be in [1, 2^31 - 1]");
  if (num_kv_indices < 0 || num_kv_indices > kMax)
    throw Error(kWhere, "num_kv_indices", std::to_string(num_kv_indices), "must be in [0, 2^31 - 1]");
  if (num_kv_indices < batch_size && !options.allow_empty)
    throw Error(kWhere, "num_kv_indices", std::to_string(num_kv_indices),
                "fewer page ids than sequences (batch_size " + std::to_string(batch_size) +
                    ") would leave a sequence empty; allow_empty permits that");

  const size_t B = size_t(batch_size);
  Draws length_draws(seed, "page_table.lengths"), id_draws(seed, "page_table.ids"), last_draws(seed, "page_table.last"),
      role_draws(seed, "page_table.roles");

  // 1. Sequence lengths in pages; in adversarial mode some sequences get fixed roles first.
  std::vector<int64_t> lengths(B, 0);
  std::vector<Role> roles(B, Role::normal);
  const int64_t min_normal = options.allow_empty ? 0 : 1;
  int64_t budget = num_kv_indices;
  if (options.adversarial) {
    std::vector<size_t> order(B);
    std::iota(order.begin(), order.end(), 0);
    for (size_t i = B; i > 1; --i) std::swap(order[i - 1], order[size_t(role_draws.below(int64_t(i)))]);
    std::vector<std::pair<Role, int64_t>> wanted = {{Role::one_token, 1}, {Role::full_one_page, 1}, {Role::repeats, 4}};
    if (options.allow_empty) wanted.insert(wanted.begin(), {Role::empty, 0});
    size_t next = 0;
    for (auto [role, pages] : wanted) {
      if (next >= B) break;
      int64_t others = int64_t(B - next - 1);
      // Keep a page for every later sequence, and leave the last sequence to take the remainder if needed.
      if (pages > budget - others * min_normal) continue;
      if (role == Role::empty && others == 0 && budget > 0) continue;
      roles[order[next]] = role;
      lengths[order[next]] = pages;
      budget -= pages;
      ++next;
    }
  }
  std::vector<size_t> normal;
  for (size_t b = 0; b < B; ++b)
    if (roles[b] == Role::normal) normal.push_back(b);
  if (!normal.empty()) {
    split_lengths(lengths, normal, budget, min_normal, options.lengths, length_draws);
  } else if (budget > 0) {  // every sequence has a role: the longest-capable one takes the remainder
    size_t taker = size_t(std::find(roles.begin(), roles.end(), Role::repeats) - roles.begin());
    if (taker == B)
      taker = size_t(std::find_if(roles.begin(), roles.end(), [](Role r) { return r != Role::empty; }) - roles.begin());
    if (roles[taker] != Role::repeats) roles[taker] = Role::normal;
    lengths[taker] += budget;
  }

  // 2. Page ids. One shared prefix page starts every non-empty sequence; the last `recent` pages of each
  // sequence are decode-step pages allocated in batch order (id = base + step * B + b); the rest are scattered
  // distinct ids in random order, repeating only when num_kv_indices exceeds num_pages.
  int64_t mean_len = num_kv_indices / batch_size;
  int64_t steps = std::min<int64_t>({std::max<int64_t>(1, mean_len / 4), 256, (num_pages - 1) / batch_size});
  steps = std::max<int64_t>(steps, 0);
  const int64_t region = steps * batch_size;
  const int64_t base = id_draws.below(num_pages - region);  // decode region [base, base + region)
  int64_t k = id_draws.below(num_pages - region);           // prefix: any id outside the region
  const int64_t prefix = k < base ? k : k + region;

  std::vector<int64_t> recent(B, 0);
  int64_t scattered_needed = 0;
  for (size_t b = 0; b < B; ++b) {
    if (lengths[b] == 0) continue;
    recent[b] = std::min<int64_t>(lengths[b] - 1, steps);
    scattered_needed += lengths[b] - 1 - recent[b];
  }
  // The scattered ids avoid the prefix and the decode-step ids in use: draw from the compressed range
  // [0, available) and map past the excluded ids (sorted; x = j + #{i : excluded[i] - i <= j}).
  std::vector<int64_t> excluded = {prefix};
  for (size_t b = 0; b < B; ++b)
    for (int64_t step = steps - recent[b]; step < steps; ++step)
      excluded.push_back(base + step * batch_size + int64_t(b));
  std::sort(excluded.begin(), excluded.end());
  std::vector<int64_t> shifted(excluded.size());
  for (size_t i = 0; i < excluded.size(); ++i) shifted[i] = excluded[i] - int64_t(i);
  auto expand = [&](int64_t j) { return j + (std::upper_bound(shifted.begin(), shifted.end(), j) - shifted.begin()); };
  const int64_t available = num_pages - int64_t(excluded.size());
  std::vector<int64_t> scattered = sample_distinct(available, std::min(scattered_needed, available), id_draws);
  for (int64_t& id : scattered) id = expand(id);
  while (int64_t(scattered.size()) < scattered_needed) scattered.push_back(id_draws.below(num_pages));

  PageTable t;
  t.shared_prefix_page = int32_t(prefix);
  t.kv_indptr.assign(B + 1, 0);
  t.kv_indices.reserve(size_t(num_kv_indices));
  t.kv_last_page_len.assign(B, 1);
  size_t next_scattered = 0;
  for (size_t b = 0; b < B; ++b) {
    size_t begin = t.kv_indices.size();
    if (lengths[b] > 0) {
      t.kv_indices.push_back(int32_t(prefix));
      for (int64_t i = 0; i < lengths[b] - 1 - recent[b]; ++i)
        t.kv_indices.push_back(int32_t(scattered[next_scattered++]));
      for (int64_t step = steps - recent[b]; step < steps; ++step)
        t.kv_indices.push_back(int32_t(base + step * batch_size + int64_t(b)));
    }
    if (roles[b] == Role::repeats && lengths[b] >= 3) {
      t.kv_indices[begin + 2] = t.kv_indices[begin + 1];                                    // adjacent repeat
      if (lengths[b] >= 4) t.kv_indices[begin + size_t(lengths[b]) - 1] = int32_t(prefix);  // distant repeat
    }
    t.kv_indptr[b + 1] = int32_t(t.kv_indices.size());
    // 3. Partial last pages: uniform in [1, page_size]; adversarial roles pin 1 or page_size.
    int32_t last = int32_t(1 + last_draws.below(page_size));
    if (roles[b] == Role::one_token) last = 1;
    if (roles[b] == Role::full_one_page || roles[b] == Role::repeats) last = int32_t(page_size);
    if (lengths[b] > 0 && (lengths[b] - 1) * page_size + last < options.min_tokens) {
      if (lengths[b] * page_size < options.min_tokens)
        throw Error(kWhere, "min_tokens", std::to_string(options.min_tokens),
                    "sequence " + std::to_string(b) + " has " + std::to_string(lengths[b]) + " page(s) of " +
                        std::to_string(page_size) + " tokens: fewer than min_tokens");
      last = int32_t(options.min_tokens - (lengths[b] - 1) * page_size);
    }
    t.kv_last_page_len[b] = last;
  }
  check_page_table(t.kv_indptr.data(), int64_t(t.kv_indptr.size()), t.kv_indices.data(), int64_t(t.kv_indices.size()),
                   t.kv_last_page_len.data(), num_pages, page_size, std::string(kWhere) + " (internal check)");
  return t;
}

kindex_paged_decode_params decode_params(const DecodeSizes& sizes, const std::vector<int32_t>& kv_indptr,
                                         const std::vector<int32_t>& kv_indices, const int32_t* kv_last_page_len) {
  kindex_paged_decode_params p = KINDEX_PAGED_DECODE_PARAMS_INIT;
  p.batch_size = kv_indptr.empty() ? 0 : int32_t(kv_indptr.size() - 1);
  p.num_qo_heads = sizes.num_qo_heads;
  p.num_kv_heads = sizes.num_kv_heads;
  p.head_dim = sizes.head_dim;
  p.page_size = sizes.page_size;
  p.num_pages = sizes.num_pages;
  p.num_kv_indices = int64_t(kv_indices.size());
  p.kv_indptr = kv_indptr.data();
  p.kv_indices = kv_indices.data();
  p.kv_last_page_len = kv_last_page_len;
  return p;
}

}  // namespace kindex::catalog
