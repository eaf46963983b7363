#pragma once
// Batched GQA paged decode on the GPU (FlashInfer-Bench gqa_paged_decode_*): the C++ API behind the C ABI
// kindex_paged_decode*. One call enqueues one kernel on the caller's stream (a cooperative launch when the KV list
// is split over several segments; Tuning::merge = 0 instead adds a small merge kernel); no device->host copy, so
// it can be captured in a CUDA graph, and every reduction runs in a fixed order, so results are bit-identical run
// to run.
//
// Split-KV without planning: the GLOBAL page list [0, num_kv_indices) is cut into equal segments of
// `pages_per_segment` pages, chosen on the host from num_kv_indices, page_size, the head counts and the SM
// count. A CTA (segment, kv head) handles every piece of every sequence inside its segment; a sequence that
// lies in one segment is written directly, the others leave a partial (o, lse) in the workspace, which the same
// kernel merges after a grid-wide barrier (all CTAs are resident: one wave by construction).
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kindex/kindex.h"

typedef struct CUstream_st* cudaStream_t;

namespace kindex::decode {

constexpr int kMaxGroup = 16;  // query heads per KV head: the MMA's 16 rows


// Knobs for tuning runs and tests of the split paths: an explicit argument of the C++ entry points below, used only
// by benchmarks/gpu/ and tests/. The C ABI always runs the defaults, which are what the library ships.
struct Tuning {
  // A segment is never cut shorter than this many tokens (page_size * pages); 0 = the shipped rule (make_plan).
  int min_segment_tokens = 0;
  bool programmatic_merge = true;  // merge = 0: launch the merge kernel with programmatic dependent launch
  // How sequences cut over several segments are merged: 1 = inside the main kernel after a grid-wide barrier
  // (cooperative launch, one kernel); 0 = a second (merge) kernel; 2 = not at all (timing diagnostics only:
  // the output of split sequences is then wrong).
  int merge = 1;
  // Chunks of consecutive pieces are dealt to the warps round-robin across piece boundaries (a piece starts at
  // the warp after the one that took the previous piece's last chunk), instead of every piece starting at warp 0.
  bool round_robin = true;
  bool prefetch_ids = true;  // prefetch the segment's page ids (and each table batch's Q rows) into L2
  // Sequence pieces of 1..solo_tokens tokens are streamed whole by one warp, which writes the result from its
  // registers: no cross-warp merge or CTA barrier for them (head_dim 64/128; 0 = never).
  int solo_tokens = 64;
  // A piece alone in its table batch is solo too when it has 1..solo_alone_tokens tokens (one chunk: one warp does
  // all the work either way, and solo skips the CTA merge); 0 = never (v4).
  int solo_alone_tokens = 16;
  // K/V copies carry the L2 evict-first policy: rows read once replace each other rather than other lines
  // (in the cold-L2 protocol, the flush's dirty lines, whose write-back would share DRAM with the reads).
  bool evict_first = true;
  // K/V copies without any cache-policy operand (plain cp.async.cg): -1 = the shipped rule (when the call streams at
  // least kPlainCopiesL2Multiple x the device's L2 of K/V), 0 = never (hinted copies, evict_first's policy),
  // 1 = always.
  int plain_copies = -1;
  // Shared memory per CTA to plan for: 0 = the device's opt-in limit; less runs the configuration of a device
  // with that much (tests run the A100's 2-stage ring on a Hopper).
  size_t smem_limit = 0;
};

// Measured on the H200 (2026-12-03, docs/perf/decode.md): plain copies are 1-4% faster from 416 MB of K/V up, the
// hinted ones 2-11% faster up to 284 MB; the crossover lies between 4.7 and 6.9 L2 sizes (60 MB).
constexpr int64_t kPlainCopiesL2Multiple = 6;

struct Plan {
  int64_t pages_per_segment = 1;
  int64_t num_segments = 1;
  int stages = 0;  // the cp.async ring depth the device's shared memory allows (detail::ring_stages)
  bool plain_copies = false;  // K/V copies without a cache-policy operand (Tuning::plain_copies)
  Tuning tuning;
  bool fused_merge = false;   // several segments merged inside the main kernel (cooperative launch)
  size_t validate_bytes = 0;  // first bytes of the workspace: validation mode's first-bad-entry slot
  size_t partial_bytes = 0;   // then (num_segments + batch_size) * num_qo_heads * (head_dim + 1) floats
  size_t workspace_bytes() const { return validate_bytes + partial_bytes; }
};

// Checks every host-side field (throws kindex::Error naming the field and value) and sizes the split.
Plan make_plan(const kindex_paged_decode_params& p, const Tuning& tuning = {});

// Bytes of workspace paged_decode needs for these bounds.
size_t workspace_size(const kindex_paged_decode_params& p, const Tuning& tuning = {});

// Enqueues the decode on `stream`. Throws kindex::Error for bad arguments and capi::Failure (kernels/capi.hpp) for a
// too-small workspace, a CUDA error, or (validation mode) a bad index array entry.
void paged_decode(const kindex_paged_decode_params& p, void* workspace, size_t workspace_bytes,
                  cudaStream_t stream, const Tuning& tuning = {});

// ---- implemented in paged_decode.cu ----
namespace detail {
// The ring depth of the main kernel on a device whose CTAs may use `smem_limit` bytes of shared memory: the
// shipped depth where it fits (sm_90, sm_100), else 2 (sm_80's 163 KB); 0 if not even that fits.
int ring_stages(int head_dim, size_t smem_limit);
size_t ring_smem_bytes(int head_dim, int stages);  // shared memory per CTA of that configuration
// Resident CTAs per SM of the main kernel for this configuration (its shared memory decides).
int ctas_per_sm(kindex_dtype dtype, int head_dim, int stages);
// Enqueues the validation kernel; first_bad receives (kind << 40 | index) of the first bad entry, or ~0.
int launch_validate(const kindex_paged_decode_params& p, unsigned long long* first_bad, cudaStream_t stream);
// Enqueues the kernel (cooperative and self-merging when there are several segments; with Tuning::merge = 0 a
// normal launch plus the merge kernel). Returns a cudaError_t.
int launch_decode(const kindex_paged_decode_params& p, const Plan& plan, void* workspace, cudaStream_t stream);
}  // namespace detail

}  // namespace kindex::decode
