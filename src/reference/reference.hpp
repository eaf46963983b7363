#pragma once
// CPU references, one per problem, taking the same params structs as the C ABI but with HOST pointers.
// They are the ground truth the comparators judge every implementation against.
#include "kindex/kindex.h"

namespace kindex::reference {

// FlashInfer-Bench gqa_paged_decode_* semantics (bf16 or fp16 in/out, fp32 lse base 2), accumulating in fp64.
// Empty sequences give zeros and lse = -inf. Throws kindex::Error on out-of-range indices.
void paged_decode(const kindex_paged_decode_params& p);

// SOL-ExecBench L2/003 semantics, reproducing the upstream reference's bf16 rounding points.
void gqa_rope_backward(const kindex_gqa_rope_backward_params& p);

}  // namespace kindex::reference
