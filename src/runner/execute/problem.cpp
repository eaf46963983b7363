#include "runner/execute/problem.hpp"

#include <algorithm>
#include <vector>

#include "catalog/builtin.hpp"
#include "core/error.hpp"

namespace kindex::runner {

std::optional<ProblemKind> problem_kind(const catalog::Definition& def) {
  if (catalog::decode_family_params(def)) return ProblemKind::paged_decode;
  if (catalog::is_sol_gqa_rope_backward(def)) return ProblemKind::gqa_rope_backward;
  return std::nullopt;
}

std::string_view problem_kind_name(ProblemKind k) {
  return k == ProblemKind::paged_decode ? "paged_decode" : "gqa_rope_backward";
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
  kindex_paged_decode_params p = KINDEX_PAGED_DECODE_PARAMS_INIT;
  p.dtype = abi_dtype(q.dtype, "q");
  p.batch_size = int32_t(q.shape[0]);
  p.num_qo_heads = int32_t(q.shape[1]);
  p.head_dim = int32_t(q.shape[2]);
  p.num_pages = k.shape[0];
  p.page_size = int32_t(k.shape[1]);
  p.num_kv_heads = int32_t(k.shape[2]);
  p.num_kv_indices = indices.shape[0];
  p.q = q.data;
  p.k_cache = k.data;
  p.v_cache = v.data;
  p.kv_indptr = indptr.ptr<const int32_t>();
  p.kv_indices = indices.ptr<const int32_t>();
  p.kv_last_page_len = last ? last->ptr<const int32_t>() : nullptr;
  p.sm_scale = float(scalar(a, "sm_scale"));
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
