/* kindex's CPU references behind a C ABI: the ground truth the comparators judge every implementation against,
 * run in-process by the runner as the "cpu-reference" implementation. Not product and not in a shared library:
 * the entry points live in the static component kindex_reference (src/reference/c_abi.cpp), which the runner
 * links; the runner includes this header, never src/reference's C++ one.
 *
 * They take kindex.h's params structs, with HOST pointers for every tensor and index array, and run on
 * KINDEX_THREADS threads (docs/references.md). As with kindex.h, each begins by checking params.struct_size (this
 * header's kindex.h size, or an earlier version's: the fields it lacks take their defaults) before reading anything
 * else, then checks every field and every index array entry before reading a tensor. Statuses:
 *   KINDEX_STATUS_OK
 *   KINDEX_STATUS_INVALID_ARGUMENT  a field out of range (or params NULL, or an unknown struct_size)
 *   KINDEX_STATUS_INVALID_INPUT     a bad index array entry (kv_indptr, kv_indices, kv_last_page_len): what
 *                                   libkindex.so finds in validation mode, which the CPU reference always does
 *   KINDEX_STATUS_NOT_SUPPORTED     this host cannot give the call the memory it needs ("out of host memory"):
 *                                   kindex.h has no out-of-memory status, and NOT_SUPPORTED, "a configuration this
 *                                   build cannot run", is the one that says the call was refused for what this
 *                                   machine is rather than for what the caller passed (INVALID_ARGUMENT) or a CUDA
 *                                   failure (there is no CUDA here); the reference takes no workspace, so
 *                                   WORKSPACE_TOO_SMALL would point at the wrong fix
 *   KINDEX_STATUS_CUDA_ERROR        an unexpected failure inside the reference (a bug, or a thread that could not
 *                                   start): what libkindex.so's entry points give any unexpected exception, so the
 *                                   two are read alike; the message begins "unexpected error"
 * On failure kindex_cpu_reference_last_error() returns a message for the calling thread naming the function, the
 * offending field and its value ("paged_decode: kv_indices[3] = 500: page id out of range [0, 500)"). */
#ifndef KINDEX_CPU_REFERENCE_H
#define KINDEX_CPU_REFERENCE_H

#include "kindex/kindex.h"

#ifdef __cplusplus
extern "C" {
#endif

/* FlashInfer-Bench gqa_paged_decode_* semantics, computed in fp64 and rounded once to the output dtype; params->
 * validate and the workspace are not used (the index arrays are always checked). */
KINDEX_API kindex_status kindex_cpu_reference_paged_decode(const kindex_paged_decode_params* params);
/* SOL-ExecBench L2/003 semantics with the upstream reference's bf16 rounding points. */
KINDEX_API kindex_status kindex_cpu_reference_gqa_rope_backward(const kindex_gqa_rope_backward_params* params);
/* The message of the calling thread's last failed kindex_cpu_reference_* call ("" after a success). Valid until
 * the thread's next call. Separate from kindex_last_error(), which belongs to libkindex.so's calls. */
KINDEX_API const char* kindex_cpu_reference_last_error(void);

#ifdef __cplusplus
}
#endif

#endif
