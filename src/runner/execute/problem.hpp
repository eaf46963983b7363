#pragma once
// What the runner knows about each problem it can run: which definitions belong to it, how a call's named
// tensors become the C ABI params struct (host or device pointers alike), and how much work one call is.
#include <map>
#include <optional>
#include <string>

#include "runner/record/floors.hpp"
#include "catalog/definition.hpp"
#include "core/tensor.hpp"
#include "kindex/kindex.h"

namespace kindex::runner {

enum class ProblemKind { paged_decode, gqa_rope_backward };
std::optional<ProblemKind> problem_kind(const catalog::Definition& def);
std::string_view problem_kind_name(ProblemKind k);  // "paged_decode", "gqa_rope_backward"

using TensorMap = std::map<std::string, TensorView>;

// One call's arguments: input and output tensors by name (host or device views) and the scalar inputs.
struct CallArgs {
  TensorMap inputs;
  std::map<std::string, double> scalars;
  TensorMap outputs;
};

// One call's C ABI params struct, pointing at its tensors. Throw kindex::Error("call", name, ...) when a tensor
// the problem needs is missing or has the wrong rank/dtype.
// The C ABI's dtype for a tensor's (`name` for the error); throws Error for a dtype the ABI lacks.
kindex_dtype abi_dtype(DType t, const std::string& name);
kindex_paged_decode_params decode_abi_params(const CallArgs& args);
kindex_gqa_rope_backward_params backward_abi_params(const CallArgs& args);

// The work of one call, from the host copies of its inputs and outputs (decode reads the page table to count
// the KV tokens actually referenced: every distinct (page, slot) that some sequence reads, once).
WorkCount count_work(ProblemKind kind, const CallArgs& host_args);

}  // namespace kindex::runner
