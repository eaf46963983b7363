#include "catalog/page_table.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "catalog/builtin.hpp"
#include "catalog/constraints.hpp"
#include "catalog/inputs.hpp"
#include "helpers.hpp"

namespace kindex::catalog {
namespace {

struct Case {
  int64_t batch, pages, indices, page_size;
};

// The ps1 and ps64 seed shapes and a few edge shapes.
const std::vector<Case> kCases = {{1, 8, 7, 1},           {1, 9347, 102, 1},    {16, 8686, 8636, 1},
                                  {64, 28831, 28815, 1},  {2, 1348, 130, 64},   {128, 31809, 8761, 64},
                                  {16, 19713, 16593, 64}, {1, 425, 361, 64},    {7, 3, 50, 16},
                                  {5, 1, 5, 1},           {32, 100000, 32, 128}};

std::vector<int32_t> sequence(const PageTable& t, size_t b) {
  return std::vector<int32_t>(t.kv_indices.begin() + t.kv_indptr[b], t.kv_indices.begin() + t.kv_indptr[b + 1]);
}

TEST(PageTable, ValidCountsAndSharedPrefix) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(testing::Message() << c.batch << "/" << c.pages << "/" << c.indices << "/" << c.page_size);
    PageTable t = generate_page_table(c.batch, c.pages, c.indices, c.page_size, 42);
    ASSERT_EQ(t.kv_indptr.size(), size_t(c.batch + 1));
    ASSERT_EQ(t.kv_indices.size(), size_t(c.indices));
    ASSERT_EQ(t.kv_last_page_len.size(), size_t(c.batch));
    EXPECT_NO_THROW(check_page_table(t.kv_indptr.data(), c.batch + 1, t.kv_indices.data(), c.indices,
                                     t.kv_last_page_len.data(), c.pages, c.page_size, "test"));
    for (size_t b = 0; b < size_t(c.batch); ++b) {
      auto seq = sequence(t, b);
      ASSERT_GE(seq.size(), 1u) << "sequence " << b << " is empty";
      EXPECT_EQ(seq[0], t.shared_prefix_page) << "sequence " << b;
      for (int32_t id : seq) EXPECT_TRUE(id >= 0 && id < c.pages);
    }
    // Ids are distinct apart from the shared prefix whenever there are enough pages.
    if (c.indices - c.batch + 1 <= c.pages) {
      std::set<int32_t> others;
      for (size_t b = 0; b < size_t(c.batch); ++b) {
        auto seq = sequence(t, b);
        for (size_t i = 1; i < seq.size(); ++i) EXPECT_TRUE(others.insert(seq[i]).second) << "repeated id " << seq[i];
      }
    }
  }
}

TEST(PageTable, ReproducibleBySeed) {
  PageTable a = generate_page_table(16, 14977, 6068, 64, 7), b = generate_page_table(16, 14977, 6068, 64, 7);
  PageTable c = generate_page_table(16, 14977, 6068, 64, 8);
  EXPECT_EQ(a.kv_indptr, b.kv_indptr);
  EXPECT_EQ(a.kv_indices, b.kv_indices);
  EXPECT_EQ(a.kv_last_page_len, b.kv_last_page_len);
  EXPECT_NE(a.kv_indices, c.kv_indices);
  EXPECT_NE(a.kv_indptr, c.kv_indptr);
}

TEST(PageTable, LooksLikeACapturedServingTable) {
  const int64_t B = 16, N = 19713, M = 16593, P = 64;
  PageTable t = generate_page_table(B, N, M, P, 3);
  // Uneven sequence lengths.
  std::vector<int64_t> lengths;
  for (int64_t b = 0; b < B; ++b) lengths.push_back(t.kv_indptr[size_t(b) + 1] - t.kv_indptr[size_t(b)]);
  EXPECT_GT(*std::max_element(lengths.begin(), lengths.end()), 2 * *std::min_element(lengths.begin(), lengths.end()));
  // Recent pages are decode steps allocated in batch order: consecutive ids of one sequence differ by B, and
  // sequence b's last page is b more than sequence 0's last page.
  int32_t last0 = t.kv_indices[size_t(t.kv_indptr[1]) - 1];
  for (int64_t b = 0; b < B; ++b) {
    auto seq = sequence(t, size_t(b));
    ASSERT_GE(seq.size(), 3u);
    EXPECT_EQ(seq.back() - seq[seq.size() - 2], B);
    EXPECT_EQ(seq.back(), last0 + b);
  }
  // The rest is scattered: not sorted, spread over most of [0, num_pages).
  auto seq = sequence(t, 0);
  EXPECT_FALSE(std::is_sorted(seq.begin() + 1, seq.end()));
  auto [lo, hi] = std::minmax_element(t.kv_indices.begin(), t.kv_indices.end());
  EXPECT_GT(*hi - *lo, N / 2);
  // Partial last pages uniform in [1, page_size], not all equal.
  std::set<int32_t> lasts(t.kv_last_page_len.begin(), t.kv_last_page_len.end());
  EXPECT_GT(lasts.size(), 4u);
  for (int32_t l : t.kv_last_page_len) EXPECT_TRUE(l >= 1 && l <= P);
  EXPECT_EQ(t.tokens(P),
            (M - B) * P + std::accumulate(t.kv_last_page_len.begin(), t.kv_last_page_len.end(), int64_t(0)));
  // page_size 1: every last page holds one token.
  PageTable t1 = generate_page_table(4, 100, 40, 1, 3);
  for (int32_t l : t1.kv_last_page_len) EXPECT_EQ(l, 1);
  EXPECT_EQ(t1.tokens(1), 40);
}

// FNV-1a 64 over a table's three arrays (int32 bytes, in order).
uint64_t table_hash(uint64_t h, const PageTable& t) {
  for (const auto* v : {&t.kv_indptr, &t.kv_indices, &t.kv_last_page_len})
    for (int32_t x : *v)
      for (int i = 0; i < 4; ++i) h = (h ^ ((uint32_t(x) >> (8 * i)) & 0xFF)) * 1099511628211ull;
  return h;
}

// The default (exponential) lengths give, bit for bit, the tables the generator gave before lengths were an
// option: every bundled decode workload's table and the edge shapes above, plain and adversarial. The hashes were
// taken from the generator at a4b6ef5 (before the option existed); a change here changes every seed workload's
// inputs and so every recorded WorkloadCase's data.
TEST(PageTable, DefaultTablesAreThoseOfEveryEarlierRun) {
  uint64_t bundled = 1469598103934665603ull;
  size_t workloads = 0;
  for (const std::string& name : list_builtin()) {
    const Problem p = builtin_problem(name);
    if (!decode_family_params(p.definition)) continue;
    for (const Workload& w : p.workloads) {
      GenerateOptions options;
      options.skip_random_floats = true;
      Inputs in = generate_inputs(p.definition, w, 1, options);
      PageTable t;
      for (auto [input, dst] : {std::pair{"kv_indptr", &t.kv_indptr}, {"kv_indices", &t.kv_indices},
                                {"kv_last_page_len", &t.kv_last_page_len}}) {
        auto it = in.tensors.find(input);
        if (it != in.tensors.end())
          dst->assign(it->second.ptr<int32_t>(), it->second.ptr<int32_t>() + it->second.numel());
      }
      bundled = table_hash(bundled, t);
      ++workloads;
    }
  }
  EXPECT_EQ(workloads, 113u);  // 48 ps1 + 20 ps64 seed cases, 3 for each of the other 15 definitions
  EXPECT_EQ(bundled, 0x8a0bcd16eac0c0cbull) << std::hex << bundled;

  uint64_t direct = 1469598103934665603ull;
  PageTableOptions adversarial;
  adversarial.adversarial = true;
  adversarial.allow_empty = true;
  for (const Case& c : kCases)
    for (uint64_t seed : {0ull, 42ull, 0x9E3779B97F4A7C15ull}) {
      direct = table_hash(direct, generate_page_table(c.batch, c.pages, c.indices, c.page_size, seed));
      direct = table_hash(direct, generate_page_table(c.batch, c.pages, c.indices, c.page_size, seed, adversarial));
    }
  EXPECT_EQ(direct, 0x4858597707b8a611ull) << std::hex << direct;
}

TEST(PageTable, MoreIdsThanPagesRepeatButStayValid) {
  PageTable t = generate_page_table(8, 10, 500, 16, 1);
  EXPECT_EQ(t.kv_indices.size(), 500u);
  for (int32_t id : t.kv_indices) EXPECT_TRUE(id >= 0 && id < 10);
  std::set<int32_t> distinct(t.kv_indices.begin(), t.kv_indices.end());
  EXPECT_EQ(distinct.size(), 10u);  // every page in use
}

TEST(PageTable, AdversarialMode) {
  PageTableOptions opt;
  opt.adversarial = true;
  opt.allow_empty = true;
  const int64_t P = 16;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    PageTable t = generate_page_table(8, 5000, 200, P, seed, opt);
    EXPECT_NO_THROW(check_page_table(t.kv_indptr.data(), 9, t.kv_indices.data(), 200, t.kv_last_page_len.data(), 5000,
                                     P, "adversarial"));
    bool empty = false, one_token = false, full_one_page = false, repeated = false, full_last = false;
    for (size_t b = 0; b < 8; ++b) {
      auto seq = sequence(t, b);
      if (seq.empty()) empty = true;
      if (seq.size() == 1 && t.kv_last_page_len[b] == 1) one_token = true;
      if (seq.size() == 1 && t.kv_last_page_len[b] == P) full_one_page = true;
      if (seq.size() > 1 && t.kv_last_page_len[b] == P) full_last = true;
      std::set<int32_t> ids(seq.begin(), seq.end());
      if (ids.size() < seq.size()) repeated = true;
    }
    EXPECT_TRUE(empty && one_token && full_one_page && repeated && full_last) << "seed " << seed;
  }
  // Without allow_empty no sequence is empty, and tiny batches still work.
  opt.allow_empty = false;
  for (int64_t batch : {1, 2, 3, 4, 9}) {
    PageTable t = generate_page_table(batch, 50, batch + 3, 4, 11, opt);
    for (size_t b = 0; b < size_t(batch); ++b) EXPECT_FALSE(sequence(t, b).empty());
  }
  opt.allow_empty = true;
  PageTable none = generate_page_table(3, 10, 0, 4, 1, opt);
  EXPECT_EQ(none.kv_indptr, (std::vector<int32_t>{0, 0, 0, 0}));
}

std::vector<int64_t> lengths_of(const PageTable& t) {
  std::vector<int64_t> out;
  for (size_t b = 0; b + 1 < t.kv_indptr.size(); ++b) out.push_back(t.kv_indptr[b + 1] - t.kv_indptr[b]);
  return out;
}

PageTableOptions with(LengthDistribution d) {
  PageTableOptions o;
  o.lengths = d;
  return o;
}

const std::vector<LengthDistribution> kAll = {LengthDistribution::exponential, LengthDistribution::equal,
                                              LengthDistribution::long_tail, LengthDistribution::one_long};

TEST(PageTableLengths, NamesRoundTripAndUnknownNamesAreRefused) {
  for (LengthDistribution d : kAll) EXPECT_EQ(parse_length_distribution(length_distribution_name(d)), d);
  EXPECT_EQ(parse_length_distribution("uniform"), std::nullopt);
  EXPECT_EQ(parse_length_distribution("Equal"), std::nullopt);
  EXPECT_EQ(parse_length_distribution(""), std::nullopt);
  EXPECT_EQ(PageTableOptions{}.lengths, LengthDistribution::exponential);
}

TEST(PageTableLengths, EqualGivesEverySequenceTheSameShareRemainderFirst) {
  for (const Case& c : kCases) {
    if (c.indices < c.batch) continue;
    SCOPED_TRACE(testing::Message() << c.batch << "/" << c.pages << "/" << c.indices << "/" << c.page_size);
    auto len =
        lengths_of(generate_page_table(c.batch, c.pages, c.indices, c.page_size, 5, with(LengthDistribution::equal)));
    for (int64_t b = 0; b < c.batch; ++b)
      EXPECT_EQ(len[size_t(b)], c.indices / c.batch + (b < c.indices % c.batch ? 1 : 0)) << "sequence " << b;
    auto [lo, hi] = std::minmax_element(len.begin(), len.end());
    EXPECT_LE(*hi - *lo, 1);
  }
}

TEST(PageTableLengths, OneLongHoldsHalfAtADrawnPositionTheOthersShareEvenly) {
  std::set<size_t> positions;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    const int64_t B = 16, M = 4099;
    auto len = lengths_of(generate_page_table(B, 9000, M, 16, seed, with(LengthDistribution::one_long)));
    const size_t at = size_t(std::max_element(len.begin(), len.end()) - len.begin());
    positions.insert(at);
    EXPECT_EQ(len[at], M / 2) << "seed " << seed;
    std::vector<int64_t> others;
    for (size_t b = 0; b < len.size(); ++b)
      if (b != at) others.push_back(len[b]);
    auto [lo, hi] = std::minmax_element(others.begin(), others.end());
    EXPECT_LE(*hi - *lo, 1) << "seed " << seed;
  }
  EXPECT_GT(positions.size(), 5u);  // the position is drawn, not fixed
  // Too few pages for half: the others keep one page each, the long one takes the rest; batch 1 holds everything.
  auto tight = lengths_of(generate_page_table(8, 100, 10, 1, 3, with(LengthDistribution::one_long)));
  EXPECT_EQ(*std::max_element(tight.begin(), tight.end()), 3);
  EXPECT_EQ(std::count(tight.begin(), tight.end(), 1), 7);
  EXPECT_EQ(lengths_of(generate_page_table(1, 100, 37, 1, 3, with(LengthDistribution::one_long))),
            std::vector<int64_t>{37});
}

// The longest tenth of the sequences holds most of the pages, at every batch of 32 or more with 8 or more pages a
// sequence on average, for every seed tried; every sequence keeps at least one page.
TEST(PageTableLengths, LongTailPutsMostPagesInTheTopTenthOfSequences) {
  for (int64_t B : {32, 33, 64, 100, 128, 256})
    for (int64_t mean : {8, 64, 512})
      for (uint64_t seed = 0; seed < 40; ++seed) {
        const int64_t M = B * mean;
        auto len = lengths_of(generate_page_table(B, 2 * M, M, 16, seed, with(LengthDistribution::long_tail)));
        EXPECT_GE(*std::min_element(len.begin(), len.end()), 1);
        std::sort(len.rbegin(), len.rend());
        const double top = double(std::accumulate(len.begin(), len.begin() + B / 10, int64_t(0))) / double(M);
        EXPECT_GT(top, 0.5) << "batch " << B << " mean " << mean << " seed " << seed;  // lowest seen: 0.519
      }
  // The exponential default is not heavy-tailed: its top decile holds far less.
  auto len = lengths_of(generate_page_table(256, 60000, 256 * 64, 16, 1));
  std::sort(len.rbegin(), len.rend());
  EXPECT_LT(double(std::accumulate(len.begin(), len.begin() + 25, int64_t(0))) / (256.0 * 64), 0.4);
}

// Only the split changes: every distribution keeps the shared prefix, the decode-step pages, scattered distinct
// ids, partial last pages, reproducibility by seed and the adversarial roles.
TEST(PageTableLengths, EveryDistributionKeepsTheRestOfTheGenerator) {
  for (LengthDistribution d : kAll) {
    SCOPED_TRACE(std::string(length_distribution_name(d)));
    const int64_t B = 16, N = 19713, M = 16593, P = 64;
    PageTable t = generate_page_table(B, N, M, P, 3, with(d)), again = generate_page_table(B, N, M, P, 3, with(d));
    EXPECT_EQ(t.kv_indptr, again.kv_indptr);
    EXPECT_EQ(t.kv_indices, again.kv_indices);
    EXPECT_EQ(t.kv_last_page_len, again.kv_last_page_len);
    EXPECT_NE(t.kv_indices, generate_page_table(B, N, M, P, 4, with(d)).kv_indices);
    std::set<int32_t> others, last_step;  // last_step: each sequence's last page minus its position
    for (int64_t b = 0; b < B; ++b) {
      auto seq = sequence(t, size_t(b));
      ASSERT_GE(seq.size(), 1u);
      EXPECT_EQ(seq[0], t.shared_prefix_page);
      if (seq.size() >= 2) last_step.insert(seq.back() - int32_t(b));
      if (seq.size() >= 3) {
        EXPECT_EQ(seq.back() - seq[seq.size() - 2], B);
      }
      for (size_t i = 1; i < seq.size(); ++i) EXPECT_TRUE(others.insert(seq[i]).second) << "repeated id " << seq[i];
    }
    EXPECT_EQ(last_step.size(), 1u);  // the last decode step's pages are consecutive in batch order
    EXPECT_GT(std::set<int32_t>(t.kv_last_page_len.begin(), t.kv_last_page_len.end()).size(), 4u);

    PageTableOptions adversarial = with(d);
    adversarial.adversarial = adversarial.allow_empty = true;
    PageTable a = generate_page_table(8, 5000, 200, 16, 9, adversarial);
    auto len = lengths_of(a);
    EXPECT_EQ(std::count(len.begin(), len.end(), 0), 1);
    EXPECT_EQ(std::accumulate(len.begin(), len.end(), int64_t(0)), 200);
  }
  // The distributions differ from each other at the same seed.
  std::set<std::vector<int32_t>> indptrs;
  for (LengthDistribution d : kAll) indptrs.insert(generate_page_table(64, 30000, 20000, 16, 1, with(d)).kv_indptr);
  EXPECT_EQ(indptrs.size(), kAll.size());
}

// min_tokens (a request's query tokens are in the cache) lengthens a short last page and changes nothing else; 1 is
// the default's table; a one-page sequence on pages smaller than min_tokens is an error naming it.
TEST(PageTable, MinTokensLengthensShortLastPagesOnly) {
  PageTableOptions adversarial;  // holds a one-page sequence of 1 token
  adversarial.adversarial = true;
  const PageTable plain = generate_page_table(64, 900, 400, 16, 7, adversarial);
  PageTableOptions one = adversarial;
  one.min_tokens = 1;
  const PageTable same = generate_page_table(64, 900, 400, 16, 7, one);
  EXPECT_EQ(same.kv_indptr, plain.kv_indptr);
  EXPECT_EQ(same.kv_last_page_len, plain.kv_last_page_len);
  PageTableOptions four = adversarial;
  four.min_tokens = 4;
  const PageTable t = generate_page_table(64, 900, 400, 16, 7, four);
  EXPECT_EQ(t.kv_indptr, plain.kv_indptr);
  EXPECT_EQ(t.kv_indices, plain.kv_indices);
  int lengthened = 0;
  for (size_t b = 0; b + 1 < t.kv_indptr.size(); ++b) {
    const int32_t pages = t.kv_indptr[b + 1] - t.kv_indptr[b];
    EXPECT_GE((pages - 1) * 16 + t.kv_last_page_len[b], 4) << b;
    if (t.kv_last_page_len[b] != plain.kv_last_page_len[b]) {
      ++lengthened;
      EXPECT_EQ(pages, 1);
      EXPECT_EQ(t.kv_last_page_len[b], 4);
    }
  }
  EXPECT_GT(lengthened, 0);
  PageTableOptions big = adversarial;
  big.min_tokens = 20;
  try {
    generate_page_table(64, 900, 400, 16, 7, big);
    ADD_FAILURE() << "one-page sequences of 16 tokens cannot hold 20";
  } catch (const Error& e) {
    EXPECT_EQ(e.field(), "min_tokens");
  }
}

TEST(PageTable, ImpossibleCountsAreErrors) {
  EXPECT_KINDEX_ERROR(generate_page_table(8, 100, 7, 1, 0), "page-table generator", "num_kv_indices", "7");
  EXPECT_KINDEX_ERROR(generate_page_table(0, 100, 7, 1, 0), "page-table generator", "batch_size", "0");
  EXPECT_KINDEX_ERROR(generate_page_table(1, 0, 7, 1, 0), "page-table generator", "num_pages", "0");
  EXPECT_KINDEX_ERROR(generate_page_table(1, 10, 7, 0, 0), "page-table generator", "page_size", "0");
  EXPECT_KINDEX_ERROR(generate_page_table(1, 10, 1ll << 32, 1, 0), "page-table generator", "num_kv_indices", "");
}

TEST(PageTable, CheckerNamesFieldIndexAndValue) {
  std::vector<int32_t> indptr = {0, 2, 5}, indices = {3, 1, 4, 1, 5}, last = {2, 3};
  auto check = [&] { check_page_table(indptr.data(), 3, indices.data(), 5, last.data(), 6, 4, "tbl"); };
  EXPECT_NO_THROW(check());
  indices[3] = 6;
  EXPECT_KINDEX_ERROR(check(), "tbl", "kv_indices[3]", "6");
  indices[3] = -1;
  EXPECT_KINDEX_ERROR(check(), "tbl", "kv_indices[3]", "-1");
  indices[3] = 1;
  indptr = {0, 6, 5};
  EXPECT_KINDEX_ERROR(check(), "tbl", "kv_indptr[2]", "5");
  indptr = {1, 2, 5};
  EXPECT_KINDEX_ERROR(check(), "tbl", "kv_indptr[0]", "1");
  indptr = {0, 2, 4};
  EXPECT_KINDEX_ERROR(check(), "tbl", "kv_indptr[2]", "4");
  indptr = {0, 2, 5};
  last = {0, 3};
  EXPECT_KINDEX_ERROR(check(), "tbl", "kv_last_page_len[0]", "0");
  last = {2, 5};
  EXPECT_KINDEX_ERROR(check(), "tbl", "kv_last_page_len[1]", "5");
}

}  // namespace
}  // namespace kindex::catalog
