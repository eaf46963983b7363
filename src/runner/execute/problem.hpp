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

// paged_decode: the decode family, plain (FlashInfer-Bench's gqa_paged_decode_*) or a variant
// (catalog::DecodeParams).
enum class ProblemKind { paged_decode, gqa_rope_backward };
std::optional<ProblemKind> problem_kind(const catalog::Definition& def);
std::string_view problem_kind_name(ProblemKind k);  // "paged_decode", "gqa_rope_backward"
// Whether libkindex_gpu_reference.so computes the definition: the plain decode and L2/003, not a decode variant
// (its C ABI refuses the version-2 fields). The FlashInfer peers run the plain decode only as well.
bool gpu_reference_computes(const catalog::Definition& def);
// The decode definition's cache layout (NHD for every other definition): the one variant its tensors' names and
// shapes cannot tell (a call's k_cache [P, 8, 8, D] reads either way).
kindex_kv_layout decode_kv_layout(const catalog::Definition& def);

using TensorMap = std::map<std::string, TensorView>;

// One call's arguments: input and output tensors by name (host or device views) and the scalar inputs.
struct CallArgs {
  TensorMap inputs;
  std::map<std::string, double> scalars;
  TensorMap outputs;
  kindex_kv_layout kv_layout = KINDEX_KV_LAYOUT_NHD;  // decode: decode_kv_layout of the definition
};

// The C ABI's dtype for a tensor's (`name` for the error); throws Error for a dtype the ABI lacks.
kindex_dtype abi_dtype(DType t, const std::string& name);
// One call's C ABI params struct, pointing at its tensors. Throw kindex::Error("call", name, ...) when a tensor
// the problem needs is missing or has the wrong rank/dtype.
// Decode: the variant fields from the inputs as FlashInfer's wrapper names them, where the call has them (else
// kindex.h's defaults): kv_format from k_cache's dtype (float8_e4m3fn, float8_e5m2), q_len_per_req = q's rows /
// (kv_indptr's length - 1), the scalars k_scale, v_scale, logits_soft_cap, window_left (an integer), rope_scale and
// rope_theta (either present: pos_encoding ROPE_LLAMA), the tensor sinks; kv_layout from CallArgs.
kindex_paged_decode_params decode_abi_params(const CallArgs& args);
kindex_gqa_rope_backward_params backward_abi_params(const CallArgs& args);

// The work of one call, from the host copies of its inputs and outputs (decode reads the page table to count
// the KV tokens actually referenced: every distinct (page, slot) that some sequence reads, once).
WorkCount count_work(ProblemKind kind, const CallArgs& host_args);

}  // namespace kindex::runner
