// The decode reference against an independent, naive long-double computation written here: explicit token lists,
// textbook softmax, no shared code with src/reference beyond the bf16/fp16 conversions.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "catalog/page_table.hpp"
#include "core/error.hpp"
#include "core/half.hpp"
#include "core/random.hpp"
#include "core/tensor.hpp"
#include "reference/reference.hpp"

using namespace kindex;

namespace {

struct Case {
  int group;
  int num_kv_heads;
  int head_dim;
  int page_size;
  DType dtype;
  std::vector<int> seq_tokens;  // tokens per sequence (0: empty)
  bool pass_last_page_len;      // false: NULL (only valid when every sequence fills its last page)
  uint64_t seed;
};

std::string describe(const Case& c) {
  std::string s = "group " + std::to_string(c.group) + " kv " + std::to_string(c.num_kv_heads) + " d " +
                  std::to_string(c.head_dim) + " ps " + std::to_string(c.page_size) + " " +
                  std::string(dtype_name(c.dtype)) + " seqs";
  for (int t : c.seq_tokens) s += " " + std::to_string(t);
  return s;
}

// A decode problem with its page table: every non-empty sequence starts with one shared page id, the other ids
// are drawn from a pool smaller than the pages needed, so ids repeat within and across sequences.
struct Problem {
  Case c;
  int batch, hq, hkv, dim, ps;
  int64_t num_pages;
  Tensor q, k_cache, v_cache, output;
  std::vector<int32_t> indptr{0}, indices, last_len;
  std::vector<float> lse;

  explicit Problem(const Case& cs) : c(cs) {
    batch = int(c.seq_tokens.size());
    hkv = c.num_kv_heads;
    hq = c.group * hkv;
    dim = c.head_dim;
    ps = c.page_size;
    int64_t total_pages = 0;
    for (int t : c.seq_tokens) total_pages += (t + ps - 1) / ps;
    num_pages = std::max<int64_t>(3, total_pages / 2 + 1);
    const int32_t shared = int32_t(num_pages - 1);
    uint64_t draw = 0;
    for (int t : c.seq_tokens) {
      const int pages = (t + ps - 1) / ps;
      for (int j = 0; j < pages; ++j)
        indices.push_back(j == 0 ? shared : int32_t(uniform01(c.seed, 7, draw++) * double(num_pages)));
      indptr.push_back(int32_t(indices.size()));
      last_len.push_back(pages ? t - (pages - 1) * ps : 0);
    }
    q = Tensor(c.dtype, {batch, hq, dim});
    k_cache = Tensor(c.dtype, {num_pages, ps, hkv, dim});
    v_cache = Tensor(c.dtype, {num_pages, ps, hkv, dim});
    output = Tensor(c.dtype, {batch, hq, dim});
    fill_normal(q, c.seed, stream_id("q"));
    fill_normal(k_cache, c.seed, stream_id("k_cache"));
    fill_normal(v_cache, c.seed, stream_id("v_cache"));
    lse.assign(size_t(batch * hq), 12345.0f);
  }

  kindex_paged_decode_params params() {
    kindex_paged_decode_params p = catalog::decode_params({hq, hkv, dim, ps, num_pages}, indptr, indices,
                                                          c.pass_last_page_len ? last_len.data() : nullptr);
    p.dtype = c.dtype == DType::bf16 ? KINDEX_DTYPE_BF16 : KINDEX_DTYPE_FP16;
    p.q = q.data();
    p.k_cache = k_cache.data();
    p.v_cache = v_cache.data();
    p.sm_scale = float(1.0 / std::sqrt(double(dim)));
    p.output = output.data();
    p.lse = lse.data();
    return p;
  }
};

// Distance from x to the next representable value of the dtype at x's magnitude.
double ulp(DType t, double x) {
  const int mantissa_bits = t == DType::bf16 ? 7 : 10;
  const int min_exp = t == DType::bf16 ? -126 : -14;
  int e = x == 0 ? min_exp : std::max(min_exp, int(std::floor(std::log2(std::fabs(x)))));
  return std::ldexp(1.0, e - mantissa_bits);
}

void check_against_naive(Problem& pb) {
  SCOPED_TRACE(describe(pb.c));
  kindex_paged_decode_params p = pb.params();
  reference::paged_decode(p);
  const TensorView q = pb.q.view(), k = pb.k_cache.view(), v = pb.v_cache.view(), out = pb.output.view();
  const long double sm_scale = p.sm_scale;
  for (int b = 0; b < pb.batch; ++b) {
    // The sequence's tokens, spelled out: (page id, slot) for every slot of every page, the last page cut short.
    std::vector<std::pair<int64_t, int>> tokens;
    for (int32_t j = pb.indptr[b]; j < pb.indptr[b + 1]; ++j) {
      const bool last = j + 1 == pb.indptr[b + 1];
      const int slots = last ? pb.c.seq_tokens[b] - (pb.indptr[b + 1] - pb.indptr[b] - 1) * pb.ps : pb.ps;
      for (int s = 0; s < slots; ++s) tokens.push_back({pb.indices[size_t(j)], s});
    }
    ASSERT_EQ(int(tokens.size()), pb.c.seq_tokens[b]);
    for (int h = 0; h < pb.hq; ++h) {
      const int kv = h / pb.c.group;
      const int64_t o = (int64_t(b) * pb.hq + h) * pb.dim;
      if (tokens.empty()) {
        for (int d = 0; d < pb.dim; ++d) ASSERT_EQ(out.get(o + d), 0.0) << "empty sequence " << b;
        ASSERT_EQ(pb.lse[size_t(b * pb.hq + h)], -std::numeric_limits<float>::infinity());
        continue;
      }
      std::vector<long double> logits;
      for (auto [page, slot] : tokens) {
        const int64_t row = ((page * pb.ps + slot) * pb.hkv + kv) * pb.dim;
        long double dot = 0;
        for (int d = 0; d < pb.dim; ++d) dot += (long double)q.get(o + d) * (long double)k.get(row + d);
        logits.push_back(dot * sm_scale);
      }
      long double sum = 0;
      for (long double l : logits) sum += std::exp(l);
      const long double lse2 = std::log(sum) / std::log(2.0L);
      EXPECT_NEAR(pb.lse[size_t(b * pb.hq + h)], double(lse2), 1e-6 + 2e-7 * std::fabs(double(lse2)))
          << "lse b " << b << " h " << h;
      for (int d = 0; d < pb.dim; ++d) {
        long double exact = 0;
        for (size_t t = 0; t < tokens.size(); ++t) {
          const int64_t row = ((tokens[t].first * pb.ps + tokens[t].second) * pb.hkv + kv) * pb.dim;
          exact += std::exp(logits[t]) / sum * (long double)v.get(row + d);
        }
        // The reference rounds once to the dtype: it must be the nearest representable value.
        const double got = out.get(o + d), want = double(exact);
        ASSERT_LE(std::fabs(got - want), 0.5 * ulp(pb.c.dtype, got) * (1 + 1e-9) + 1e-12 * std::fabs(want))
            << "b " << b << " h " << h << " d " << d << ": " << got << " vs exact " << want;
      }
    }
  }
}

}  // namespace

TEST(PagedDecodeReference, MatchesNaiveOnChosenConfigurations) {
  const std::vector<Case> cases = {
      {1, 4, 64, 1, DType::bf16, {0, 1, 37, 5}, false, 1},
      {3, 2, 128, 16, DType::f16, {1, 16, 17, 100, 0}, true, 2},
      {5, 1, 256, 64, DType::bf16, {64, 1, 130}, true, 3},
      {6, 4, 128, 64, DType::bf16, {128, 192, 0}, false, 4},  // NULL last_page_len: full pages
      {8, 4, 128, 1, DType::bf16, {3, 50, 0, 1}, false, 5},
      {16, 1, 64, 16, DType::f16, {33, 2}, true, 6},
      {16, 2, 256, 1, DType::bf16, {1, 9}, true, 7},
  };
  for (const Case& c : cases) {
    Problem pb(c);
    check_against_naive(pb);
  }
}

TEST(PagedDecodeReference, MatchesNaiveOnRandomConfigurations) {
  const int groups[] = {1, 3, 5, 6, 8, 16}, dims[] = {64, 128, 256}, page_sizes[] = {1, 16, 64};
  for (uint64_t seed = 100; seed < 112; ++seed) {
    auto pick = [&](uint64_t stream, int n) { return int(uniform01(seed, stream, 0) * n); };
    Case c{groups[pick(1, 6)],
           1 + pick(2, 4),
           dims[pick(3, 3)],
           page_sizes[pick(4, 3)],
           pick(5, 2) ? DType::bf16 : DType::f16,
           {},
           true,
           seed};
    const int batch = 1 + pick(6, 4);
    for (int b = 0; b < batch; ++b) c.seq_tokens.push_back(int(uniform01(seed, 8, uint64_t(b)) * 150));
    Problem pb(c);
    check_against_naive(pb);
  }
}

TEST(PagedDecodeReference, LseIsBaseTwo) {
  // q = 0 makes both logits 0: lse = log2(2) = 1 (the natural log would give 0.693), output = mean of the values.
  Problem pb({1, 1, 64, 1, DType::bf16, {2}, false, 9});
  for (int64_t i = 0; i < pb.q.numel(); ++i) pb.q.set(i, 0.0);
  kindex_paged_decode_params p = pb.params();
  reference::paged_decode(p);
  EXPECT_EQ(pb.lse[0], 1.0f);
  const TensorView v = pb.v_cache.view();
  for (int d = 0; d < 64; ++d) {
    const double mean = (v.get(int64_t(pb.indices[0]) * 64 + d) + v.get(int64_t(pb.indices[1]) * 64 + d)) / 2;
    EXPECT_EQ(pb.output.get(d), double(round_bf16(float(mean)))) << d;
  }
}

TEST(PagedDecodeReference, LseMayBeNull) {
  Problem pb({3, 2, 64, 16, DType::bf16, {20}, true, 10});
  kindex_paged_decode_params p = pb.params();
  p.lse = nullptr;
  EXPECT_NO_THROW(reference::paged_decode(p));
}

namespace {

// Runs the reference on a deliberately broken table and returns the Error; the output must stay untouched.
Error decode_error(Problem& pb, kindex_paged_decode_params p) {
  for (int64_t i = 0; i < pb.output.numel(); ++i) pb.output.set(i, 7.0);
  try {
    reference::paged_decode(p);
  } catch (const Error& e) {
    for (int64_t i = 0; i < pb.output.numel(); ++i)
      if (pb.output.get(i) != 7.0) ADD_FAILURE() << "output written before validation failed";
    return e;
  }
  ADD_FAILURE() << "no kindex::Error thrown";
  return Error("", "", "", "");
}

}  // namespace

TEST(PagedDecodeReference, BadIndicesNameTheField) {
  Problem pb({6, 4, 128, 64, DType::bf16, {100, 70}, true, 11});

  auto p = pb.params();
  pb.indices[1] = 9999;
  Error e = decode_error(pb, p);
  EXPECT_EQ(e.where(), "paged_decode");
  EXPECT_EQ(e.field(), "kv_indices[1]");
  EXPECT_EQ(e.value(), "9999");
  EXPECT_EQ(e.problem(), "page id out of range [0, " + std::to_string(pb.num_pages) + ")");
  pb.indices[1] = -1;
  EXPECT_EQ(decode_error(pb, p).field(), "kv_indices[1]");
  pb.indices[1] = 0;

  pb.indptr[1] = 5;  // {0, 5, 4}
  e = decode_error(pb, p);
  EXPECT_EQ(e.field(), "kv_indptr[2]");
  EXPECT_NE(std::string(e.what()).find("decreases"), std::string::npos) << e.what();
  pb.indptr[1] = 2;

  pb.indptr[0] = 1;
  EXPECT_EQ(decode_error(pb, p).field(), "kv_indptr[0]");
  pb.indptr[0] = 0;

  p.num_kv_indices = int64_t(pb.indices.size()) + 1;
  e = decode_error(pb, p);
  EXPECT_EQ(e.field(), "kv_indptr[2]");
  EXPECT_NE(std::string(e.what()).find("num_kv_indices"), std::string::npos) << e.what();
  p = pb.params();

  pb.last_len[0] = 0;
  e = decode_error(pb, p);
  EXPECT_EQ(e.field(), "kv_last_page_len[0]");
  EXPECT_EQ(e.value(), "0");
  pb.last_len[0] = 65;
  EXPECT_EQ(decode_error(pb, p).value(), "65");
  pb.last_len[0] = 36;

  p.num_qo_heads = 25;
  EXPECT_EQ(decode_error(pb, p).field(), "num_qo_heads");
  p = pb.params();
  p.dtype = KINDEX_DTYPE_FP32;
  EXPECT_EQ(decode_error(pb, p).field(), "dtype");
  p = pb.params();
  p.kv_indptr = nullptr;
  EXPECT_EQ(decode_error(pb, p).field(), "kv_indptr");

  EXPECT_NO_THROW(reference::paged_decode(pb.params()));  // the table restored is valid again
}
