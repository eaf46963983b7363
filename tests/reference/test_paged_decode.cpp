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
  int q_len = 1;     // query tokens per request
  bool hnd = false;  // K/V caches [num_pages, num_kv_heads, page_size, head_dim]
};

// The version-2 score and output modifiers (kindex.h), at their defaults.
struct Mods {
  float k_scale = 1, v_scale = 1, soft_cap = 0;
  int window_left = -1;
  std::vector<float> sinks;  // empty: none
  bool rope = false;         // pos_encoding ROPE_LLAMA
  float rope_scale = 1, rope_theta = 1e4f;
};

std::string describe(const Case& c) {
  std::string s = "q_len " + std::to_string(c.q_len) + (c.hnd ? " HND" : "") + " group " + std::to_string(c.group) + " kv " + std::to_string(c.num_kv_heads) + " d " +
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
    q = Tensor(c.dtype, {int64_t(batch) * c.q_len, hq, dim});
    k_cache = Tensor(c.dtype, {num_pages, ps, hkv, dim});  // HND: the same elements, read as [pages, hkv, ps, dim]
    v_cache = Tensor(c.dtype, {num_pages, ps, hkv, dim});
    output = Tensor(c.dtype, {int64_t(batch) * c.q_len, hq, dim});
    fill_normal(q, c.seed, stream_id("q"));
    fill_normal(k_cache, c.seed, stream_id("k_cache"));
    fill_normal(v_cache, c.seed, stream_id("v_cache"));
    lse.assign(size_t(batch * c.q_len * hq), 12345.0f);
  }
  // Element offset of token `slot` of page `page` for KV head `kv`.
  int64_t kv_row(int64_t page, int slot, int kv) const {
    return (c.hnd ? (page * hkv + kv) * ps + slot : (page * ps + slot) * hkv + kv) * dim;
  }

  kindex_paged_decode_params params(const Mods& m = {}) {
    kindex_paged_decode_params p = catalog::decode_params({hq, hkv, dim, ps, num_pages}, indptr, indices,
                                                          c.pass_last_page_len ? last_len.data() : nullptr);
    p.dtype = c.dtype == DType::bf16 ? KINDEX_DTYPE_BF16 : KINDEX_DTYPE_FP16;
    p.q = q.data();
    p.k_cache = k_cache.data();
    p.v_cache = v_cache.data();
    p.sm_scale = float(1.0 / std::sqrt(double(dim)));
    p.output = output.data();
    p.lse = lse.data();
    p.q_len_per_req = c.q_len;
    p.kv_layout = c.hnd ? KINDEX_KV_LAYOUT_HND : KINDEX_KV_LAYOUT_NHD;
    p.k_scale = m.k_scale;
    p.v_scale = m.v_scale;
    p.logits_soft_cap = m.soft_cap;
    p.window_left = m.window_left;
    p.sinks = m.sinks.empty() ? nullptr : m.sinks.data();
    p.pos_encoding = m.rope ? KINDEX_POS_ENCODING_ROPE_LLAMA : KINDEX_POS_ENCODING_NONE;
    p.rope_scale = m.rope_scale;
    p.rope_theta = m.rope_theta;
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

// A row of `dim` values, RoPE'd at `pos` when mods.rope: pair (i, i + dim/2) turned by pos / (rope_scale *
// rope_theta^(2i / dim)) radians, in long double.
std::vector<long double> naive_row(const TensorView& t, int64_t offset, int dim, const Mods& mods, int64_t pos) {
  std::vector<long double> x(static_cast<size_t>(dim));
  for (int d = 0; d < dim; ++d) x[size_t(d)] = t.get(offset + d);
  if (!mods.rope) return x;
  std::vector<long double> y = x;
  for (int i = 0; i < dim / 2; ++i) {
    const long double angle = (long double)pos / ((long double)mods.rope_scale *
                                                  std::pow((long double)mods.rope_theta, 2.0L * i / dim));
    y[size_t(i)] = x[size_t(i)] * std::cos(angle) - x[size_t(i + dim / 2)] * std::sin(angle);
    y[size_t(i + dim / 2)] = x[size_t(i + dim / 2)] * std::cos(angle) + x[size_t(i)] * std::sin(angle);
  }
  return y;
}

void check_against_naive(Problem& pb, const Mods& mods = {}) {
  SCOPED_TRACE(describe(pb.c));
  kindex_paged_decode_params p = pb.params(mods);
  reference::paged_decode(p);
  const TensorView q = pb.q.view(), k = pb.k_cache.view(), v = pb.v_cache.view(), out = pb.output.view();
  const long double sm_scale = p.sm_scale, cap = mods.soft_cap;
  const int q_len = pb.c.q_len;
  for (int b = 0; b < pb.batch; ++b) {
    // The sequence's tokens, spelled out: (page id, slot) for every slot of every page, the last page cut short.
    std::vector<std::pair<int64_t, int>> tokens;
    for (int32_t j = pb.indptr[b]; j < pb.indptr[b + 1]; ++j) {
      const bool last = j + 1 == pb.indptr[b + 1];
      const int slots = last ? pb.c.seq_tokens[b] - (pb.indptr[b + 1] - pb.indptr[b] - 1) * pb.ps : pb.ps;
      for (int s = 0; s < slots; ++s) tokens.push_back({pb.indices[size_t(j)], s});
    }
    ASSERT_EQ(int(tokens.size()), pb.c.seq_tokens[b]);
    for (int j = 0; j < q_len; ++j)
      for (int h = 0; h < pb.hq; ++h) {
        const int kv = h / pb.c.group;
        const int64_t qo = (int64_t(b) * q_len + j) * pb.hq + h, o = qo * pb.dim;
        // Token j is at position n - q_len + j: the keys it sees, by index, and its logits.
        const int64_t pos = int64_t(tokens.size()) - q_len + j;
        std::vector<size_t> seen;
        for (size_t t = 0; t < tokens.size(); ++t)
          if (int64_t(t) <= pos && (mods.window_left < 0 || int64_t(t) >= pos - mods.window_left)) seen.push_back(t);
        const bool sink = !mods.sinks.empty();
        if (seen.empty() && !sink) {
          for (int d = 0; d < pb.dim; ++d) ASSERT_EQ(out.get(o + d), 0.0) << "b " << b << " j " << j << " sees nothing";
          ASSERT_EQ(pb.lse[size_t(qo)], -std::numeric_limits<float>::infinity());
          continue;
        }
        std::vector<long double> logits;
        const std::vector<long double> qr = naive_row(q, o, pb.dim, mods, pos);
        for (size_t t : seen) {
          const int64_t row = pb.kv_row(tokens[t].first, tokens[t].second, kv);
          const std::vector<long double> kr = naive_row(k, row, pb.dim, mods, int64_t(t));
          long double dot = 0;
          for (int d = 0; d < pb.dim; ++d) dot += qr[size_t(d)] * (long double)mods.k_scale * kr[size_t(d)];
          const long double s = dot * sm_scale;
          logits.push_back(cap > 0 ? cap * std::tanh(s / cap) : s);
        }
        long double sum = sink ? std::exp((long double)mods.sinks[size_t(h)]) : 0;
        for (long double l : logits) sum += std::exp(l);
        const long double lse2 = std::log(sum) / std::log(2.0L);
        EXPECT_NEAR(pb.lse[size_t(qo)], double(lse2), 1e-6 + 2e-7 * std::fabs(double(lse2))) << "lse b " << b << " h " << h;
        for (int d = 0; d < pb.dim; ++d) {
          long double exact = 0;
          for (size_t i = 0; i < seen.size(); ++i) {
            const int64_t row = pb.kv_row(tokens[seen[i]].first, tokens[seen[i]].second, kv);
            exact += std::exp(logits[i]) / sum * (long double)mods.v_scale * (long double)v.get(row + d);
          }
          // The reference rounds once to the dtype: it must be the nearest representable value.
          const double got = out.get(o + d), want = double(exact);
          ASSERT_LE(std::fabs(got - want), 0.5 * ulp(pb.c.dtype, got) * (1 + 1e-9) + 1e-12 * std::fabs(want))
              << "b " << b << " j " << j << " h " << h << " d " << d << ": " << got << " vs exact " << want;
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

// ---- The version-2 variants (kindex.h): the naive computation above, and hand-checkable identities. ----

TEST(PagedDecodeReference, VariantsMatchNaive) {
  const int q_lens[] = {1, 2, 3, 8};
  for (uint64_t seed = 200; seed < 216; ++seed) {
    auto pick = [&](uint64_t stream, int n) { return int(uniform01(seed, stream, 0) * n); };
    Case c{1 + pick(1, 4), 1 + pick(2, 2), pick(3, 2) ? 64 : 128, pick(4, 2) ? 1 : 16,
           pick(5, 2) ? DType::bf16 : DType::f16, {}, true, seed, q_lens[pick(9, 4)], pick(10, 2) == 1};
    for (int b = 0; b < 3; ++b) c.seq_tokens.push_back(int(uniform01(seed, 8, uint64_t(b)) * 60));
    Problem pb(c);
    Mods m;
    m.k_scale = pick(11, 2) ? 0.5f : 1.0f;
    m.v_scale = pick(12, 2) ? 1.75f : 1.0f;
    m.soft_cap = pick(13, 3) == 0 ? 0.0f : pick(14, 2) ? 0.05f : 30.0f;  // 0.05: every logit near the cap
    m.window_left = pick(15, 3) == 0 ? -1 : pick(16, 40);
    if (pick(17, 2))
      for (int h = 0; h < pb.hq; ++h) m.sinks.push_back(float(uniform01(seed, 18, uint64_t(h)) * 6 - 3));
    m.rope = pick(19, 2) == 1;
    m.rope_scale = pick(20, 2) ? 1.0f : 4.0f;
    m.rope_theta = pick(21, 2) ? 1e4f : 5e5f;
    SCOPED_TRACE("k_scale " + std::to_string(m.k_scale) + " v_scale " + std::to_string(m.v_scale) + " cap " +
                 std::to_string(m.soft_cap) + " window " + std::to_string(m.window_left) + " sinks " +
                 std::to_string(m.sinks.size()) + (m.rope ? " rope scale " + std::to_string(m.rope_scale) +
                                                                " theta " + std::to_string(m.rope_theta)
                                                          : ""));
    check_against_naive(pb, m);
  }
}

// One token: the lse is its logit, cap * tanh(s / cap), in base 2, and the output its value row.
TEST(PagedDecodeReference, SoftCapIsCapTimesTanh) {
  for (float cap : {0.5f, 4.0f, 50.0f}) {
    Problem pb({1, 1, 64, 1, DType::bf16, {1}, false, 30});
    Mods m;
    m.soft_cap = cap;
    kindex_paged_decode_params p = pb.params(m);
    reference::paged_decode(p);
    const TensorView q = pb.q.view(), k = pb.k_cache.view();
    double s = 0;
    for (int d = 0; d < 64; ++d) s += q.get(d) * k.get(int64_t(pb.indices[0]) * 64 + d);
    s *= double(p.sm_scale);
    EXPECT_NEAR(pb.lse[0] * std::log(2.0), cap * std::tanh(s / cap), 1e-5) << "cap " << cap << " s " << s;
    EXPECT_LE(std::fabs(pb.lse[0] * std::log(2.0)), cap * (1 + 1e-6));
    for (int d = 0; d < 64; ++d) EXPECT_EQ(pb.output.get(d), pb.v_cache.get(int64_t(pb.indices[0]) * 64 + d));
  }
}

namespace {
// The reference over one 30-token request (page_size 1) with window_left w, and over the same request cut to its
// last w + 1 tokens (page ids dropped) with no window; m adds the rest of the variant to both.
std::pair<Problem, Problem> window_and_cut(int w, uint64_t seed, Mods m) {
  Problem full({4, 2, 64, 1, DType::bf16, {30}, false, seed});
  m.window_left = w;
  reference::paged_decode(full.params(m));
  Problem cut = full;  // shares q and the caches (Tensor copies share data); its own output
  cut.output = Tensor(full.output.dtype(), full.output.shape());
  const int keep = std::min(30, w + 1);
  cut.indices.erase(cut.indices.begin(), cut.indices.end() - keep);
  cut.indptr = {0, keep};
  cut.c.seq_tokens = {keep};
  m.window_left = -1;
  reference::paged_decode(cut.params(m));
  return {std::move(full), std::move(cut)};
}
}  // namespace

// A window of w keys left of a query is the sequence cut to its last w + 1 tokens.
TEST(PagedDecodeReference, WindowEqualsTheTruncatedSequence) {
  for (int w : {0, 5, 29, 30, 100}) {
    const auto [full, cut] = window_and_cut(w, 31, Mods{});
    for (int64_t i = 0; i < full.output.numel(); ++i) ASSERT_EQ(full.output.get(i), cut.output.get(i)) << "w " << w;
    EXPECT_EQ(full.lse, cut.lse) << "w " << w;
  }
}

// A sink is one more key with no value: sink 0 equals an extra token whose K row is 0 (logit 0) and V row is 0.
TEST(PagedDecodeReference, SinkEqualsAnExtraKeyWithAZeroValueRow) {
  Problem with_key({3, 1, 64, 1, DType::f16, {12}, false, 32});
  Problem with_sink({3, 1, 64, 1, DType::f16, {11}, false, 32});
  with_sink.q = with_key.q;
  with_sink.k_cache = with_key.k_cache;
  with_sink.v_cache = with_key.v_cache;
  with_sink.num_pages = with_key.num_pages;
  // The extra key's page (the last id) holds zeros, and no other token of the sequence uses it.
  const int32_t zero_page = int32_t(with_key.num_pages - 1);
  for (size_t i = 0; i + 1 < with_key.indices.size(); ++i) with_key.indices[i] = int32_t(i * 5 % zero_page);
  with_key.indices.back() = zero_page;
  with_sink.indices.assign(with_key.indices.begin(), with_key.indices.end() - 1);
  with_sink.indptr = {0, 11};
  for (int d = 0; d < 64; ++d) {
    with_key.k_cache.set(zero_page * 64 + d, 0.0);
    with_key.v_cache.set(zero_page * 64 + d, 0.0);
  }
  reference::paged_decode(with_key.params());
  Mods m;
  m.sinks.assign(3, 0.0f);
  reference::paged_decode(with_sink.params(m));
  for (int64_t i = 0; i < with_key.output.numel(); ++i)
    EXPECT_NEAR(with_key.output.get(i), with_sink.output.get(i), 1e-3 * std::fabs(with_key.output.get(i))) << i;
  for (size_t h = 0; h < 3; ++h) EXPECT_NEAR(with_key.lse[h], with_sink.lse[h], 1e-6) << h;
  // No key at all: zeros, and the sink's own lse (base 2).
  Problem empty({3, 1, 64, 1, DType::f16, {0}, false, 33});
  m.sinks = {0.5f, -1.0f, 2.0f};
  reference::paged_decode(empty.params(m));
  for (int64_t i = 0; i < empty.output.numel(); ++i) ASSERT_EQ(empty.output.get(i), 0.0);
  for (size_t h = 0; h < 3; ++h) EXPECT_FLOAT_EQ(empty.lse[h], float(m.sinks[h] / std::log(2.0)));
}

namespace {
// The reference on case c (NHD) and on the same tokens in HND (the page's token and head axes swapped) under m: the
// same numbers exactly.
void expect_hnd_equals_nhd(const Case& c, const Mods& m) {
  Problem nhd(c);
  Problem hnd = nhd;  // shares q (Tensor copies share data); its own caches and output
  hnd.c.hnd = true;
  hnd.k_cache = Tensor(nhd.k_cache.dtype(), nhd.k_cache.shape());
  hnd.v_cache = Tensor(nhd.v_cache.dtype(), nhd.v_cache.shape());
  hnd.output = Tensor(nhd.output.dtype(), nhd.output.shape());
  for (int64_t pg = 0; pg < nhd.num_pages; ++pg)
    for (int s = 0; s < nhd.ps; ++s)
      for (int kv = 0; kv < nhd.hkv; ++kv)
        for (int d = 0; d < nhd.dim; ++d) {
          hnd.k_cache.set(hnd.kv_row(pg, s, kv) + d, nhd.k_cache.get(nhd.kv_row(pg, s, kv) + d));
          hnd.v_cache.set(hnd.kv_row(pg, s, kv) + d, nhd.v_cache.get(nhd.kv_row(pg, s, kv) + d));
        }
  reference::paged_decode(nhd.params(m));
  reference::paged_decode(hnd.params(m));
  for (int64_t i = 0; i < nhd.output.numel(); ++i) ASSERT_EQ(nhd.output.get(i), hnd.output.get(i)) << i;
  EXPECT_EQ(nhd.lse, hnd.lse);
}
}  // namespace

TEST(PagedDecodeReference, HndEqualsNhdPermuted) {
  expect_hnd_equals_nhd({3, 3, 64, 16, DType::bf16, {40, 1, 16}, true, 34}, Mods{});
}

// k_scale multiplies the logits as sm_scale does; v_scale multiplies the output (exactly, for a power of two) and
// leaves lse alone.
TEST(PagedDecodeReference, KScaleFoldsIntoSmScaleAndVScaleScalesTheOutput) {
  Problem base({2, 2, 64, 16, DType::bf16, {37, 3}, true, 35});
  Problem scaled = base;  // shares q and the caches (Tensor copies share data); its own output
  scaled.output = Tensor(base.output.dtype(), base.output.shape());
  kindex_paged_decode_params p = base.params();
  p.sm_scale *= 4;
  reference::paged_decode(p);
  Mods m;
  m.k_scale = 4;
  m.v_scale = 2;
  reference::paged_decode(scaled.params(m));
  for (int64_t i = 0; i < base.output.numel(); ++i) ASSERT_EQ(2 * base.output.get(i), scaled.output.get(i)) << i;
  EXPECT_EQ(base.lse, scaled.lse);
}

// Token j of a request of q_len tokens over n keys is a one-token decode over the first n - q_len + j + 1 keys.
TEST(PagedDecodeReference, SeveralTokensPerRequestAreCausal) {
  const int q_len = 4, n = 9;
  Problem multi({2, 2, 64, 1, DType::bf16, {n}, false, 36, q_len});
  reference::paged_decode(multi.params());
  for (int j = 0; j < q_len; ++j) {
    Problem one({2, 2, 64, 1, DType::bf16, {n - q_len + j + 1}, false, 36});
    one.k_cache = multi.k_cache;
    one.v_cache = multi.v_cache;
    one.num_pages = multi.num_pages;
    one.indices.assign(multi.indices.begin(), multi.indices.begin() + (n - q_len + j + 1));
    one.indptr = {0, n - q_len + j + 1};
    const int64_t row = int64_t(multi.hq) * multi.dim;
    for (int64_t i = 0; i < row; ++i) one.q.set(i, multi.q.get(j * row + i));
    reference::paged_decode(one.params());
    for (int64_t i = 0; i < row; ++i) ASSERT_EQ(one.output.get(i), multi.output.get(j * row + i)) << "j " << j;
    for (int h = 0; h < multi.hq; ++h) EXPECT_EQ(one.lse[size_t(h)], multi.lse[size_t(j * multi.hq + h)]) << j;
  }
}

TEST(PagedDecodeReference, BadVariantFieldsNameTheField) {
  Problem pb({2, 1, 64, 16, DType::bf16, {20}, true, 37});
  auto field_of = [&](auto&& change) {
    kindex_paged_decode_params p = pb.params();
    change(p);
    return decode_error(pb, p).field();
  };
  EXPECT_EQ("k_scale", field_of([](auto& p) { p.k_scale = 0; }));
  EXPECT_EQ("v_scale", field_of([](auto& p) { p.v_scale = INFINITY; }));
  EXPECT_EQ("q_len_per_req", field_of([](auto& p) { p.q_len_per_req = 9; }));
  EXPECT_EQ("logits_soft_cap", field_of([](auto& p) { p.logits_soft_cap = -1; }));
  EXPECT_EQ("kv_layout", field_of([](auto& p) { p.kv_layout = kindex_kv_layout(2); }));
  EXPECT_EQ("pos_encoding", field_of([](auto& p) { p.pos_encoding = kindex_pos_encoding(2); }));
  EXPECT_EQ("rope_scale", field_of([](auto& p) { p.rope_scale = 0; }));
  EXPECT_EQ("rope_scale", field_of([](auto& p) { p.rope_scale = INFINITY; }));
  EXPECT_EQ("rope_theta", field_of([](auto& p) { p.rope_theta = NAN; }));
  EXPECT_EQ("rope_theta", field_of([](auto& p) { p.rope_theta = -1e4f; }));
  const float bad_sinks[] = {0.0f, NAN};
  EXPECT_EQ("sinks[1]", field_of([&](auto& p) { p.sinks = bad_sinks; }));
}

TEST(PagedDecodeReference, Fp8ValuesDecodeExactly) {
  EXPECT_EQ(fp8_e4m3_to_float(0x38), 1.0f);
  EXPECT_EQ(fp8_e4m3_to_float(0xb8), -1.0f);
  EXPECT_EQ(fp8_e4m3_to_float(0x7e), 448.0f);
  EXPECT_EQ(fp8_e4m3_to_float(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(fp8_e4m3_to_float(0x07), 7 * std::ldexp(1.0f, -9));  // the largest subnormal
  EXPECT_EQ(fp8_e4m3_to_float(0x08), std::ldexp(1.0f, -6));      // the smallest normal
  EXPECT_EQ(fp8_e4m3_to_float(0x0f), 1.875f * std::ldexp(1.0f, -6));
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_float(0x7f)));
  EXPECT_EQ(fp8_e5m2_to_float(0x3c), 1.0f);
  EXPECT_EQ(fp8_e5m2_to_float(0x7b), 57344.0f);
  EXPECT_EQ(fp8_e5m2_to_float(0x01), std::ldexp(1.0f, -16));
  EXPECT_TRUE(std::isinf(fp8_e5m2_to_float(0x7c)));
}

// An fp8 cache decodes as the bf16 / fp16 cache of its values (every fp8 value is one exactly), scales and all.
TEST(PagedDecodeReference, Fp8CacheEqualsTheCacheOfItsValues) {
  for (kindex_kv_format format : {KINDEX_KV_FORMAT_FP8_E4M3, KINDEX_KV_FORMAT_FP8_E5M2}) {
    for (DType dtype : {DType::bf16, DType::f16}) {
      Problem wide({4, 2, 64, 16, dtype, {50, 0, 17}, true, 38});
      const int64_t n = wide.k_cache.numel();
      std::vector<uint8_t> k8(static_cast<size_t>(n)), v8(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        // Magnitudes 2^-3 .. 2^2 (exponent fields 4..9 of e4m3, 12..17 of e5m2), any sign and mantissa.
        const auto draw = [&](uint64_t stream) {
          const uint64_t h = mix64(mix64(stream) + uint64_t(i));
          const int e = int(h % 6), m = int((h >> 8) & 7), sign = int((h >> 16) & 1) << 7;
          return uint8_t(format == KINDEX_KV_FORMAT_FP8_E4M3 ? sign | (4 + e) << 3 | m : sign | (12 + e) << 2 | (m & 3));
        };
        k8[size_t(i)] = draw(1);
        v8[size_t(i)] = draw(2);
        const auto value = [&](uint8_t x) {
          return format == KINDEX_KV_FORMAT_FP8_E4M3 ? fp8_e4m3_to_float(x) : fp8_e5m2_to_float(x);
        };
        wide.k_cache.set(i, value(k8[size_t(i)]));
        wide.v_cache.set(i, value(v8[size_t(i)]));
        ASSERT_EQ(wide.k_cache.get(i), value(k8[size_t(i)])) << "not exact in the dtype";
      }
      Problem narrow = wide;  // shares q (Tensor copies share data); its own output
      narrow.output = Tensor(wide.output.dtype(), wide.output.shape());
      Mods m;
      m.k_scale = 0.7f;
      m.v_scale = 1.3f;
      m.window_left = 20;
      m.rope = dtype == DType::bf16;
      reference::paged_decode(wide.params(m));
      kindex_paged_decode_params p = narrow.params(m);
      p.kv_format = format;
      p.k_cache = k8.data();
      p.v_cache = v8.data();
      reference::paged_decode(p);
      for (int64_t i = 0; i < wide.output.numel(); ++i)
        ASSERT_EQ(wide.output.get(i), narrow.output.get(i)) << int(format) << " " << i;
      EXPECT_EQ(wide.lse, narrow.lse);
    }
  }
}

// ---- RoPE (pos_encoding ROPE_LLAMA): FlashInfer's Llama rotary embedding on q (at its position) and every k. ----

// head_dim 2 by hand: q = (1, 0) at position kv_len - 1 = 1, k0 = (1, 0) at 0, k1 = (0, 1) at 1, sm_scale 1. Turned by
// a = position / rope_scale: q' = (cos a, sin a), k0' = k0, k1' = (-sin a, cos a), so the logits are cos a and 0,
// lse = log2(e^cos a + 1), and with v0 = (1, 0), v1 = (0, 1) the output is the two weights. (q at position 0 would
// give logits 1 and -sin a.) rope_theta does not enter at head_dim 2 (pair 0's frequency is 1 / rope_scale).
TEST(PagedDecodeReference, RopeTwoTokensByHand) {
  for (float scale : {1.0f, 2.0f, 0.25f}) {
    Problem pb({1, 1, 2, 1, DType::bf16, {2}, false, 40});
    pb.indices = {0, 1};
    const double rows[2][2] = {{1, 0}, {0, 1}};
    for (int t = 0; t < 2; ++t)
      for (int d = 0; d < 2; ++d) {
        pb.k_cache.set(t * 2 + d, rows[t][d]);
        pb.v_cache.set(t * 2 + d, rows[t][d]);
      }
    pb.q.set(0, 1.0);
    pb.q.set(1, 0.0);
    Mods m;
    m.rope = true;
    m.rope_scale = scale;
    for (float theta : {1e4f, 5e5f}) {
      m.rope_theta = theta;
      kindex_paged_decode_params p = pb.params(m);
      p.sm_scale = 1;
      reference::paged_decode(p);
      const double a = 1.0 / scale, e = std::exp(std::cos(a));
      const double want[2] = {e / (e + 1), 1 / (e + 1)};
      for (int d = 0; d < 2; ++d)
        EXPECT_LE(std::fabs(pb.output.get(d) - want[d]), 0.5 * ulp(DType::bf16, want[d]) * (1 + 1e-9))
            << "scale " << scale << " theta " << theta << " d " << d << ": " << pb.output.get(d) << " vs " << want[d];
      EXPECT_NEAR(pb.lse[0], std::log2(e + 1), 1e-6) << "scale " << scale;
    }
  }
}

// The naive long-double check at positions up to 70k (the angles, not their fp64 rounding, decide the result).
TEST(PagedDecodeReference, RopeAtLongPositionsMatchesNaive) {
  for (DType dtype : {DType::bf16, DType::f16}) {
    Problem pb({2, 1, 64, 64, dtype, {70000, 3}, true, 41});
    Mods m;
    m.rope = true;
    m.rope_theta = 5e5f;
    m.window_left = 200;  // the naive check's cost: 2 rows x 201 keys
    check_against_naive(pb, m);
  }
}

// RoPE depends only on the distance between query and key: a window of w keys is the sequence cut to its last w + 1
// tokens (every position moved by the same amount; equal up to the fp64 angles' rounding).
TEST(PagedDecodeReference, RopeWindowEqualsTheTruncatedSequence) {
  for (int w : {0, 5, 29}) {
    Mods m;
    m.rope = true;
    const auto [full, cut] = window_and_cut(w, 42, m);
    for (int64_t i = 0; i < full.output.numel(); ++i)
      ASSERT_LE(std::fabs(full.output.get(i) - cut.output.get(i)), ulp(DType::bf16, full.output.get(i)))
          << "w " << w << " " << i;
    for (size_t i = 0; i < full.lse.size(); ++i) EXPECT_NEAR(full.lse[i], cut.lse[i], 1e-5) << "w " << w;
  }
}

// Token j of q_len tokens over n keys, rotated at n - q_len + j, is the one-token decode over the first
// n - q_len + j + 1 keys (its query at kv_len - 1 there): the same numbers exactly. With a window too.
TEST(PagedDecodeReference, RopeSeveralTokensPerRequestSitAtTheirPositions) {
  const int q_len = 3, n = 40;
  for (int window : {-1, 6}) {
    Mods m;
    m.rope = true;
    m.rope_scale = 2;
    m.window_left = window;
    Problem multi({2, 2, 64, 16, DType::f16, {n}, true, 43, q_len});
    reference::paged_decode(multi.params(m));
    for (int j = 0; j < q_len; ++j) {
      const int len = n - q_len + j + 1;
      Problem one({2, 2, 64, 16, DType::f16, {len}, true, 43});
      one.k_cache = multi.k_cache;
      one.v_cache = multi.v_cache;
      one.num_pages = multi.num_pages;
      one.indices.assign(multi.indices.begin(), multi.indices.begin() + (len + 15) / 16);
      one.indptr = {0, int32_t(one.indices.size())};
      one.last_len = {len - (int(one.indices.size()) - 1) * 16};
      const int64_t row = int64_t(multi.hq) * multi.dim;
      for (int64_t i = 0; i < row; ++i) one.q.set(i, multi.q.get(j * row + i));
      reference::paged_decode(one.params(m));
      for (int64_t i = 0; i < row; ++i)
        ASSERT_EQ(one.output.get(i), multi.output.get(j * row + i)) << "window " << window << " j " << j;
      for (int h = 0; h < multi.hq; ++h)
        EXPECT_EQ(one.lse[size_t(h)], multi.lse[size_t(j * multi.hq + h)]) << "window " << window << " j " << j;
    }
  }
}

// rope_scale divides every position (a huge one leaves q and k as they are: the result without RoPE); rope_theta
// sets the frequencies of pairs 1.. (not pair 0's); each changes the result, and RoPE does.
TEST(PagedDecodeReference, RopeScaleAndThetaChangeTheResult) {
  Problem pb({3, 2, 64, 16, DType::bf16, {90, 33}, true, 44});
  auto run = [&](const Mods& m) {
    reference::paged_decode(pb.params(m));
    std::vector<double> out(static_cast<size_t>(pb.output.numel()));
    for (int64_t i = 0; i < pb.output.numel(); ++i) out[size_t(i)] = pb.output.get(i);
    return std::make_pair(out, pb.lse);
  };
  auto differing = [](const std::vector<double>& a, const std::vector<double>& b) {
    size_t n = 0;
    for (size_t i = 0; i < a.size(); ++i) n += a[i] != b[i];
    return n;
  };
  Mods m;
  const auto none = run(m);
  m.rope = true;
  const auto base = run(m);
  m.rope_scale = 4;
  const auto scaled = run(m);
  m.rope_scale = 1;
  m.rope_theta = 5e5f;
  const auto theta = run(m);
  m.rope_theta = 1e4f;
  m.rope_scale = 1e30f;
  const auto still = run(m);
  const size_t n = none.first.size();
  EXPECT_GT(differing(none.first, base.first), n / 2);
  EXPECT_GT(differing(base.first, scaled.first), n / 2);
  EXPECT_GT(differing(base.first, theta.first), n / 2);
  for (size_t i = 0; i < n; ++i)
    ASSERT_LE(std::fabs(still.first[i] - none.first[i]), ulp(DType::bf16, none.first[i])) << i;
  for (size_t i = 0; i < none.second.size(); ++i) EXPECT_NEAR(still.second[i], none.second[i], 1e-6) << i;
}

// HND holds the same tokens as NHD: with RoPE too (the positions are the sequence's, not the layout's).
TEST(PagedDecodeReference, RopeHndEqualsNhd) {
  Mods m;
  m.rope = true;
  expect_hnd_equals_nhd({2, 3, 128, 16, DType::bf16, {40, 1, 16}, true, 45}, m);
}

// Llama's frequencies need pairs: an odd head_dim is refused with RoPE, by name.
TEST(PagedDecodeReference, RopeNeedsAnEvenHeadDim) {
  Problem pb({1, 1, 3, 1, DType::bf16, {4}, false, 46});
  Mods m;
  m.rope = true;
  const Error e = decode_error(pb, pb.params(m));
  EXPECT_EQ(e.field(), "head_dim");
  EXPECT_EQ(e.value(), "3");
  m.rope = false;
  EXPECT_NO_THROW(reference::paged_decode(pb.params(m)));
}
