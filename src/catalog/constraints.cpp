#include "catalog/constraints.hpp"

#include <cmath>
#include <string_view>

#include <nlohmann/json.hpp>

#include "catalog/loader.hpp"
#include "core/error.hpp"

namespace kindex::catalog {

void check_page_table(const int32_t* kv_indptr, int64_t len_indptr, const int32_t* kv_indices, int64_t num_kv_indices,
                      const int32_t* kv_last_page_len, int64_t num_pages, int64_t page_size, const std::string& where) {
  if (len_indptr < 1) throw Error(where, "kv_indptr", "[]", "kv_indptr needs at least one entry");
  if (kv_indptr[0] != 0) throw Error(where, "kv_indptr[0]", std::to_string(kv_indptr[0]), "must be 0");
  for (int64_t b = 0; b + 1 < len_indptr; ++b)
    if (kv_indptr[b + 1] < kv_indptr[b])
      throw Error(where, "kv_indptr[" + std::to_string(b + 1) + "]", std::to_string(kv_indptr[b + 1]),
                  "kv_indptr must be non-decreasing (kv_indptr[" + std::to_string(b) +
                      "] = " + std::to_string(kv_indptr[b]) + ")");
  int64_t last = kv_indptr[len_indptr - 1];
  if (last != num_kv_indices)
    throw Error(where, "kv_indptr[" + std::to_string(len_indptr - 1) + "]", std::to_string(last),
                "must equal the number of page ids in kv_indices (" + std::to_string(num_kv_indices) + ")");
  for (int64_t i = 0; i < num_kv_indices; ++i)
    if (kv_indices[i] < 0 || kv_indices[i] >= num_pages)
      throw Error(where, "kv_indices[" + std::to_string(i) + "]", std::to_string(kv_indices[i]),
                  "page id out of range [0, num_pages = " + std::to_string(num_pages) + ")");
  if (!kv_last_page_len) return;
  // The reference reads kv_last_page_len only for non-empty sequences.
  for (int64_t b = 0; b + 1 < len_indptr; ++b)
    if (kv_indptr[b + 1] > kv_indptr[b] && (kv_last_page_len[b] < 1 || kv_last_page_len[b] > page_size))
      throw Error(where, "kv_last_page_len[" + std::to_string(b) + "]", std::to_string(kv_last_page_len[b]),
                  "must be in [1, page_size = " + std::to_string(page_size) + "]");
}

std::string decode_scalar_problem(std::string_view name, double value) {
  if (name == "k_scale" || name == "v_scale" || name == "rope_scale" || name == "rope_theta")
    return value > 0 ? "" : "must be > 0";
  if (name == "logits_soft_cap") return value >= 0 ? "" : "must be >= 0 (0: off)";
  const bool int32_at_least_minus_one = value == std::floor(value) && value >= -1 && value <= 2147483647.0;
  if (name == "window_left") return int32_at_least_minus_one ? "" : "must be an integer >= -1 (-1: no window)";
  return "";
}

namespace {

const Tensor* find_tensor(const Inputs& inputs, const std::string& name) {
  auto it = inputs.tensors.find(name);
  return it == inputs.tensors.end() ? nullptr : &it->second;
}

// The decode family's page-table semantics, when the inputs carry a page table.
void check_decode_page_table(const std::map<std::string, int64_t>& axes, const Inputs& inputs,
                             const std::string& where) {
  const Tensor* indptr = find_tensor(inputs, "kv_indptr");
  const Tensor* indices = find_tensor(inputs, "kv_indices");
  const Tensor* last = find_tensor(inputs, "kv_last_page_len");
  if (!indptr || !indices || !axes.count("num_pages")) return;
  if (indptr->dtype() != DType::i32 || indices->dtype() != DType::i32 || indptr->shape().size() != 1 ||
      indices->shape().size() != 1)
    return;  // the definition declares something else; the shape and dtype checks judged it
  if (last && (last->dtype() != DType::i32 || last->shape().size() != 1 || last->shape()[0] + 1 != indptr->shape()[0]))
    last = nullptr;
  int64_t page_size = axes.count("page_size") ? axes.at("page_size") : 1;
  check_page_table(indptr->ptr<int32_t>(), indptr->shape()[0], indices->ptr<int32_t>(), indices->shape()[0],
                   last ? last->ptr<int32_t>() : nullptr, axes.at("num_pages"), page_size, where);
  // A decode variant with several query tokens per request: each request holds at least that many keys (its query
  // tokens are in the cache), else its first rows would see no key.
  if (!axes.count("q_len_per_req")) return;
  const int64_t q_len = axes.at("q_len_per_req");
  const int32_t* ip = indptr->ptr<int32_t>();
  for (int64_t b = 0; b + 1 < indptr->shape()[0]; ++b) {
    const int64_t pages = ip[b + 1] - ip[b];
    const int64_t tokens = pages == 0 ? 0 : (pages - 1) * page_size + (last ? last->ptr<int32_t>()[b] : page_size);
    if (tokens < q_len)
      throw Error(where, "kv_indptr[" + std::to_string(b + 1) + "]", std::to_string(ip[b + 1]),
                  "request " + std::to_string(b) + " holds " + std::to_string(tokens) +
                      " KV tokens, fewer than q_len_per_req = " + std::to_string(q_len) +
                      " (its query tokens are in the cache)");
  }
}

// A decode variant's scalar inputs (kindex.h's ranges), where the definition has them.
void check_decode_scalars(const Definition& def, const Inputs& inputs, const std::string& where) {
  for (const auto& [name, value] : inputs.scalars)
    if (def.input(name))
      if (std::string problem = decode_scalar_problem(name, value); !problem.empty())
        throw Error(where, name, nlohmann::json(value).dump(), problem);
}

}  // namespace

void check_inputs(const Definition& def, const std::map<std::string, int64_t>& axes, const Inputs& inputs,
                  const std::string& where, bool allow_missing) {
  for (const TensorSpec& spec : def.inputs) {
    if (spec.is_scalar()) {
      if (!inputs.scalars.count(spec.name)) throw Error(where, spec.name, "", "scalar input missing");
      continue;
    }
    const Tensor* t = find_tensor(inputs, spec.name);
    if (!t) {
      if (allow_missing) continue;
      throw Error(where, spec.name, "", "tensor input missing");
    }
    if (t->dtype() != spec.dtype)
      throw Error(where, spec.name + ".dtype", std::string(dtype_name(t->dtype())),
                  "the definition declares " + std::string(dtype_name(spec.dtype)));
    auto want = concrete_shape(spec, axes);
    if (t->shape() != want)
      throw Error(where, spec.name + ".shape", shape_string(t->shape()),
                  "the definition's axes give " + shape_string(want));
  }
  for (const auto& [name, _] : inputs.tensors)
    if (!def.input(name)) throw Error(where, name, "", "not an input of " + def.name);

  Expression::Scope scope{&axes, &inputs};
  for (size_t i = 0; i < def.constraints.size(); ++i) {
    std::string field = "constraints[" + std::to_string(i) + "]";
    Expression e = Expression::parse(def.constraints[i], where, field);
    bool available = true;
    for (const std::string& n : e.names())
      if (!axes.count(n) && !inputs.tensors.count(n) && !inputs.scalars.count(n)) available = false;
    if (!available && allow_missing) continue;
    if (e.evaluate(scope, where, field) == 0.0)
      throw Error(where, field, e.explain(scope, where, field), "constraint violated: " + e.text());
  }
  check_decode_page_table(axes, inputs, where);
  if (axes.count("num_pages")) check_decode_scalars(def, inputs, where);
}

}  // namespace kindex::catalog
