// The L2/003 backward reference against a naive implementation written here from the upstream PyTorch code: plain
// loops, fp64 sums in index order, and a switch for the bf16 rounding points. The dims are fixed by the definition
// (hidden 5120, 32/8 heads, head_dim 128), so the check runs the whole layer at small B * S.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/half.hpp"
#include "core/parallel.hpp"
#include "core/random.hpp"
#include "core/tensor.hpp"
#include "reference/bf16_gemm.hpp"
#include "reference/reference.hpp"

using namespace kindex;

namespace {

constexpr int64_t kHidden = 5120, kHeads = 32, kKvHeads = 8, kDim = 128, kQProj = 4096, kKvProj = 1024;
using Vec = std::vector<double>;

Tensor normal(std::vector<int64_t> shape, uint64_t seed, const char* name, double scale = 1.0) {
  Tensor t(DType::bf16, std::move(shape));
  fill_normal(t, seed, stream_id(name), scale);
  return t;
}

Vec values(const Tensor& t) {
  Vec v(t.numel());
  const uint16_t* bits = t.ptr<uint16_t>();
  for (int64_t i = 0; i < t.numel(); ++i) v[i] = bf16_to_float(bits[i]);
  return v;
}

// The four weights (52M elements) are the slow part of input generation: made once for every test here.
struct Weights {
  Tensor q, k, v, o;
  Vec q_values, k_values, v_values, o_values;
  Weights()
      : q(normal({kQProj, kHidden}, 200, "q_weight", 1 / std::sqrt(double(kHidden)))),
        k(normal({kKvProj, kHidden}, 200, "k_weight", 1 / std::sqrt(double(kHidden)))),
        v(normal({kKvProj, kHidden}, 200, "v_weight", 1 / std::sqrt(double(kHidden)))),
        o(normal({kHidden, kQProj}, 200, "o_weight", 1 / std::sqrt(double(kQProj)))),
        q_values(values(q)),
        k_values(values(k)),
        v_values(values(v)),
        o_values(values(o)) {}
  static const Weights& get() {
    static const Weights w;
    return w;
  }
};

// SOL-style inputs: randn activations, cos/sin of clamped randn angles, softmax rows for attn_weights.
struct Inputs {
  int64_t batch, seq;
  const Weights& w = Weights::get();
  Tensor grad_output, hidden_states, cos, sin, query_states, key_states, value_states, attn_weights, attn_output;
  float scaling = float(1.0 / std::sqrt(128.0));

  Inputs(int64_t b, int64_t s, uint64_t seed)
      : batch(b),
        seq(s),
        grad_output(normal({b, s, kHidden}, seed, "grad_output")),
        hidden_states(normal({b, s, kHidden}, seed, "hidden_states")),
        cos(DType::bf16, {b, s, kDim}),
        sin(DType::bf16, {b, s, kDim}),
        query_states(normal({b, kHeads, s, kDim}, seed, "query_states")),
        key_states(normal({b, kHeads, s, kDim}, seed, "key_states")),
        value_states(normal({b, kHeads, s, kDim}, seed, "value_states")),
        attn_weights(DType::bf16, {b, kHeads, s, s}),
        attn_output(normal({b, s, kQProj}, seed, "attn_output")) {
    for (int64_t i = 0; i < cos.numel(); ++i) {
      const double angle =
          std::clamp(standard_normal(seed, stream_id("angle"), uint64_t(i)), -std::numbers::pi, std::numbers::pi);
      cos.set(i, std::cos(angle));
      sin.set(i, std::sin(angle));
    }
    for (int64_t row = 0; row < b * kHeads * s; ++row) {
      Vec e(s);
      double sum = 0;
      for (int64_t j = 0; j < s; ++j) sum += e[j] = std::exp(standard_normal(seed, 99, uint64_t(row * s + j)));
      for (int64_t j = 0; j < s; ++j) attn_weights.set(row * s + j, e[j] / sum);
    }
  }
};

struct Outputs {
  Tensor grad_hidden_states, grad_q_weight, grad_k_weight, grad_v_weight, grad_o_weight;
  Outputs(int64_t b, int64_t s)
      : grad_hidden_states(DType::bf16, {b, s, kHidden}),
        grad_q_weight(DType::bf16, {kQProj, kHidden}),
        grad_k_weight(DType::bf16, {kKvProj, kHidden}),
        grad_v_weight(DType::bf16, {kKvProj, kHidden}),
        grad_o_weight(DType::bf16, {kHidden, kQProj}) {}
  std::vector<std::pair<std::string, const Tensor*>> named() const {
    return {{"grad_hidden_states", &grad_hidden_states},
            {"grad_q_weight", &grad_q_weight},
            {"grad_k_weight", &grad_k_weight},
            {"grad_v_weight", &grad_v_weight},
            {"grad_o_weight", &grad_o_weight}};
  }
};

kindex_gqa_rope_backward_params params(const Inputs& in, Outputs& out) {
  kindex_gqa_rope_backward_params p = KINDEX_GQA_ROPE_BACKWARD_PARAMS_INIT;
  p.batch_size = int32_t(in.batch);
  p.seq_len = int32_t(in.seq);
  p.grad_output = in.grad_output.data();
  p.hidden_states = in.hidden_states.data();
  p.cos = in.cos.data();
  p.sin = in.sin.data();
  p.q_weight = in.w.q.data();
  p.k_weight = in.w.k.data();
  p.v_weight = in.w.v.data();
  p.o_weight = in.w.o.data();
  p.query_states = in.query_states.data();
  p.key_states = in.key_states.data();
  p.value_states = in.value_states.data();
  p.attn_weights = in.attn_weights.data();
  p.attn_output = in.attn_output.data();
  p.scaling = in.scaling;
  p.grad_hidden_states = out.grad_hidden_states.data();
  p.grad_q_weight = out.grad_q_weight.data();
  p.grad_k_weight = out.grad_k_weight.data();
  p.grad_v_weight = out.grad_v_weight.data();
  p.grad_o_weight = out.grad_o_weight.data();
  return p;
}

// X[rows, cols] -> X^T[cols, rows]
Vec transpose(const Vec& x, int64_t rows, int64_t cols) {
  Vec t(x.size());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) t[j * rows + i] = x[i * cols + j];
  return t;
}

// C[m, n] = A[m, k] @ B[k, n] in fp64, each C element summed over k = 0, 1, ... in order. (Rows go in blocks of
// 8 so each row of B is read once per block, not once per row; the sums are unchanged.)
Vec matmul(const Vec& a, const Vec& b, int64_t m, int64_t k, int64_t n) {
  Vec c(m * n, 0.0);
  parallel_for((m + 7) / 8, [&](int64_t begin, int64_t end) {
    for (int64_t block = begin; block < end; ++block)
      for (int64_t x = 0; x < k; ++x)
        for (int64_t i = block * 8; i < std::min(m, block * 8 + 8); ++i) {
          const double a_ix = a[i * k + x];
          double* c_row = &c[i * n];
          const double* b_row = &b[x * n];
          for (int64_t j = 0; j < n; ++j) c_row[j] += a_ix * b_row[j];
        }
  });
  return c;
}

// The upstream reference step by step. With `bf16_steps` every bf16 tensor it produces is rounded to bf16 (and the
// softmax backward is done in fp32); without, everything stays fp64 until the final outputs are rounded.
std::vector<Vec> naive_backward(const Inputs& in, bool bf16_steps) {
  auto r = [&](double x) { return bf16_steps ? double(round_bf16(float(x))) : x; };
  auto rounded = [&](Vec v) {
    for (double& x : v) x = r(x);
    return v;
  };
  auto final_round = [](Vec v) {
    for (double& x : v) x = double(round_bf16(float(x)));
    return v;
  };
  const int64_t b_n = in.batch, s_n = in.seq, n = b_n * s_n;
  const Vec grad_output = values(in.grad_output), hidden = values(in.hidden_states), cos = values(in.cos),
            sin = values(in.sin), attn_output = values(in.attn_output), query = values(in.query_states),
            key = values(in.key_states), value = values(in.value_states), attn = values(in.attn_weights);

  // 1. grad_attn_output = grad_output @ o_weight; grad_o_weight = grad_output^T @ attn_output.
  const Vec grad_attn_output = rounded(matmul(grad_output, in.w.o_values, n, kHidden, kQProj));
  const Vec grad_o_weight = final_round(matmul(transpose(grad_output, n, kHidden), attn_output, kHidden, n, kQProj));

  // 2-6, per (batch, head).
  const int64_t head_size = s_n * kDim;
  Vec grad_q_heads(b_n * kHeads * head_size), grad_k_heads(grad_q_heads.size()), grad_v_heads(grad_q_heads.size());
  for (int64_t b = 0; b < b_n; ++b)
    for (int64_t h = 0; h < kHeads; ++h) {
      const int64_t base = (b * kHeads + h) * head_size;
      const auto head = [&](const Vec& x) { return Vec(x.begin() + base, x.begin() + base + head_size); };
      const Vec q_h = head(query), k_h = head(key), v_h = head(value);
      const Vec a(attn.begin() + (b * kHeads + h) * s_n * s_n, attn.begin() + (b * kHeads + h + 1) * s_n * s_n);
      Vec g_out(head_size);
      for (int64_t s = 0; s < s_n; ++s)
        for (int64_t d = 0; d < kDim; ++d)
          g_out[s * kDim + d] = grad_attn_output[(b * s_n + s) * kQProj + h * kDim + d];

      const Vec grad_a = rounded(matmul(g_out, transpose(v_h, s_n, kDim), s_n, kDim, s_n));
      const Vec grad_v = rounded(matmul(transpose(a, s_n, s_n), g_out, s_n, s_n, kDim));
      Vec grad_scores(s_n * s_n);
      for (int64_t i = 0; i < s_n; ++i) {
        double sum = 0;
        for (int64_t j = 0; j < s_n; ++j) sum += grad_a[i * s_n + j] * a[i * s_n + j];
        for (int64_t j = 0; j < s_n; ++j) {
          const int64_t at = i * s_n + j;
          grad_scores[at] =
              bf16_steps ? double(round_bf16(round_bf16(float(a[at]) * (float(grad_a[at]) - float(sum))) * in.scaling))
                         : a[at] * (grad_a[at] - sum) * double(in.scaling);
        }
      }
      const Vec grad_q = rounded(matmul(grad_scores, k_h, s_n, s_n, kDim));
      const Vec grad_k = rounded(matmul(transpose(grad_scores, s_n, s_n), q_h, s_n, s_n, kDim));
      std::copy(grad_q.begin(), grad_q.end(), grad_q_heads.begin() + base);
      std::copy(grad_k.begin(), grad_k.end(), grad_k_heads.begin() + base);
      std::copy(grad_v.begin(), grad_v.end(), grad_v_heads.begin() + base);
    }

  // 7-9. GQA sums over the 4 heads of a group, RoPE backward, transposes to [tokens, heads * 128].
  auto rope = [&](const double* g, int64_t token, int64_t d) {
    const double* c = &cos[token * kDim];
    const double* s = &sin[token * kDim];
    const double rotated = d < 64 ? r(g[d + 64] * s[d + 64]) : -r(g[d - 64] * s[d - 64]);
    return r(r(g[d] * c[d]) + rotated);
  };
  Vec grad_q_proj(n * kQProj), grad_k_proj(n * kKvProj), grad_v_proj(n * kKvProj);
  for (int64_t b = 0; b < b_n; ++b)
    for (int64_t s = 0; s < s_n; ++s) {
      const int64_t token = b * s_n + s;
      for (int64_t h = 0; h < kHeads; ++h)
        for (int64_t d = 0; d < kDim; ++d)
          grad_q_proj[token * kQProj + h * kDim + d] =
              rope(&grad_q_heads[((b * kHeads + h) * s_n + s) * kDim], token, d);
      for (int64_t kv = 0; kv < kKvHeads; ++kv) {
        double k_sum[kDim];
        for (int64_t d = 0; d < kDim; ++d) {
          double ks = 0, vs = 0;
          for (int64_t g = 0; g < 4; ++g) {
            const int64_t at = ((b * kHeads + kv * 4 + g) * s_n + s) * kDim + d;
            ks += grad_k_heads[at];
            vs += grad_v_heads[at];
          }
          k_sum[d] = r(ks);
          grad_v_proj[token * kKvProj + kv * kDim + d] = r(vs);
        }
        for (int64_t d = 0; d < kDim; ++d) grad_k_proj[token * kKvProj + kv * kDim + d] = rope(k_sum, token, d);
      }
    }

  // 10. Projections, and grad_hidden_states = (q + k) + v.
  const Vec ghq = rounded(matmul(grad_q_proj, in.w.q_values, n, kQProj, kHidden));
  const Vec ghk = rounded(matmul(grad_k_proj, in.w.k_values, n, kKvProj, kHidden));
  const Vec ghv = rounded(matmul(grad_v_proj, in.w.v_values, n, kKvProj, kHidden));
  Vec grad_hidden(n * kHidden);
  for (int64_t i = 0; i < n * kHidden; ++i) grad_hidden[i] = r(r(ghq[i] + ghk[i]) + ghv[i]);
  return {final_round(grad_hidden), final_round(matmul(transpose(grad_q_proj, n, kQProj), hidden, kQProj, n, kHidden)),
          final_round(matmul(transpose(grad_k_proj, n, kKvProj), hidden, kKvProj, n, kHidden)),
          final_round(matmul(transpose(grad_v_proj, n, kKvProj), hidden, kKvProj, n, kHidden)), grad_o_weight};
}

struct Agreement {
  double equal = 0;     // fraction of bit-identical bf16 elements
  double adjacent = 0;  // fraction at most one bf16 step apart
};

Agreement agreement(const Tensor& got_tensor, const Vec& want) {
  const Vec got = values(got_tensor);
  int64_t equal = 0, adjacent = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    const double step = std::ldexp(1.0, std::ilogb(std::max({std::fabs(g), std::fabs(w), 1e-30})) - 7);
    equal += g == w;
    adjacent += std::fabs(g - w) <= step;
  }
  return {double(equal) / double(got.size()), double(adjacent) / double(got.size())};
}

// Turns the exact-accumulation hook on for one scope.
struct ExactAccumulation {
  ExactAccumulation() { reference::set_exact_accumulation_for_tests(true); }
  ~ExactAccumulation() { reference::set_exact_accumulation_for_tests(false); }
};

}  // namespace

TEST(GqaRopeBackwardReference, RoundingPointsMatchTheUpstreamReference) {
  bool first_case = true;
  for (auto [batch, seq] : {std::pair<int64_t, int64_t>{1, 16}, {2, 20}, {1, 64}}) {
    SCOPED_TRACE("batch " + std::to_string(batch) + " seq_len " + std::to_string(seq));
    const Inputs in(batch, seq, 300 + uint64_t(batch * seq));
    const std::vector<Vec> with_rounding = naive_backward(in, true);
    // The version without intermediate roundings costs as much again: the first case shows the point.
    const std::vector<Vec> without_rounding = first_case ? naive_backward(in, false) : std::vector<Vec>{};
    first_case = false;

    Outputs exact(batch, seq), product(batch, seq);
    {
      ExactAccumulation on;
      reference::gqa_rope_backward(params(in, exact));
    }
    reference::gqa_rope_backward(params(in, product));

    const auto exact_named = exact.named(), product_named = product.named();
    for (size_t i = 0; i < with_rounding.size(); ++i) {
      const std::string& name = exact_named[i].first;
      SCOPED_TRACE(name);
      // With fp64 sums in index order the reference and the naive version are the same arithmetic: every element
      // identical proves the rounding points (and everything else) agree.
      const Agreement pinned = agreement(*exact_named[i].second, with_rounding[i]);
      EXPECT_EQ(pinned.equal, 1.0);
      // OpenBLAS sums in another fp32 order: now and then a result lands across a bf16 rounding boundary and that
      // one-step difference propagates downstream a little.
      const Agreement fp32 = agreement(*product_named[i].second, with_rounding[i]);
      EXPECT_GE(fp32.equal, 0.95);
      EXPECT_GE(fp32.adjacent, 0.98);
      // Without the intermediate roundings the answer is visibly different (except for grad_o_weight, a single
      // matmul of inputs): the rounding points matter.
      if (without_rounding.empty()) continue;
      const Agreement unrounded = agreement(*exact_named[i].second, without_rounding[i]);
      if (name == "grad_o_weight") {
        EXPECT_EQ(unrounded.equal, 1.0);
      } else {
        EXPECT_LT(unrounded.equal, 0.6);
        EXPECT_LT(unrounded.adjacent, 0.9);
      }
    }
  }
}

namespace {

// The error the reference throws for `p` (a test failure when it throws none).
Error error_for(const kindex_gqa_rope_backward_params& p) {
  try {
    reference::gqa_rope_backward(p);
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error";
  return Error("", "", "", "");
}

}  // namespace

TEST(GqaRopeBackwardReference, NullPointersAndNegativeSizesAreErrors) {
  const Inputs in(1, 2, 1);
  Outputs out(1, 2);
  auto p = params(in, out);
  p.attn_weights = nullptr;
  const Error null_pointer = error_for(p);
  EXPECT_EQ(null_pointer.where(), "gqa_rope_backward");
  EXPECT_EQ(null_pointer.field(), "attn_weights");
  p = params(in, out);
  p.seq_len = -1;
  const Error negative = error_for(p);
  EXPECT_EQ(negative.field(), "seq_len");
  EXPECT_EQ(negative.value(), "-1");
}
