// CPU reference of SOL-ExecBench L2/003 (GQA attention-layer backward with RoPE). It follows the upstream PyTorch
// reference operation by operation and rounds to bf16 wherever a bf16 tensor is produced there:
//   every torch.matmul on bf16 tensors -> fp32 accumulation, one rounding to bf16;
//   softmax backward -> fp32 from the bf16 inputs (row sum in fp32), one rounding to bf16; "* scaling" rounds again;
//   GQA ".sum(dim=2)" over the 4 heads of a group -> fp32 accumulation, one rounding;
//   RoPE backward -> g*cos, g*sin and their sum each rounded (elementwise bf16 ops compute in fp32 and round);
//   grad_hidden_states = (q + k) rounded, then + v rounded.
// The fp32 summation order of the matmuls (OpenBLAS) differs from cuBLAS's, so results agree with the GPU reference
// to within a bf16 rounding step on a few elements, not bit for bit.
#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.hpp"
#include "core/half.hpp"
#include "core/parallel.hpp"
#include "reference/bf16_gemm.hpp"
#include "reference/reference.hpp"

namespace kindex::reference {
namespace {

constexpr const char* kWhere = "gqa_rope_backward";
constexpr int64_t kHidden = 5120, kHeads = 32, kKvHeads = 8, kDim = 128, kGroup = kHeads / kKvHeads;
constexpr int64_t kQProj = kHeads * kDim, kKvProj = kKvHeads * kDim;

void validate(const kindex_gqa_rope_backward_params& p) {
  if (p.batch_size < 0) throw Error(kWhere, "batch_size", std::to_string(p.batch_size), "must be >= 0");
  if (p.seq_len < 0) throw Error(kWhere, "seq_len", std::to_string(p.seq_len), "must be >= 0");
  // Tensors with a token dimension are empty (and may be NULL) when batch_size * seq_len == 0.
  const bool tokens = int64_t(p.batch_size) * p.seq_len > 0;
  const std::tuple<const char*, const void*, bool> pointers[] = {{"grad_output", p.grad_output, tokens},
                                                                 {"hidden_states", p.hidden_states, tokens},
                                                                 {"cos", p.cos, tokens},
                                                                 {"sin", p.sin, tokens},
                                                                 {"q_weight", p.q_weight, true},
                                                                 {"k_weight", p.k_weight, true},
                                                                 {"v_weight", p.v_weight, true},
                                                                 {"o_weight", p.o_weight, true},
                                                                 {"query_states", p.query_states, tokens},
                                                                 {"key_states", p.key_states, tokens},
                                                                 {"value_states", p.value_states, tokens},
                                                                 {"attn_weights", p.attn_weights, tokens},
                                                                 {"attn_output", p.attn_output, tokens},
                                                                 {"grad_hidden_states", p.grad_hidden_states, tokens},
                                                                 {"grad_q_weight", p.grad_q_weight, true},
                                                                 {"grad_k_weight", p.grad_k_weight, true},
                                                                 {"grad_v_weight", p.grad_v_weight, true},
                                                                 {"grad_o_weight", p.grad_o_weight, true}};
  for (auto [name, ptr, needed] : pointers)
    if (needed && !ptr) throw Error(kWhere, name, "NULL", "is required");
}

std::vector<float> widened(const void* src, int64_t n) {
  std::vector<float> v(n);
  widen_bf16(src, v.data(), n);
  return v;
}

void store_bf16(const float* src, void* dst, int64_t n) {
  auto* d = static_cast<uint16_t*>(dst);
  parallel_for(
      n,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) d[i] = float_to_bf16(src[i]);
      },
      1 << 16);
}

// grad_pre_rope = g*cos + rotate_half_inverse(g*sin), rotate_half_inverse(x) = cat(x[64:], -x[:64]), each op in bf16.
void rope_backward(const float* g, const uint16_t* cos, const uint16_t* sin, float* out) {
  float g_sin[kDim];
  for (int64_t d = 0; d < kDim; ++d) g_sin[d] = round_bf16(g[d] * bf16_to_float(sin[d]));
  for (int64_t d = 0; d < kDim; ++d) {
    float g_cos = round_bf16(g[d] * bf16_to_float(cos[d]));
    float rotated = d < kDim / 2 ? g_sin[d + kDim / 2] : -g_sin[d - kDim / 2];
    out[d] = round_bf16(g_cos + rotated);
  }
}

}  // namespace

void gqa_rope_backward(const kindex_gqa_rope_backward_params& p) {
  validate(p);
  const int64_t batch = p.batch_size, seq = p.seq_len, tokens = batch * seq;
  const auto* cos = static_cast<const uint16_t*>(p.cos);
  const auto* sin = static_cast<const uint16_t*>(p.sin);
  const float scaling = p.scaling;

  // 1. Output projection: grad_attn_output = grad_output @ o_weight, grad_o_weight = grad_output^T @ attn_output.
  std::vector<float> grad_output = widened(p.grad_output, tokens * kHidden);
  std::vector<float> grad_attn_output(tokens * kQProj);
  {
    std::vector<float> o_weight = widened(p.o_weight, kHidden * kQProj);
    gemm_round_bf16(tokens, kQProj, kHidden, {grad_output.data(), kHidden}, {o_weight.data(), kQProj},
                    grad_attn_output.data(), kQProj, true);
  }
  {
    std::vector<float> attn_output = widened(p.attn_output, tokens * kQProj);
    std::vector<float> grad_o_weight(kHidden * kQProj);
    gemm_round_bf16(kHidden, kQProj, tokens, {grad_output.data(), kHidden, true}, {attn_output.data(), kQProj},
                    grad_o_weight.data(), kQProj, true);
    store_bf16(grad_o_weight.data(), p.grad_o_weight, kHidden * kQProj);
  }
  grad_output = {};

  // 2-6. Attention part, one task per (batch, head). grad_attn_output[b, :, h] is read in place (row stride 4096).
  // Query gradients go through RoPE straight into the [tokens, 4096] projection layout; key and value gradients
  // stay per head until the GQA sum.
  std::vector<float> grad_query_proj(tokens * kQProj);
  std::vector<float> grad_key_heads(batch * kHeads * seq * kDim);
  std::vector<float> grad_value_heads(batch * kHeads * seq * kDim);
  const auto* attn_weights = static_cast<const uint16_t*>(p.attn_weights);
  parallel_for(batch * kHeads, [&](int64_t begin, int64_t end) {
    std::vector<float> attn(seq * seq), grad_attn(seq * seq), grad_scores(seq * seq);
    std::vector<float> query(seq * kDim), key(seq * kDim), value(seq * kDim);
    std::vector<float> grad_query(seq * kDim);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / kHeads, h = task % kHeads, head_offset = task * seq * kDim;
      const auto widen_head = [&](const void* src, std::vector<float>& dst) {
        const auto* s = static_cast<const uint16_t*>(src) + head_offset;
        for (int64_t i = 0; i < seq * kDim; ++i) dst[i] = bf16_to_float(s[i]);
      };
      widen_head(p.query_states, query);
      widen_head(p.key_states, key);
      widen_head(p.value_states, value);
      const uint16_t* a_src = attn_weights + task * seq * seq;
      for (int64_t i = 0; i < seq * seq; ++i) attn[i] = bf16_to_float(a_src[i]);
      const MatrixRef grad_out_head{grad_attn_output.data() + b * seq * kQProj + h * kDim, kQProj};

      // grad_attn_weights = grad_attn_output @ value^T; grad_value = attn_weights^T @ grad_attn_output.
      gemm_round_bf16(seq, seq, kDim, grad_out_head, {value.data(), kDim, true}, grad_attn.data(), seq, false);
      gemm_round_bf16(seq, kDim, seq, {attn.data(), seq, true}, grad_out_head, grad_value_heads.data() + head_offset,
                      kDim, false);

      // Softmax backward in fp32: s = a * (g - sum(g * a)), rounded to bf16, then * scaling rounded again.
      for (int64_t i = 0; i < seq; ++i) {
        const float* a = &attn[i * seq];
        const float* g = &grad_attn[i * seq];
        double row_sum = 0.0;  // the exact sum, rounded once to fp32: what torch's fp32 reduction approximates
        for (int64_t j = 0; j < seq; ++j) row_sum += double(g[j] * a[j]);  // bf16*bf16 is exact in fp32
        const float sum_grad = float(row_sum);
        float* s = &grad_scores[i * seq];
        for (int64_t j = 0; j < seq; ++j) s[j] = round_bf16(round_bf16(a[j] * (g[j] - sum_grad)) * scaling);
      }

      // grad_query = grad_scores @ key; grad_key = grad_scores^T @ query.
      gemm_round_bf16(seq, kDim, seq, {grad_scores.data(), seq}, {key.data(), kDim}, grad_query.data(), kDim, false);
      gemm_round_bf16(seq, kDim, seq, {grad_scores.data(), seq, true}, {query.data(), kDim},
                      grad_key_heads.data() + head_offset, kDim, false);
      for (int64_t s = 0; s < seq; ++s) {
        const int64_t token = b * seq + s;
        rope_backward(&grad_query[s * kDim], cos + token * kDim, sin + token * kDim,
                      &grad_query_proj[token * kQProj + h * kDim]);
      }
    }
  });
  grad_attn_output = {};

  // 7-9. GQA sum over each group's 4 heads (fp32 accumulation in head order, one rounding), RoPE for keys, and the
  // transpose to the [tokens, 1024] projection layout.
  std::vector<float> grad_key_proj(tokens * kKvProj), grad_value_proj(tokens * kKvProj);
  parallel_for(batch * kKvHeads * seq, [&](int64_t begin, int64_t end) {
    float key_sum[kDim];
    for (int64_t i = begin; i < end; ++i) {
      const int64_t b = i / (kKvHeads * seq), kv_head = (i / seq) % kKvHeads, s = i % seq, token = b * seq + s;
      float* value_out = &grad_value_proj[token * kKvProj + kv_head * kDim];
      for (int64_t d = 0; d < kDim; ++d) {
        float k_acc = 0.0f, v_acc = 0.0f;
        for (int64_t g = 0; g < kGroup; ++g) {
          const int64_t at = ((b * kHeads + kv_head * kGroup + g) * seq + s) * kDim + d;
          k_acc += grad_key_heads[at];
          v_acc += grad_value_heads[at];
        }
        key_sum[d] = round_bf16(k_acc);
        value_out[d] = round_bf16(v_acc);
      }
      rope_backward(key_sum, cos + token * kDim, sin + token * kDim, &grad_key_proj[token * kKvProj + kv_head * kDim]);
    }
  });
  grad_key_heads = {};
  grad_value_heads = {};

  // 10. Q/K/V projections: grad_hidden_x = grad_x_proj @ x_weight, grad_x_weight = grad_x_proj^T @ hidden_states.
  std::vector<float> hidden = widened(p.hidden_states, tokens * kHidden);
  std::vector<float> grad_hidden(tokens * kHidden), grad_hidden_branch(tokens * kHidden);
  struct Branch {
    const std::vector<float>& grad_proj;
    int64_t proj;
    const void* weight;
    void* grad_weight;
  };
  const Branch branches[] = {{grad_query_proj, kQProj, p.q_weight, p.grad_q_weight},
                             {grad_key_proj, kKvProj, p.k_weight, p.grad_k_weight},
                             {grad_value_proj, kKvProj, p.v_weight, p.grad_v_weight}};
  bool first = true;
  for (const Branch& br : branches) {
    {
      std::vector<float> weight = widened(br.weight, br.proj * kHidden);
      gemm_round_bf16(tokens, kHidden, br.proj, {br.grad_proj.data(), br.proj}, {weight.data(), kHidden},
                      first ? grad_hidden.data() : grad_hidden_branch.data(), kHidden, true);
    }
    if (!first) {  // grad_hidden = (q + k) + v, each add rounded to bf16
      parallel_for(
          tokens * kHidden,
          [&](int64_t begin, int64_t end) {
            for (int64_t i = begin; i < end; ++i) grad_hidden[i] = round_bf16(grad_hidden[i] + grad_hidden_branch[i]);
          },
          1 << 16);
    }
    first = false;
    std::vector<float> grad_weight(br.proj * kHidden);
    gemm_round_bf16(br.proj, kHidden, tokens, {br.grad_proj.data(), br.proj, true}, {hidden.data(), kHidden},
                    grad_weight.data(), kHidden, true);
    store_bf16(grad_weight.data(), br.grad_weight, br.proj * kHidden);
  }
  store_bf16(grad_hidden.data(), p.grad_hidden_states, tokens * kHidden);
}

}  // namespace kindex::reference
