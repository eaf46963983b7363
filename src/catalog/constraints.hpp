#pragma once
// Python-like expressions as the upstream definitions write them, evaluated over axes and concrete inputs:
// integers and floats, axis names, input tensors indexed with [i] / [-1], .item(), .shape[i], .numel(), len(x),
// + - * / // % and unary -, comparisons (== != < <= > >=, chained), and / or / not, parentheses.
// Axis expressions ("num_attention_heads * head_dim") use the same parser restricted to integer arithmetic.
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>

#include "catalog/definition.hpp"
#include "catalog/inputs.hpp"

namespace kindex::catalog {

struct ExprNode;
// A parsed expression; cheap to copy.
class Expression {
 public:
  // Throws kindex::Error(where, field, text, "syntax error ...") on bad syntax, too deep nesting or > 4096 chars.
  static Expression parse(std::string_view text, const std::string& where, const std::string& field);
  const std::string& text() const { return text_; }
  // Names the expression refers to (axes, inputs).
  const std::set<std::string>& names() const { return names_; }

  struct Scope {
    const std::map<std::string, int64_t>* axes = nullptr;
    const Inputs* inputs = nullptr;
  };
  // Evaluates to a number (booleans are 1 / 0). Throws kindex::Error on an unknown name, an index out of range,
  // division by zero, integer overflow or a type error.
  double evaluate(const Scope& scope, const std::string& where, const std::string& field) const;
  // Evaluates with integer arithmetic only (axis expressions); "/" must divide exactly.
  int64_t evaluate_integer(const std::map<std::string, int64_t>& axes, const std::string& where,
                           const std::string& field) const;
  // The evaluated operands of a comparison joined by their operators ("130 == 131"), else the value: what an
  // error message shows for a violated constraint.
  std::string explain(const Scope& scope, const std::string& where, const std::string& field) const;

 private:
  std::string text_;
  std::set<std::string> names_;
  std::shared_ptr<const ExprNode> root_;
};

// Checks concrete inputs against the definition: every tensor input present with its declared dtype and the
// shape its axes give, scalars present, every constraint true, and for the paged-decode family the page-table
// semantics (check_page_table), with several query tokens per request (axis q_len_per_req) at least that many KV
// tokens in each request, and the variant scalars' ranges (k_scale, v_scale, rope_scale, rope_theta > 0,
// logits_soft_cap >= 0, window_left an integer >= -1). Throws kindex::Error(where, field, value, problem) for the first violation:
// field "constraints[1]" with the evaluated sides as value, or "kv_indices[17]" with the bad id, etc.
// With allow_missing, tensors absent from `inputs` are not required, and constraints that read them are skipped.
void check_inputs(const Definition& def, const std::map<std::string, int64_t>& axes, const Inputs& inputs,
                  const std::string& where, bool allow_missing = false);

// What is wrong with a decode variant's scalar input for kindex.h ("" when nothing, and for other names):
// k_scale, v_scale, rope_scale, rope_theta must be > 0, logits_soft_cap >= 0, window_left an integer >= -1.
std::string decode_scalar_problem(std::string_view name, double value);

// The decode family's page-table checks: kv_indptr[0] == 0, non-decreasing, kv_indptr[-1] == num_kv_indices
// (the length of kv_indices); every kv_indices[i] in [0, num_pages); kv_last_page_len[b] in [1, page_size]
// for non-empty sequences (the reference reads it only for those). Each error names field, index and value.
void check_page_table(const int32_t* kv_indptr, int64_t len_indptr, const int32_t* kv_indices, int64_t num_kv_indices,
                      const int32_t* kv_last_page_len, int64_t num_pages, int64_t page_size, const std::string& where);

}  // namespace kindex::catalog
