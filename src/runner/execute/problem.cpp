#include "runner/execute/problem.hpp"

#include <algorithm>
#include <vector>

#include "catalog/builtin.hpp"
#include "catalog/constraints.hpp"
#include "core/error.hpp"
#include "runner/record/json_number.hpp"

namespace kindex::runner {

std::optional<ProblemKind> problem_kind(const catalog::Definition& def) {
  if (catalog::decode_family_params(def)) return ProblemKind::paged_decode;
  if (catalog::is_sol_gqa_rope_backward(def)) return ProblemKind::gqa_rope_backward;
  return std::nullopt;
}

std::string_view problem_kind_name(ProblemKind k) {
  return k == ProblemKind::paged_decode ? "paged_decode" : "gqa_rope_backward";
}

bool gpu_reference_computes(const catalog::Definition& def) {
  if (auto decode = catalog::decode_family_params(def)) return decode->is_plain();
  return catalog::is_sol_gqa_rope_backward(def);
}

kindex_kv_layout decode_kv_layout(const catalog::Definition& def) {
  auto decode = catalog::decode_family_params(def);
  return decode && decode->hnd ? KINDEX_KV_LAYOUT_HND : KINDEX_KV_LAYOUT_NHD;
}

namespace {

const TensorView& tensor(const TensorMap& m, const std::string& name, size_t rank) {
  auto it = m.find(name);
  if (it == m.end()) throw Error("call", name, "missing", "the problem needs this tensor");
  if (it->second.shape.size() != rank)
    throw Error("call", name, shape_string(it->second.shape), "expected rank " + std::to_string(rank));
  return it->second;
}

const TensorView* optional_tensor(const TensorMap& m, const std::string& name) {
  auto it = m.find(name);
  return it == m.end() ? nullptr : &it->second;
}

double scalar(const CallArgs& a, const std::string& name) {
  auto it = a.scalars.find(name);
  if (it == a.scalars.end()) throw Error("call", name, "missing", "the problem needs this scalar");
  return it->second;
}

// A scalar the call may have (a decode variant's), nullopt when it has not; throws Error naming it and its value
// when it is out of kindex.h's range.
std::optional<double> optional_scalar(const CallArgs& a, const std::string& name) {
  auto it = a.scalars.find(name);
  if (it == a.scalars.end()) return std::nullopt;
  if (std::string problem = catalog::decode_scalar_problem(name, it->second); !problem.empty())
    throw Error("call", name, json_number(it->second).dump(), problem);
  return it->second;
}

}  // namespace

kindex_dtype abi_dtype(DType t, const std::string& name) {
  switch (t) {
    case DType::bf16:
      return KINDEX_DTYPE_BF16;
    case DType::f16:
      return KINDEX_DTYPE_FP16;
    case DType::f32:
      return KINDEX_DTYPE_FP32;
    case DType::i32:
      return KINDEX_DTYPE_INT32;
    default:
      throw Error("call", name, std::string(dtype_name(t)), "dtype has no C ABI equivalent");
  }
}

kindex_paged_decode_params decode_abi_params(const CallArgs& a) {
  const TensorView& q = tensor(a.inputs, "q", 3);
  const TensorView& k = tensor(a.inputs, "k_cache", 4);
  const TensorView& v = tensor(a.inputs, "v_cache", 4);
  const TensorView& indptr = tensor(a.inputs, "kv_indptr", 1);
  const TensorView& indices = tensor(a.inputs, "kv_indices", 1);
  const TensorView* last = optional_tensor(a.inputs, "kv_last_page_len");
  const bool hnd = a.kv_layout == KINDEX_KV_LAYOUT_HND;
  kindex_paged_decode_params p = KINDEX_PAGED_DECODE_PARAMS_INIT;
  p.dtype = abi_dtype(q.dtype, "q");
  // q holds q_len_per_req rows per request (kv_indptr has one entry per request and one more).
  const int64_t requests = indptr.shape[0] - 1;
  if (requests < 1 || q.shape[0] % requests != 0)
    throw Error("call", "q", shape_string(q.shape),
                "its rows are not a whole number of rows per request (kv_indptr " + shape_string(indptr.shape) + ")");
  p.batch_size = int32_t(requests);
  p.q_len_per_req = int32_t(q.shape[0] / requests);
  p.num_qo_heads = int32_t(q.shape[1]);
  p.head_dim = int32_t(q.shape[2]);
  p.num_pages = k.shape[0];
  p.kv_layout = a.kv_layout;
  p.page_size = int32_t(k.shape[hnd ? 2 : 1]);
  p.num_kv_heads = int32_t(k.shape[hnd ? 1 : 2]);
  p.num_kv_indices = indices.shape[0];
  if (k.dtype != v.dtype)
    throw Error("call", "v_cache", std::string(dtype_name(v.dtype)),
                "k_cache is " + std::string(dtype_name(k.dtype)) + ": both caches take one format");
  p.kv_format = k.dtype == DType::f8e4m3   ? KINDEX_KV_FORMAT_FP8_E4M3
                : k.dtype == DType::f8e5m2 ? KINDEX_KV_FORMAT_FP8_E5M2
                                           : KINDEX_KV_FORMAT_SAME_AS_Q;
  p.q = q.data;
  p.k_cache = k.data;
  p.v_cache = v.data;
  p.kv_indptr = indptr.ptr<const int32_t>();
  p.kv_indices = indices.ptr<const int32_t>();
  p.kv_last_page_len = last ? last->ptr<const int32_t>() : nullptr;
  p.sm_scale = float(scalar(a, "sm_scale"));
  if (auto s = optional_scalar(a, "k_scale")) p.k_scale = float(*s);
  if (auto s = optional_scalar(a, "v_scale")) p.v_scale = float(*s);
  if (auto s = optional_scalar(a, "logits_soft_cap")) p.logits_soft_cap = float(*s);
  if (auto s = optional_scalar(a, "window_left")) p.window_left = int32_t(*s);
  const auto rope_scale = optional_scalar(a, "rope_scale"), rope_theta = optional_scalar(a, "rope_theta");
  if (rope_scale || rope_theta) p.pos_encoding = KINDEX_POS_ENCODING_ROPE_LLAMA;
  if (rope_scale) p.rope_scale = float(*rope_scale);
  if (rope_theta) p.rope_theta = float(*rope_theta);
  if (const TensorView* sinks = optional_tensor(a.inputs, "sinks")) {
    if (sinks->dtype != DType::f32 || sinks->shape != std::vector<int64_t>{q.shape[1]})
      throw Error("call", "sinks", std::string(dtype_name(sinks->dtype)) + " " + shape_string(sinks->shape),
                  "expected float32 [num_qo_heads = " + std::to_string(q.shape[1]) + "]");
    p.sinks = sinks->ptr<const float>();
  }
  p.output = tensor(a.outputs, "output", 3).data;
  p.lse = tensor(a.outputs, "lse", 2).ptr<float>();
  p.validate = 0;
  return p;
}

kindex_gqa_rope_backward_params backward_abi_params(const CallArgs& a) {
  const TensorView& hidden = tensor(a.inputs, "hidden_states", 3);
  kindex_gqa_rope_backward_params p = KINDEX_GQA_ROPE_BACKWARD_PARAMS_INIT;
  p.batch_size = int32_t(hidden.shape[0]);
  p.seq_len = int32_t(hidden.shape[1]);
  p.grad_output = tensor(a.inputs, "grad_output", 3).data;
  p.hidden_states = hidden.data;
  p.cos = tensor(a.inputs, "cos", 3).data;
  p.sin = tensor(a.inputs, "sin", 3).data;
  p.q_weight = tensor(a.inputs, "q_weight", 2).data;
  p.k_weight = tensor(a.inputs, "k_weight", 2).data;
  p.v_weight = tensor(a.inputs, "v_weight", 2).data;
  p.o_weight = tensor(a.inputs, "o_weight", 2).data;
  p.query_states = tensor(a.inputs, "query_states", 4).data;
  p.key_states = tensor(a.inputs, "key_states", 4).data;
  p.value_states = tensor(a.inputs, "value_states", 4).data;
  p.attn_weights = tensor(a.inputs, "attn_weights", 4).data;
  p.attn_output = tensor(a.inputs, "attn_output", 3).data;
  p.scaling = float(scalar(a, "scaling"));
  p.grad_hidden_states = tensor(a.outputs, "grad_hidden_states", 3).data;
  p.grad_q_weight = tensor(a.outputs, "grad_q_weight", 2).data;
  p.grad_k_weight = tensor(a.outputs, "grad_k_weight", 2).data;
  p.grad_v_weight = tensor(a.outputs, "grad_v_weight", 2).data;
  p.grad_o_weight = tensor(a.outputs, "grad_o_weight", 2).data;
  return p;
}

WorkCount count_work(ProblemKind kind, const CallArgs& a) {
  WorkCount w;
  double out_bytes = 0;
  for (const auto& [name, t] : a.inputs) w.declared_input_bytes += double(t.nbytes());
  for (const auto& [name, t] : a.outputs) out_bytes += double(t.nbytes());
  w.compulsory_bytes = w.declared_input_bytes + out_bytes;
  if (kind == ProblemKind::gqa_rope_backward) {
    const auto& h = a.inputs.at("hidden_states");
    w.flops = 2.0 * l2_003_macs(h.shape[0], h.shape[1]);
    w.referenced_bytes = w.compulsory_bytes;  // every input is read in full, every output written
    return w;
  }
  // Decode: what a call must move (floors.hpp, paged_decode_work), from the page table it is given.
  const WorkCount moved = paged_decode_work(decode_abi_params(a), double(dtype_size(a.inputs.at("q").dtype)));
  w.referenced_bytes = moved.referenced_bytes;
  w.flops = moved.flops;
  return w;
}

}  // namespace kindex::runner
