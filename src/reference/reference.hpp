#pragma once
// CPU references, one per problem, taking the same params structs as the C ABI but with HOST pointers.
// They are the ground truth the comparators judge every implementation against. Both run on kindex::parallel_for
// (KINDEX_THREADS threads) and validate their parameters first, throwing kindex::Error (where = the function name,
// field = the parameter, e.g. "kv_indices[123]") before reading any tensor. docs/references.md has the details.
// Their C ABI (include/kindex/cpu_reference.h, c_abi.cpp) is what the runner calls; this header is for tests and
// benchmarks inside src/reference's reach.
#include "core/error.hpp"
#include "kindex/kindex.h"

namespace kindex::reference {

// The Error for a bad entry of an index array (kv_indptr, kv_indices, kv_last_page_len), as opposed to a field out
// of range: the C ABI reports it as KINDEX_STATUS_INVALID_INPUT, as libkindex.so's validation mode does.
class InvalidEntry : public Error {
 public:
  using Error::Error;
};

// FlashInfer-Bench gqa_paged_decode_* semantics for any num_qo_heads / num_kv_heads (divisible), head_dim and
// page_size; bf16 or fp16 q/k/v/output; lse fp32, the base-2 log-sum-exp of sm_scale * q.k (skipped when NULL).
// Scores, softmax and the weighted sum are fp64; the output is rounded once to its dtype (correctly rounded).
// kv_last_page_len NULL means full last pages; a row that sees no key gives zeros and lse = -inf (with a sink:
// zeros and the sink's lse). The version-2 fields as kindex.h defines them: k_scale / v_scale, HND, q_len_per_req,
// window_left, logits_soft_cap, sinks (host pointer), fp8 KV, pos_encoding ROPE_LLAMA (angles in fp64; an odd head_dim
// is refused with it).
// Errors: kv_indptr not starting at 0, decreasing, or not ending at num_kv_indices; a page id outside
// [0, num_pages); a non-empty sequence's kv_last_page_len outside [1, page_size].
void paged_decode(const kindex_paged_decode_params& p);

// SOL-ExecBench L2/003 semantics, reproducing the upstream reference's bf16 rounding points: each matmul
// accumulates in fp32 (OpenBLAS) and rounds once to bf16; see gqa_rope_backward.cpp for the full list.
void gqa_rope_backward(const kindex_gqa_rope_backward_params& p);

}  // namespace kindex::reference
