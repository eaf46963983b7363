// CPU reference of FlashInfer-Bench gqa_paged_decode_*: for every (query token, query head), softmax(sm_scale * q.K)
// over the keys the token sees, times V; lse is the base-2 log-sum-exp of the same logits. The version-2 variants
// (kindex.h) straight from their definitions: k = k_scale * k_cache, v = v_scale * v_cache, the soft-cap
// cap * tanh(s / cap), the causal limit and window of each of a request's q_len_per_req tokens, a sink as one more
// logit with no value row, the HND layout, fp8 caches (e4m3fn, e5m2; values widened exactly) and Llama RoPE (q and
// every k rotated at their positions, angles in fp64 from the exact frequencies). Everything is computed in fp64 and
// the output rounded once to its dtype, so the result is the correctly rounded exact answer (up to fp64 summation
// order and the sines' rounding), a stricter target than the upstream fp32 PyTorch reference.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/half.hpp"
#include "core/parallel.hpp"
#include "reference/reference.hpp"

namespace kindex::reference {
namespace {

constexpr const char* kWhere = "paged_decode";

[[noreturn]] void fail(const std::string& field, const std::string& value, const std::string& problem) {
  throw Error(kWhere, field, value, problem);
}

// A bad entry of kv_indptr, kv_indices or kv_last_page_len (the C ABI's KINDEX_STATUS_INVALID_INPUT).
[[noreturn]] void fail_entry(const std::string& field, const std::string& value, const std::string& problem) {
  throw InvalidEntry(kWhere, field, value, problem);
}

template <class T>
std::string str(T v) {
  return std::to_string(v);
}

// Checks every scalar and index array before anything is read, so a bad page table is an Error, never a stray read.
void validate(const kindex_paged_decode_params& p) {
  if (p.dtype != KINDEX_DTYPE_BF16 && p.dtype != KINDEX_DTYPE_FP16)
    fail("dtype", str(int(p.dtype)), "must be BF16 or FP16");
  if (p.batch_size < 0) fail("batch_size", str(p.batch_size), "must be >= 0");
  if (p.num_qo_heads <= 0) fail("num_qo_heads", str(p.num_qo_heads), "must be > 0");
  if (p.num_kv_heads <= 0) fail("num_kv_heads", str(p.num_kv_heads), "must be > 0");
  if (p.num_qo_heads % p.num_kv_heads != 0)
    fail("num_qo_heads", str(p.num_qo_heads), "must be a multiple of num_kv_heads = " + str(p.num_kv_heads));
  if (p.head_dim <= 0) fail("head_dim", str(p.head_dim), "must be > 0");
  if (p.page_size <= 0) fail("page_size", str(p.page_size), "must be > 0");
  if (p.num_pages < 0) fail("num_pages", str(p.num_pages), "must be >= 0");
  if (p.num_kv_indices < 0) fail("num_kv_indices", str(p.num_kv_indices), "must be >= 0");
  if (!p.kv_indptr) fail("kv_indptr", "NULL", "is required");
  if (p.num_kv_indices > 0 && !p.kv_indices) fail("kv_indices", "NULL", "is required when num_kv_indices > 0");
  if (p.batch_size > 0) {
    if (!p.q) fail("q", "NULL", "is required");
    if (!p.output) fail("output", "NULL", "is required");
  }
  if (p.num_kv_indices > 0 && (!p.k_cache || !p.v_cache))
    fail(p.k_cache ? "v_cache" : "k_cache", "NULL", "is required when num_kv_indices > 0");
  if (p.kv_format < KINDEX_KV_FORMAT_SAME_AS_Q || p.kv_format > KINDEX_KV_FORMAT_FP8_E5M2)
    fail("kv_format", str(int(p.kv_format)), "must be SAME_AS_Q, FP8_E4M3 or FP8_E5M2");
  if (p.kv_layout != KINDEX_KV_LAYOUT_NHD && p.kv_layout != KINDEX_KV_LAYOUT_HND)
    fail("kv_layout", str(int(p.kv_layout)), "must be NHD or HND");
  if (!(std::isfinite(p.k_scale) && p.k_scale > 0)) fail("k_scale", str(p.k_scale), "must be finite and > 0");
  if (!(std::isfinite(p.v_scale) && p.v_scale > 0)) fail("v_scale", str(p.v_scale), "must be finite and > 0");
  if (p.q_len_per_req < 1 || p.q_len_per_req > 8) fail("q_len_per_req", str(p.q_len_per_req), "must be in [1, 8]");
  if (!(std::isfinite(p.logits_soft_cap) && p.logits_soft_cap >= 0))
    fail("logits_soft_cap", str(p.logits_soft_cap), "must be finite and >= 0");
  if (p.pos_encoding != KINDEX_POS_ENCODING_NONE && p.pos_encoding != KINDEX_POS_ENCODING_ROPE_LLAMA)
    fail("pos_encoding", str(int(p.pos_encoding)), "must be NONE or ROPE_LLAMA");
  if (!(std::isfinite(p.rope_scale) && p.rope_scale > 0)) fail("rope_scale", str(p.rope_scale), "must be finite and > 0");
  if (!(std::isfinite(p.rope_theta) && p.rope_theta > 0)) fail("rope_theta", str(p.rope_theta), "must be finite and > 0");
  if (p.pos_encoding == KINDEX_POS_ENCODING_ROPE_LLAMA && p.head_dim % 2 != 0)
    fail("head_dim", str(p.head_dim), "must be even with pos_encoding ROPE_LLAMA");
  if (p.sinks)
    for (int32_t h = 0; h < p.num_qo_heads; ++h)
      if (!std::isfinite(p.sinks[h])) fail("sinks[" + str(h) + "]", str(p.sinks[h]), "must be finite");

  if (p.kv_indptr[0] != 0) fail_entry("kv_indptr[0]", str(p.kv_indptr[0]), "must be 0");
  for (int32_t b = 0; b < p.batch_size; ++b) {
    if (p.kv_indptr[b + 1] < p.kv_indptr[b])
      fail_entry("kv_indptr[" + str(b + 1) + "]", str(p.kv_indptr[b + 1]),
                 "decreases (kv_indptr[" + str(b) + "] = " + str(p.kv_indptr[b]) + ")");
  }
  if (p.kv_indptr[p.batch_size] != p.num_kv_indices)
    fail_entry("kv_indptr[" + str(p.batch_size) + "]", str(p.kv_indptr[p.batch_size]),
               "must equal num_kv_indices = " + str(p.num_kv_indices));
  for (int64_t i = 0; i < p.num_kv_indices; ++i) {
    int32_t page = p.kv_indices[i];
    if (page < 0 || page >= p.num_pages)
      fail_entry("kv_indices[" + str(i) + "]", str(page), "page id out of range [0, " + str(p.num_pages) + ")");
  }
  // An empty sequence has no last page, so its kv_last_page_len is not looked at (FlashInfer sets it to 0 there).
  if (p.kv_last_page_len) {
    for (int32_t b = 0; b < p.batch_size; ++b) {
      int32_t len = p.kv_last_page_len[b];
      if (p.kv_indptr[b + 1] > p.kv_indptr[b] && (len < 1 || len > p.page_size))
        fail_entry("kv_last_page_len[" + str(b) + "]", str(len),
                   "must be in [1, page_size = " + str(p.page_size) + "]");
    }
  }
}

template <kindex_dtype kDtype>
double load(const uint16_t* data, int64_t i) {
  return kDtype == KINDEX_DTYPE_BF16 ? bf16_to_float(data[i]) : f16_to_float(data[i]);
}

// Rounds a double to the nearest bf16/fp16 value, ties to even. Going through float first can round twice (a
// float that lands exactly on a half-way point); the neighbour check below undoes that.
uint16_t round_to(kindex_dtype dtype, double x) {
  auto from = [&](float f) { return dtype == KINDEX_DTYPE_BF16 ? float_to_bf16(f) : float_to_f16(f); };
  auto to = [&](uint16_t h) { return double(dtype == KINDEX_DTYPE_BF16 ? bf16_to_float(h) : f16_to_float(h)); };
  uint16_t h = from(float(x));
  double v = to(h);
  if (v == x || !std::isfinite(v) || !std::isfinite(x)) return h;
  // Sign-magnitude encoding: the neighbour on x's side is one step up or down in magnitude.
  uint16_t other;
  if (v == 0.0)
    other = uint16_t((std::signbit(x) ? 0x8000u : 0u) | 1u);
  else
    other = std::fabs(x) > std::fabs(v) ? uint16_t(h + 1) : uint16_t(h - 1);
  double w = to(other);
  if (!std::isfinite(w)) return h;
  double dv = std::fabs(x - v), dw = std::fabs(x - w);
  if (dw < dv || (dw == dv && (other & 1u) == 0)) return other;
  return h;
}

// fp64 dot product with four independent sums: the compiler can pipeline and vectorise it, and at fp64 the
// summation order is far below the output's rounding.
double dot(const double* __restrict__ a, const double* __restrict__ b, int64_t n) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t d = 0;
  for (; d + 4 <= n; d += 4) {
    s0 += a[d] * b[d];
    s1 += a[d + 1] * b[d + 1];
    s2 += a[d + 2] * b[d + 2];
    s3 += a[d + 3] * b[d + 3];
  }
  for (; d < n; ++d) s0 += a[d] * b[d];
  return (s0 + s1) + (s2 + s3);
}

void axpy(double* __restrict__ y, double w, const double* __restrict__ x, int64_t n) {
  for (int64_t d = 0; d < n; ++d) y[d] += w * x[d];
}

// Llama RoPE (kindex.h pos_encoding ROPE_LLAMA, FlashInfer's rotate-half): pair (i, i + n/2) of x turned by
// pos * freq[i], freq[i] = 1 / (rope_scale * rope_theta^(2i / n)).
void rope(double* __restrict__ x, const double* __restrict__ freq, int64_t pos, int64_t n) {
  const int64_t half = n / 2;
  for (int64_t i = 0; i < half; ++i) {
    const double angle = double(pos) * freq[i], c = std::cos(angle), s = std::sin(angle);
    const double a = x[i], b = x[i + half];
    x[i] = a * c - b * s;
    x[i + half] = b * c + a * s;
  }
}

template <kindex_dtype kDtype>
void widen_row(const uint16_t* __restrict__ src, double* __restrict__ dst, int64_t n) {
  for (int64_t d = 0; d < n; ++d) dst[d] = load<kDtype>(src, d);
}

// Row `row` (n elements from element offset `offset`) of a K or V cache in the params' kv_format, widened exactly.
template <kindex_dtype kDtype>
void widen_kv_row(const kindex_paged_decode_params& p, const void* cache, int64_t offset, double* dst, int64_t n) {
  const auto* bytes = static_cast<const uint8_t*>(cache) + offset;
  switch (p.kv_format) {
    case KINDEX_KV_FORMAT_FP8_E4M3:
      for (int64_t d = 0; d < n; ++d) dst[d] = fp8_e4m3_to_float(bytes[d]);
      break;
    case KINDEX_KV_FORMAT_FP8_E5M2:
      for (int64_t d = 0; d < n; ++d) dst[d] = fp8_e5m2_to_float(bytes[d]);
      break;
    default:
      widen_row<kDtype>(static_cast<const uint16_t*>(cache) + offset, dst, n);
  }
}

template <kindex_dtype kDtype>
void run(const kindex_paged_decode_params& p) {
  const int64_t batch = p.batch_size, hq = p.num_qo_heads, hkv = p.num_kv_heads, dim = p.head_dim;
  const int64_t group = hq / hkv, page_size = p.page_size, q_len = p.q_len_per_req;
  const auto* q = static_cast<const uint16_t*>(p.q);
  auto* out = static_cast<uint16_t*>(p.output);
  const double sm_scale = double(p.sm_scale) * double(p.k_scale), cap = p.logits_soft_cap, v_scale = p.v_scale;
  const double inv_ln2 = 1.0 / std::log(2.0), neg_inf = -std::numeric_limits<double>::infinity();
  const bool hnd = p.kv_layout == KINDEX_KV_LAYOUT_HND;
  const bool rotary = p.pos_encoding == KINDEX_POS_ENCODING_ROPE_LLAMA;
  std::vector<double> freq(size_t(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i)
    freq[size_t(i)] = 1.0 / (double(p.rope_scale) * std::pow(double(p.rope_theta), double(2 * i) / double(dim)));

  // One task per (sequence, KV head): it reads that head's K/V rows once for all of the request's query rows
  // (q_len tokens x group heads).
  parallel_for(batch * hkv, [&](int64_t begin, int64_t end) {
    const int64_t rows = q_len * group;
    std::vector<double> q_rows(rows * dim), row(dim), acc(rows * dim), max_score(rows), sum_exp(rows), scores;
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / hkv, kv_head = task % hkv, head0 = kv_head * group;
      const int64_t first = p.kv_indptr[b], pages = p.kv_indptr[b + 1] - first;
      const int64_t last_len = pages == 0 ? 0 : (p.kv_last_page_len ? p.kv_last_page_len[b] : page_size);
      const int64_t tokens = pages == 0 ? 0 : (pages - 1) * page_size + last_len;
      // Query row r = (token j, head head0 + g), j = r / group: q / output row (b * q_len + j) * hq + head0 + g.
      auto q_row = [&](int64_t r) { return (b * q_len + r / group) * hq + head0 + r % group; };
      // Token j sits at position tokens - q_len + j (RoPE rotates its rows there).
      for (int64_t r = 0; r < rows; ++r) {
        widen_row<kDtype>(q + q_row(r) * dim, &q_rows[r * dim], dim);
        if (rotary) rope(&q_rows[r * dim], freq.data(), tokens - q_len + r / group, dim);
      }
      auto kv_row = [&](int64_t t) {  // element offset of token t's row for this KV head
        const int64_t page = p.kv_indices[first + t / page_size], slot = t % page_size;
        return (hnd ? (page * hkv + kv_head) * page_size + slot : (page * page_size + slot) * hkv + kv_head) * dim;
      };
      // Token j sits at position tokens - q_len + j and sees keys max(0, position - window_left) .. position.
      auto sees = [&](int64_t r, int64_t t) {
        const int64_t pos = tokens - q_len + r / group;
        return t <= pos && (p.window_left < 0 || t >= pos - p.window_left);
      };

      scores.assign(size_t(tokens * rows), neg_inf);
      for (int64_t t = 0; t < tokens; ++t) {
        widen_kv_row<kDtype>(p, p.k_cache, kv_row(t), row.data(), dim);
        if (rotary) rope(row.data(), freq.data(), t, dim);  // key t at position t
        for (int64_t r = 0; r < rows; ++r) {
          if (!sees(r, t)) continue;
          const double s = sm_scale * dot(&q_rows[r * dim], row.data(), dim);
          scores[t * rows + r] = cap > 0 ? cap * std::tanh(s / cap) : s;
        }
      }
      // The sink is one more logit in the denominator (with no value row), so also in the max.
      auto sink = [&](int64_t r) { return p.sinks ? double(p.sinks[head0 + r % group]) : neg_inf; };
      for (int64_t r = 0; r < rows; ++r) {
        double m = sink(r);
        for (int64_t t = 0; t < tokens; ++t) m = std::max(m, scores[t * rows + r]);
        max_score[r] = m;
        sum_exp[r] = m == neg_inf ? 0.0 : std::exp(sink(r) - m);
      }
      for (int64_t t = 0; t < tokens; ++t)
        for (int64_t r = 0; r < rows; ++r) {
          const double x = scores[t * rows + r];
          const double e = x == neg_inf ? 0.0 : std::exp(x - max_score[r]);
          scores[t * rows + r] = e;
          sum_exp[r] += e;
        }

      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t t = 0; t < tokens; ++t) {
        widen_kv_row<kDtype>(p, p.v_cache, kv_row(t), row.data(), dim);
        for (int64_t r = 0; r < rows; ++r)
          if (scores[t * rows + r] != 0.0) axpy(&acc[r * dim], scores[t * rows + r], row.data(), dim);
      }
      // A row that sees no key (and has no sink) gives zeros and -inf.
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t o = q_row(r);
        const double scale = sum_exp[r] > 0 ? v_scale / sum_exp[r] : 0.0;
        for (int64_t d = 0; d < dim; ++d) out[o * dim + d] = round_to(kDtype, acc[r * dim + d] * scale);
        if (p.lse) p.lse[o] = sum_exp[r] > 0 ? float((max_score[r] + std::log(sum_exp[r])) * inv_ln2) : float(neg_inf);
      }
    }
  });
}

}  // namespace

void paged_decode(const kindex_paged_decode_params& p) {
  validate(p);
  if (p.dtype == KINDEX_DTYPE_BF16)
    run<KINDEX_DTYPE_BF16>(p);
  else
    run<KINDEX_DTYPE_FP16>(p);
}

}  // namespace kindex::reference
