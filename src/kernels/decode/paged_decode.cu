// Tensor-core paged GQA decode (see paged_decode.hpp for the split-KV scheme; docs/perf/decode.md for the
// measurements behind the choices below). Three stages: the plan kernel (plan_kernel: segments of equal cost, the
// merge work list), the run kernel (decode_kernel: stream, then merge_split after a grid-wide barrier).
//
// A CTA = one KV head x one segment of the plan; 8 warps (4 at head_dim 256). The query-head group of
// the KV head is packed as the 16 rows of mma.m16n8k16 (rows >= group are zero and never written). The chunks
// (16 tokens) of the segment's pieces are dealt to the warps (Deal): a piece's chunks round-robin over all warps,
// starting where the previous piece ended, or - a "solo" piece of at most kSoloTokens tokens in a segment
// of several pieces - all to one warp, which then writes that piece's result from its registers with no
// cross-warp merge and no CTA barrier. Each warp runs its own cp.async ring (K and V rows, 16 B per copy, L2
// evict-first); the chunks' page ids are copied into a small shared ring S chunks ahead, so page_size 1 streams
// like page_size 64. Per chunk: S = Q K^T (Q fragments from a shared Q tile staged one CTA piece ahead, or from
// global memory for a solo piece; K via ldmatrix), online softmax in fp32 with exp2 and the scale folded into log2
// units, O += P V (P re-packed from the S accumulators as the A operand, V via ldmatrix.trans). At the end of a
// CTA piece each warp parks its (m, l, O) in the ring stage it consumed last, per-row weights are reduced once and
// the warps merge in fixed order (deterministic), writing the output or a split-KV partial. Split sequences are
// merged in the same kernel after a grid-wide barrier (merge_split), their rows dealt to the CTAs by the plan.
//
// The version-2 variants (kindex.h) run in the same kernel compiled with kMod (kernel_kind picks it): per-row key
// ranges for the window and the causal limit of several tokens per request (their rows share the 16-row tile),
// the soft-cap on the scores, the sink and v_scale where a row's result is final, HND strides, RoPE (the staged Q tile
// and each K chunk rotated in shared memory, a solo piece's Q fragments as they load); and with kFp8 too, fp8 K/V
// copied at 1 byte an element and converted per chunk in shared memory. The plain instantiation (kMod false) is the
// kernel as it was before them.
#include <cooperative_groups.h>
#include <cub/block/block_scan.cuh>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/common/ptx.cuh"
#include "kernels/decode/paged_decode.hpp"

namespace kindex::decode::detail {
namespace {

using namespace kindex::ptx;

constexpr int kChunk = 16;  // tokens per warp per pipeline stage: one k-step of P V
constexpr int kRows = 16;   // MMA rows
constexpr int kTable = 64;  // sequence pieces staged in shared memory at a time
constexpr int kIndptrCache = 1024;  // kv_indptr / kv_last_page_len entries kept in shared memory from the count pass
// Pieces of 1..kSoloTokens tokens in a table batch of several are streamed whole by one warp, which writes the
// result from its registers (no cross-warp merge, no CTA barrier); so is a piece alone in its batch of at most
// kSoloAloneTokens (one chunk: one warp does all the work either way). Measured in v4/v5a (docs/perf/decode.md).
constexpr int kSoloTokens = 64;
// The online softmax rescales O and l only when a row's maximum grows by more than this (log2 units): P <= 2^8.
constexpr float kRescaleSlack = 8.f;
constexpr int kSoloAloneTokens = 16;
// The merge: a warp folds up to kMergeSegmentsPerWarp partials of a row with its loads in flight together; rows
// cut into more segments get several warps (the plan deals them).
constexpr int kMergeSegmentsPerWarp = 8;
constexpr int kPlanThreads = 512;
constexpr int kPlanMagic = 0x6b647031;  // "kdp1": the workspace holds a plan

// The device plan, at the start of the plan area of the workspace: a header, the segments' first page positions
// seg_begin[S + 1] (seg_begin[S] = N), and the sequences cut over several segments in batch order, each with the
// first of its merge tasks. A merge task is rows_per_task(ns) query-head rows of one cut sequence.
struct PlanHeader {
  int magic;  // kPlanMagic once written; the sizes below must match the run's
  int num_segments, batch, num_kv_indices, page_size;
  int num_split;  // cut sequences
  int num_tasks;  // merge tasks
  int pad;
};
struct SplitItem {
  int b, s0, s1;   // sequence, first and last segment holding a piece of it
  int task_begin;  // its first merge task
};
__host__ __device__ constexpr size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }
__host__ __device__ constexpr size_t seg_table_offset() { return sizeof(PlanHeader); }
__host__ __device__ constexpr size_t items_offset(long long segments) {
  return align_up(seg_table_offset() + size_t(segments + 1) * sizeof(int), 16);
}
// The plan kernel's scratch after the items: each sequence's first cost position (batch + 1 of them), where they do
// not fit in its shared memory (kPlanSmemPrefix).
__host__ __device__ constexpr size_t prefix_offset(long long segments, long long batch) {
  return align_up(items_offset(segments) + size_t(batch) * sizeof(SplitItem), 16);
}
constexpr long long kPlanSmemPrefix = 4096;  // sequences whose cost positions the plan keeps in shared memory

// Whole pages at the start of a sequence of `tokens` keys that none of its q_len query tokens sees under the window
// (window_left >= 0; else 0): the plan leaves them out of its costs and cuts, and the modified kernel out of its
// pieces, so they are never streamed. Pages, not tokens: the rest of the first page is masked per row.
__host__ __device__ __forceinline__ int pages_before_window(long long tokens, int q_len, int window_left,
                                                            int page_size) {
  if (window_left < 0 || tokens <= 0) return 0;
  const long long first_seen = tokens - q_len - window_left;  // the first key token 0 sees
  return first_seen > 0 ? int(first_seen / page_size) : 0;
}

// Warps that merge one row of a sequence cut into ns segments (a power of two up to the CTA's warps), and so the
// rows one merge task holds.
__host__ __device__ __forceinline__ int merge_warps_per_row(int ns, int warps) {
  const int want = (ns + kMergeSegmentsPerWarp - 1) / kMergeSegmentsPerWarp;
  int w = 1;
  while (w < want && w < warps) w *= 2;
  return w;
}

struct Args {
  const void* q;
  const void* k;
  const void* v;
  const int* indptr;
  const int* indices;
  const int* last_len;  // may be null: every last page is full
  void* out;
  float* lse;           // may be null
  float* part_o;        // [num_segments + batch][q_len * num_qo_heads][head_dim], normalised partial outputs
  float* part_lse;      // [num_segments + batch][q_len * num_qo_heads]
  const char* plan;     // the device plan (PlanHeader, seg_begin, SplitItem)
  int batch, num_qo_heads, num_kv_heads, group, page_size;
  int num_kv_indices;   // N
  int num_segments;
  float scale_log2;     // sm_scale * k_scale * log2(e)
  // The version-2 variants (kindex.h), read only by the modified kernel (kMod; launch_run picks it):
  float cap_pre;        // logits_soft_cap > 0: sm_scale * k_scale / cap (the logit in log2 units is
  float cap_post;       //   cap_post * tanh(q.k * cap_pre), cap_post = cap * log2(e)); 0: no soft-cap
  float out_scale;      // v_scale, applied to the final output only
  int window_left;      // < 0: no window
  const float* sinks;   // [num_qo_heads] natural-log logits, or null
  // K/V byte strides of the layout (NHD or HND; any kernel): a page, a token in a page, a KV head. A page is below
  // 2^31 bytes (launch_shape), so a copy's address is one 32 x 32-bit wide multiply plus a 32-bit in-page offset.
  unsigned page_bytes, token_bytes, head_bytes;
  int max_page;         // the last page id a copy may read, min(num_pages - 1, 2^31 - 1): bad ids are clamped to it
  PageDivider per_page;  // token index -> page (page_size)
  int q_len;            // query tokens per request: a request owns q_len * num_qo_heads rows of q / output / lse
  int rows;             // rows of a CTA's Q tile, group * q_len <= 16: row r is token r / group, head r % group
  int kv_e5m2;          // the fp8 kernel: K/V are e5m2 (else e4m3)
  int rope;             // pos_encoding ROPE_LLAMA: dimension pair i turns by rope_turns0 * 2^(-i * rope_log2_step)
  double rope_turns0;     //   per position: 1 / (2 pi rope_scale), and
  double rope_log2_step;  //   2 log2(rope_theta) / head_dim (fill_rope_table)
};

// Rows of the Q tile, rows per request, and the request row of tile row r (of the CTA of KV head kvh). The plain
// kernel's tile holds the group's heads of one token: r -> kvh * group + r, as before the variants.
template <bool kMod>
__device__ __forceinline__ int tile_rows(const Args& a) {
  return kMod ? a.rows : a.group;
}
template <bool kMod>
__device__ __forceinline__ int request_rows(const Args& a) {
  return kMod ? a.num_qo_heads * a.q_len : a.num_qo_heads;
}
template <bool kMod>
__device__ __forceinline__ int request_row(const Args& a, int kvh, int r) {
  return kMod ? (r / a.group) * a.num_qo_heads + kvh * a.group + r % a.group : kvh * a.group + r;
}

__device__ __forceinline__ const PlanHeader& plan_header(const Args& a) {
  return *reinterpret_cast<const PlanHeader*>(a.plan);
}
__device__ __forceinline__ const int* plan_segments(const Args& a) {
  return reinterpret_cast<const int*>(a.plan + seg_table_offset());
}
__device__ __forceinline__ const SplitItem* plan_items(const Args& a) {
  return reinterpret_cast<const SplitItem*>(a.plan + items_offset(a.num_segments));
}

struct Piece {
  int b;           // sequence
  int page_begin;  // first page position of the piece in kv_indices
  int tokens;      // 0: an empty sequence this segment owns (write zeros and -inf)
  int whole;       // the piece is the whole sequence: write the final output, not a partial
  int solo;        // 1: one warp streams the whole piece and writes its result alone (no CTA merge)
  int pos0;        // kMod: the request's first query token's position, counted from the piece's first token
};

constexpr int kNoChunk = 1 << 26;  // "first chunk" of a warp that has none in a solo piece (* kChunk > any solo piece)

// How a piece's chunks are dealt to the warps. A deal counter d (mod warps) runs over the pieces in order, the
// same in every warp: a CTA piece's chunk c goes to warp (d + c) % warps, then d advances by its chunk count
// (round-robin across pieces, so short pieces do not all land on warp 0); a solo piece goes whole to
// warp d % warps, then d advances by one.
template <int W>
struct Deal {
  static __device__ __forceinline__ int first(const Piece& p, int d, int warp) {
    if (p.solo) return d == warp ? 0 : kNoChunk;
    return (warp - d + W) % W;
  }
  static __device__ __forceinline__ int step(const Piece& p) { return p.solo ? 1 : W; }
  static __device__ __forceinline__ int advance(const Piece& p, int d) {
    if (p.solo) return (d + 1) % W;
    const int chunks = (p.tokens >> 4) + ((p.tokens & (kChunk - 1)) != 0);
    return (d + chunks % W) % W;
  }
};

// KB: bytes per K/V element in the ring, 2 (bf16/fp16), or 1 (fp8: each chunk is converted into a per-warp K/V
// tile pair of T before the MMAs read it).
template <int D, int S, int KB = 2>
struct Layout {
  // Warps per CTA: 8 (two per scheduler hide each other's MMA/softmax latency), 4 at head_dim 256, where the ring
  // would not fit otherwise.
  static constexpr int kWarps = D == 256 ? 4 : 8;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kChunksPerRow = D / 8;  // 16-byte pieces of a Q (and bf16/fp16 K/V) token row
  static constexpr int kKvChunksPerRow = D * KB / 16;  // 16-byte copies per K/V token row
  static constexpr int kTokPerPass = kKvChunksPerRow >= 32 ? 1 : 32 / kKvChunksPerRow;
  static constexpr int kTokPerLane = kChunk / kTokPerPass;
  static constexpr int kTileElems = kChunk * D;  // one K or V chunk
  static constexpr int kIdSlots = S + 1;         // page ids are fetched S chunks ahead of their K/V copies
  static constexpr int kQPieces = kRows * D / 8;                      // 16-byte pieces of the Q tile
  static constexpr int kQVec = (kQPieces + kThreads - 1) / kThreads;  // per thread
  static constexpr bool kQInRegisters = D <= 128;         // at 256 the O accumulators need the registers
  static_assert(kQPieces == kRows * kChunksPerRow && kQVec * kThreads >= kQPieces, "the threads cover the Q tile");
  // Shared memory, in this order.
  static constexpr int kRingBytes = kWarps * S * 2 * kTileElems * KB;
  static constexpr int kConvBytes = KB == 1 ? kWarps * 2 * kTileElems * 2 : 0;  // fp8: the converted K/V pairs
  // At the end of a piece a warp's (rows x D) fp32 state goes to the ring stage it consumed last (fp8: to its
  // converted pair), which no copy targets until the next piece starts: exactly K + V of 16 tokens in bf16/fp16
  // (16 rows x D x 4 B).
  static_assert(kRows * D * 4 == 2 * kTileElems * 2, "a ring stage holds one warp's merge state");
  // m, l, the merge weights (per warp and row), each warp's merge stage, and per-row lse
  static constexpr int kStatBytes = kWarps * kRows * 3 * 4 + kWarps * 4 + kRows * 4;
  static constexpr int kQBytes = kRows * D * 2;
  static constexpr int kIdBytes = kWarps * kIdSlots * kChunk * 2 * 4;  // page id and in-page offset
  static constexpr int kTableBytes = kTable * int(sizeof(Piece));
  static constexpr int kCacheBytes = (2 * kIndptrCache + 1) * 4;
  static constexpr int kSmemBytes =
      kRingBytes + kConvBytes + kStatBytes + kQBytes + kIdBytes + kTableBytes + kCacheBytes;
  static_assert(kSmemBytes <= 227 * 1024, "more shared memory than an sm_90 CTA may have");
  // The modified kernel's RoPE table (D / 2 frequencies, a float pair each) past the rest, so the plain kernel's
  // layout stays as it was.
  static constexpr int kRopeOffset = (kSmemBytes + 15) / 16 * 16;
  static constexpr int kModSmemBytes = kRopeOffset + D / 2 * 8;
  static_assert(kModSmemBytes <= 227 * 1024, "more shared memory than an sm_90 CTA may have");
};

// Element offset of (token row t, 16-byte chunk c) in a [16][D] tile: chunks XOR-swizzled by the row so the 8
// row addresses of one ldmatrix hit 8 different bank groups.
template <int D>
__device__ __forceinline__ int tile_offset(int t, int c) {
  return t * D + ((c ^ (t & 7)) << 3);
}

// Float offset of (row, column) in a warp's [16][D] fp32 merge state: float pairs XOR-swizzled by the row so the
// warp's 8-byte stores of 8 rows x 4 column pairs hit distinct banks.
template <int D>
__device__ __forceinline__ int merge_offset(int row, int col) {
  return row * D + ((((col >> 1) ^ ((row & 7) << 2))) << 1) + (col & 1);
}

__device__ __forceinline__ int clampi(int x, int lo, int hi) { return min(max(x, lo), hi); }

// Sequence b's page range [start, end) in kv_indices, clamped to [0, N] so that a malformed indptr can only
// give wrong numbers, never an out-of-bounds read (validation mode reports it instead).
__device__ __forceinline__ void seq_range(const Args& a, int b, int& start, int& end) {
  start = clampi(__ldg(a.indptr + b), 0, a.num_kv_indices);
  end = clampi(__ldg(a.indptr + b + 1), start, a.num_kv_indices);
}

// ---- RoPE (pos_encoding ROPE_LLAMA) ----
// FlashInfer 0.7.2's semantics, read in its sources (include/flashinfer/...): BatchDecodeWithPagedKVCacheWrapper takes
// rope_scale / rope_theta at plan() (None: 1 and 1e4, flashinfer/decode.py) and passes their reciprocals
// (attention/default_decode_params.cuh:180-181). The CUDA-core decode (attention/decode.cuh:456-476) gives
// dimension i the frequency rope_rcp_scale * rope_rcp_theta^(2 (i mod D/2) / D) (__powf) and rotates q at
// kv_len - 1 (no q_rope_offset in the wrapper), in fp32 from its stored values; each key is rotated in fp32 as it
// is read from shared memory (decode.cuh:73-76), from the cache's stored values (fp8 included: k_scale is folded
// into sm_scale, which multiplies the dot product after the rotation, decode.cuh:81-95), at its index in the
// sequence (kv_idx_base = chunk_start + ..., rope_pos_offset NULL: csrc/batch_decode.cu:193-199). The rotation
// (pos_enc.cuh:105-125) is Llama's rotate-half over the whole head: for pair (i, i + D/2), angle = pos * freq_i,
// x_i' = x_i cos - x_{i+D/2} sin, x_{i+D/2}' = x_{i+D/2} cos + x_i sin, with __sincosf of the fp32 angle. The
// tensor-core path (several query tokens) puts token j of qo_len at kv_len - qo_len + j (attention/prefill.cuh:
// 1091-1095) and rounds the rotated q and k back to 16 bits in shared memory (prefill.cuh:469-485).
// Here: the same definition, q and k rotated in fp32 and rounded once to T (the MMAs' inputs, as the tensor-core
// path; fp16 with an fp8 cache), but the angle kept exact: the fp32 angle pos * freq is off by up to half an ulp of pos (2^-7 rad at 128k),
// and __sincosf's own reduction of large arguments is no better. Each pair's frequency, in turns per position, is
// a float pair (hi + lo, from fp64 once per CTA); pos * hi is split exactly into its rounded value and error (fma),
// the integer turns dropped, and the remainder (|r| <= 1/2 turn) goes to __sincosf, whose error there is ~2^-21.
// So the angle is good to ~1e-6 rad for any position below 2^24 (positions are fp32, as FlashInfer's are).

// Table slot of pair i: [i % 8][i / 8], so the lanes of a warp, each on its own 8 pairs, read consecutive slots.
template <int D>
__device__ __forceinline__ int rope_slot(int i) {
  return (i % 8) * (D / 16) + i / 8;
}

// Pair i's frequency in turns per position, 1 / (2 pi rope_scale rope_theta^(2i/D)), as hi + lo floats (fp64 once
// per CTA; read only by the modified kernel after the barriers that follow).
template <int D, int kThreads>
__device__ __forceinline__ void fill_rope_table(const Args& a, float2* table) {
  for (int i = threadIdx.x; i < D / 2; i += kThreads) {
    const double f = a.rope_turns0 * exp2(-double(i) * a.rope_log2_step);
    const float hi = float(f);
    table[rope_slot<D>(i)] = make_float2(hi, float(f - double(hi)));
  }
}

// Rotates (x, y) = (x_i, x_{i+D/2}) by the angle of position pos (an integer < 2^24) at frequency f (turns).
__device__ __forceinline__ void rope_rotate(float& x, float& y, float2 f, float pos) {
  const float t = __fmul_rn(pos, f.x);  // not contracted: e is exactly its rounding error
  const float e = fmaf(pos, f.x, -t);
  const float r = (t - rintf(t)) + fmaf(pos, f.y, e);  // pos * f mod 1, |r| <= 1/2 (+ 2^-24)
  float sn, cs;
  __sincosf(6.283185307179586f * r, &sn, &cs);
  const float x0 = x;
  x = x0 * cs - y * sn;
  y = y * cs + x0 * sn;
}

template <class T>
__device__ __forceinline__ float2 unpack2(uint32_t bits) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    __nv_bfloat162 h;
    memcpy(&h, &bits, 4);
    return __bfloat1622float2(h);
  } else {
    __half2 h;
    memcpy(&h, &bits, 4);
    return __half22float2(h);
  }
}

// A pair of O values as a pair of T (the fp8 kernel's queries, bf16 -> fp16: exact for magnitudes 2^-14 .. 65504;
// larger ones saturate at +-65504 rather than turn into infinities; NaN stays NaN).
template <class O, class T>
__device__ __forceinline__ uint32_t convert2(uint32_t bits) {
  if constexpr (std::is_same_v<O, T>) {
    return bits;
  } else {
    float2 f = unpack2<O>(bits);
    if constexpr (std::is_same_v<T, __half>) {
      f.x = fabsf(f.x) > 65504.f ? copysignf(65504.f, f.x) : f.x;
      f.y = fabsf(f.y) > 65504.f ? copysignf(65504.f, f.y) : f.y;
    }
    return Mma<T>::pack(f.x, f.y);
  }
}

// Two 16-byte pieces of a row at position pos: x dimensions 8c .. 8c + 7, y their partners D/2 along; rotated in
// fp32 and rounded once to T.
template <int D, class T>
__device__ __forceinline__ void rope_pieces(uint4& x, uint4& y, const float2* table, int c, float pos) {
  uint32_t xs[4] = {x.x, x.y, x.z, x.w}, ys[4] = {y.x, y.y, y.z, y.w};
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    float2 lo = unpack2<T>(xs[w]), hi = unpack2<T>(ys[w]);
    rope_rotate(lo.x, hi.x, table[rope_slot<D>(8 * c + 2 * w)], pos);
    rope_rotate(lo.y, hi.y, table[rope_slot<D>(8 * c + 2 * w + 1)], pos);
    xs[w] = Mma<T>::pack(lo.x, lo.y);
    ys[w] = Mma<T>::pack(hi.x, hi.y);
  }
  x = make_uint4(xs[0], xs[1], xs[2], xs[3]);
  y = make_uint4(ys[0], ys[1], ys[2], ys[3]);
}

// The CTA's Q tile ([16][D] of T, swizzled as tile_offset) rotated in place by all its threads, row r at position
// pos0 + r / group. Thread i takes the pieces c = i % (D/16) of the first half (and their partners D/2 along) of
// every (kThreads / (D/16))-th row. In shared memory once staged, with a barrier after: done in registers as Q is
// staged, the rotation spilled at head_dim 256.
template <int D, int kThreads, class T>
__device__ __forceinline__ void rope_q_tile(T* tile, const float2* table, float pos0, int group) {
  constexpr int kHalf = D / 16;  // 16-byte pieces in half a row
  const int c = threadIdx.x % kHalf;
#pragma unroll 1
  for (int u = threadIdx.x; u < kRows * kHalf; u += kThreads) {
    const int t = u / kHalf;
    uint4* lo = reinterpret_cast<uint4*>(tile + tile_offset<D>(t, c));
    uint4* hi = reinterpret_cast<uint4*>(tile + tile_offset<D>(t, c + kHalf));
    uint4 x = *lo, y = *hi;
    rope_pieces<D, T>(x, y, table, c, pos0 + float(t / group));
    *lo = x;
    *hi = y;
  }
}

// A warp's K tile ([16][D] of T, swizzled as tile_offset) rotated in place, token t at position pos0 + t. Lane l takes
// the pieces c = l % (D/16) of the first half (and their partners) of every (32 / (D/16))-th token: its frequencies
// are the same for all of them.
template <int D, class T>
__device__ __forceinline__ void rope_keys(T* tile, const float2* table, float pos0, int lane) {
  constexpr int kHalf = D / 16;
  const int c = lane % kHalf;
#pragma unroll 1  // a loop, not D / 32 copies: at head_dim 256 the registers are the O accumulators
  for (int u = lane; u < kChunk * kHalf; u += 32) {
    const int t = u / kHalf;
    uint4* lo = reinterpret_cast<uint4*>(tile + tile_offset<D>(t, c));
    uint4* hi = reinterpret_cast<uint4*>(tile + tile_offset<D>(t, c + kHalf));
    uint4 x = *lo, y = *hi;
    rope_pieces<D, T>(x, y, table, c, pos0 + float(t));
    *lo = x;
    *hi = y;
  }
}

// The per-warp producer walks this warp's chunks (piece k, chunk c = warp, warp + kWarps, ...) with two cursors: one
// copies the chunks' page ids (and stores the in-page offsets) into a small shared ring S chunks ahead, the other
// issues the K/V copies of a chunk from ids that have long arrived. So a warp keeps S - 1 chunks in flight and
// never waits on a page id, even at page_size 1 where every token has its own.
template <int D, int S, class T, bool kPlain, bool kMod, class KV = T>
struct Producer {
  using L = Layout<D, S, int(sizeof(KV))>;
  using Dl = Deal<L::kWarps>;
  int k, c, seq, dk;     // next chunk to issue, its number in this warp's sequence of chunks, piece k's deal
  int fk, fc, fseq, fdk;  // next chunk whose ids to fetch
  int* ids;          // this warp's [kIdSlots][kChunk] page ids
  int* offs;         // this warp's [kIdSlots][kChunk] in-page offsets, -1 past the piece's end
  uint64_t policy;   // L2 policy of the K/V copies (unused when kPlain: copies without a cache-policy operand)

  static __device__ __forceinline__ void next(const Args& a, const Piece* table, int n, int warp, int& k, int& c,
                                              int& d) {
    while (k < n && c * kChunk >= table[k].tokens) {
      d = Dl::advance(table[k], d);
      ++k;
      if (k < n) c = Dl::first(table[k], d, warp);
    }
  }
  __device__ __forceinline__ void fetch(const Args& a, const Piece* table, int n, int warp, int lane) {
    if (fk >= n) return;
    if (lane < kChunk) {
      const Piece& p = table[fk];
      const int slot = (fseq % L::kIdSlots) * kChunk + lane;
      const int t = fc * kChunk + lane;
      int off = -1;
      if (t < p.tokens) {
        const int page = int(a.per_page.quotient(unsigned(t)));
        off = t - page * a.page_size;
        cp_async4(uint32_t(__cvta_generic_to_shared(ids + slot)), a.indices + p.page_begin + page);
      }
      offs[slot] = off;
    }
    ++fseq;
    fc += Dl::step(table[fk]);
    next(a, table, n, warp, fk, fc, fdk);
  }
  // Fetches the ids of the first S chunks and waits for them: the one id round trip a batch of pieces pays.
  __device__ __forceinline__ void start(const Args& a, const Piece* table, int n, int warp, int lane, int d0) {
    k = fk = 0;
    dk = fdk = d0;
    c = fc = n > 0 ? Dl::first(table[0], d0, warp) : 0;
    seq = fseq = 0;
    next(a, table, n, warp, k, c, dk);
    next(a, table, n, warp, fk, fc, fdk);
#pragma unroll
    for (int i = 0; i < S; ++i) fetch(a, table, n, warp, lane);
    cp_async_commit();
    cp_async_wait<0>();
    __syncwarp();
  }
  // Issues the next chunk's K/V copies into its ring stage (nothing past the end), fetches the ids S chunks
  // further, and commits one group either way.
  __device__ __forceinline__ void issue(const Args& a, const Piece* table, int n, KV* ring, int warp, int lane,
                                        int kvh) {
    __syncwarp();  // every lane is done with the id slot the fetch below may overwrite
    if (k < n) {
      const int stage = seq % S;
      const int slot = (seq % L::kIdSlots) * kChunk;
      KV* kt = ring + ((warp * S + stage) * 2) * L::kTileElems;
      KV* vt = kt + L::kTileElems;
      const uint32_t k_smem = uint32_t(__cvta_generic_to_shared(kt));
      const uint32_t v_smem = uint32_t(__cvta_generic_to_shared(vt));
      const int chunk = lane % L::kKvChunksPerRow;
      // Token lane % 16's row in the cache, computed once per chunk by a lane each and shuffled to the lanes copying
      // it (not once per lane and pass): its byte offset from the base, K and V alike, a multiple of 16; bit 0 set
      // past the piece's end (zero-filled).
      unsigned long long row = 1;
      {
        const int toff = offs[slot + lane % kChunk];
        const unsigned page = min(unsigned(max(ids[slot + lane % kChunk], 0)), unsigned(a.max_page));  // in bounds
        if (toff >= 0) row = (unsigned long long)page * a.page_bytes + unsigned(toff) * a.token_bytes;
      }
      // This lane's 16 bytes of a row: the same in every pass and chunk (inside one page).
      const unsigned lane_bytes = unsigned(kvh) * a.head_bytes + unsigned(chunk) * 16u;
      const char* k_lane = static_cast<const char*>(a.k) + lane_bytes;
      const char* v_lane = static_cast<const char*>(a.v) + lane_bytes;
#pragma unroll
      for (int i = 0; i < L::kTokPerLane; ++i) {
        const int t = lane / L::kKvChunksPerRow + i * L::kTokPerPass;
        const unsigned long long r = __shfl_sync(0xffffffffu, row, t);
        const bool valid = (r & 1) == 0;
        const unsigned long long at = r & ~1ull;
        // fp8 tiles are [16][D] bytes, unswizzled (the conversion, not ldmatrix, reads them)
        const int so = sizeof(KV) == 1 ? t * D + chunk * 16 : tile_offset<D>(t, chunk) * 2;
        if constexpr (kPlain) {
          cp_async16(k_smem + so, k_lane + at, valid);
          cp_async16(v_smem + so, v_lane + at, valid);
        } else {
          cp_async16(k_smem + so, k_lane + at, valid, policy);
          cp_async16(v_smem + so, v_lane + at, valid, policy);
        }
      }
      ++seq;
      c += Dl::step(table[k]);
      next(a, table, n, warp, k, c, dk);
      fetch(a, table, n, warp, lane);
    }
    cp_async_commit();
  }
};

// The Q tile of one sequence (its group's rows, zeros below) moves global -> registers -> shared memory one piece
// ahead, so a piece never waits on its Q. (RoPE rotates the tile in shared memory once stored: rope_q_tile.) Q is
// read as O and stored as T.
template <int D, int S, class T, bool kMod, class O = T>
struct QStage {
  using L = Layout<D, S>;
  uint4 v[L::kQVec];
  __device__ __forceinline__ void load(const Args& a, int b, int kvh) {
#pragma unroll
    for (int i = 0; i < L::kQVec; ++i) {
      const int idx = threadIdx.x + i * L::kThreads, row = idx / L::kChunksPerRow, col = idx % L::kChunksPerRow;
      v[i] = make_uint4(0, 0, 0, 0);
      if constexpr (kMod) {
        if (idx < L::kQPieces && row < a.rows)
          v[i] = __ldg(reinterpret_cast<const uint4*>(
                           static_cast<const O*>(a.q) +
                           ((long long)b * request_rows<kMod>(a) + request_row<kMod>(a, kvh, row)) * D) + col);
      } else {
        if (idx < L::kQPieces && row < a.group)
          v[i] = __ldg(reinterpret_cast<const uint4*>(static_cast<const O*>(a.q) +
                                                      ((long long)b * a.num_qo_heads + kvh * a.group + row) * D) + col);
      }
    }
  }
  __device__ __forceinline__ void store(T* q_tile) const {
#pragma unroll
    for (int i = 0; i < L::kQVec; ++i) {
      const int idx = threadIdx.x + i * L::kThreads, row = idx / L::kChunksPerRow, col = idx % L::kChunksPerRow;
      if (idx < L::kQPieces)
        *reinterpret_cast<uint4*>(q_tile + tile_offset<D>(row, col)) =
            make_uint4(convert2<O, T>(v[i].x), convert2<O, T>(v[i].y), convert2<O, T>(v[i].z), convert2<O, T>(v[i].w));
    }
  }
};

// A fragment of Q for k-step kk from the shared Q tile.
template <int D>
__device__ __forceinline__ void load_q_fragment(uint32_t q_smem, int kk, int lane, uint32_t (&f)[4]) {
  const int row = (lane & 7) + ((lane >> 3) & 1) * 8, col = kk * 2 + (lane >> 4);
  ldmatrix_x4(f, q_smem + tile_offset<D>(row, col) * 2);
}

// The same fragments straight from global memory (a solo piece; rows >= group are zero). kMod with RoPE: rotated
// at the rows' positions (request token 0 at pos0), each lane holding both halves of its pairs (k-steps kk and
// kk + D / 32). Q is read as O, the fragments are T.
template <int D, class T, bool kMod, class O = T>
__device__ __forceinline__ void load_q_global(const Args& a, int b, int kvh, int lane, uint32_t (&f)[D / 16][4],
                                              const float2* rope_table, float pos0) {
  const int g = lane / 4, t4 = lane % 4;
  const uint32_t* r0;
  const uint32_t* r1;
  bool v0, v1;
  if constexpr (kMod) {  // rows g and g + 8 need not be 8 rows apart in q
    const O* q = static_cast<const O*>(a.q) + (long long)b * request_rows<kMod>(a) * D;
    r0 = reinterpret_cast<const uint32_t*>(q + (long long)request_row<kMod>(a, kvh, g) * D);
    r1 = reinterpret_cast<const uint32_t*>(q + (long long)request_row<kMod>(a, kvh, g + 8) * D);
    v0 = g < a.rows;
    v1 = g + 8 < a.rows;
  } else {
    r0 = reinterpret_cast<const uint32_t*>(static_cast<const O*>(a.q) +
                                           ((long long)b * a.num_qo_heads + kvh * a.group + g) * D);
    r1 = r0 + 8 * D / 2;
    v0 = g < a.group;
    v1 = g + 8 < a.group;
  }
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    f[kk][0] = v0 ? convert2<O, T>(__ldg(r0 + kk * 8 + t4)) : 0u;
    f[kk][1] = v1 ? convert2<O, T>(__ldg(r1 + kk * 8 + t4)) : 0u;
    f[kk][2] = v0 ? convert2<O, T>(__ldg(r0 + kk * 8 + 4 + t4)) : 0u;
    f[kk][3] = v1 ? convert2<O, T>(__ldg(r1 + kk * 8 + 4 + t4)) : 0u;
  }
  if constexpr (kMod) {
    if (a.rope) {
      // Register r of k-step kk: row g (r even) or g + 8, columns kk * 16 + 2 * t4 (+ 8 for r >= 2), + 1.
      const float pos[2] = {pos0 + float(min(g / a.group, a.q_len - 1)),
                            pos0 + float(min((g + 8) / a.group, a.q_len - 1))};
#pragma unroll
      for (int kk = 0; kk < D / 32; ++kk)
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const int col = kk * 16 + 2 * t4 + (r >> 1) * 8;
          float2 lo = unpack2<T>(f[kk][r]), hi = unpack2<T>(f[kk + D / 32][r]);
          rope_rotate(lo.x, hi.x, rope_table[rope_slot<D>(col)], pos[r & 1]);
          rope_rotate(lo.y, hi.y, rope_table[rope_slot<D>(col + 1)], pos[r & 1]);
          f[kk][r] = Mma<T>::pack(lo.x, lo.y);
          f[kk + D / 32][r] = Mma<T>::pack(hi.x, hi.y);
        }
    }
  }
}

// The CTA's shared memory, carved in Layout's order.
template <int D, int S, class T, int KB = 2>
struct Shared {
  using L = Layout<D, S, KB>;
  using KV = std::conditional_t<KB == 1, uint8_t, T>;
  KV* ring;            // [warp][stage][K | V][16][D]
  T* conv;             // fp8: [warp][K | V][16][D], each chunk converted to T
  float* merge_m;      // [warp][row]
  float* merge_l;      // [warp][row]
  float* merge_w;      // [warp][row]: the warp's weight in the row's merge
  float* merge_lse;    // [row]
  int* merge_stage;    // [warp]: where its state went
  T* q_tile;           // [16][D], swizzled like a K tile
  int* id_ring;        // [warp][kIdSlots][kChunk]
  int* off_ring;       // [warp][kIdSlots][kChunk]
  Piece* table;        // [kTable]
  int* indptr_cache;   // [kIndptrCache + 1]
  int* last_cache;     // [kIndptrCache]
  float2* rope;        // the modified kernel's RoPE table [D / 2] (rope_slot, fill_rope_table)
  __device__ __forceinline__ explicit Shared(unsigned char* smem) {
    ring = reinterpret_cast<KV*>(smem);
    conv = reinterpret_cast<T*>(smem + L::kRingBytes);
    merge_m = reinterpret_cast<float*>(smem + L::kRingBytes + L::kConvBytes);
    merge_l = merge_m + L::kWarps * kRows;
    merge_w = merge_l + L::kWarps * kRows;
    merge_lse = merge_w + L::kWarps * kRows;
    merge_stage = reinterpret_cast<int*>(merge_lse + kRows);
    q_tile = reinterpret_cast<T*>(merge_stage + L::kWarps);
    id_ring = reinterpret_cast<int*>(q_tile + kRows * D);
    off_ring = id_ring + L::kWarps * L::kIdSlots * kChunk;
    table = reinterpret_cast<Piece*>(off_ring + L::kWarps * L::kIdSlots * kChunk);
    indptr_cache = reinterpret_cast<int*>(table + kTable);
    last_cache = indptr_cache + kIndptrCache + 1;
    rope = reinterpret_cast<float2*>(smem + L::kRopeOffset);
  }
  // The K tile the MMAs of warp `warp` read for ring stage `stage` (the V tile follows), also its merge area: the
  // ring stage itself, or (fp8) the warp's converted pair.
  __device__ __forceinline__ T* k_tile(int warp, int stage) const {
    if constexpr (KB == 1) return conv + warp * 2 * L::kTileElems;
    else return ring + ((warp * S + stage) * 2) * L::kTileElems;
  }
  // fp8: ring stage `stage` of warp `warp`, as copied: its K tile, the V tile follows.
  __device__ __forceinline__ const KV* kv_stage(int warp, int stage) const {
    return ring + ((warp * S + stage) * 2) * L::kTileElems;
  }
};

// RoPE: the sequence positions of a piece's first key and of its request's query token 0 (kv_len - q_len), from
// its table entry and the sequence's first page (in shared memory from the count pass for the first kIndptrCache
// sequences, clamped as build_table clamps it).
template <int D, int S, class T, int KB>
__device__ __forceinline__ float2 rope_positions(const Args& a, const Shared<D, S, T, KB>& sh, const Piece& piece) {
  const int start = clampi(piece.b < kIndptrCache ? sh.indptr_cache[piece.b] : __ldg(a.indptr + piece.b), 0,
                           a.num_kv_indices);
  const long long first = (long long)(piece.page_begin - start) * a.page_size;
  return make_float2(float(first), float(first + piece.pos0));
}

// A warp's running softmax state for its 16 rows: in fragment layout, row g in m[0]/l[0]/o[.][0..1], row g + 8 in
// m[1]/l[1]/o[.][2..3] (l is this lane's partial sum until reduce_l).
template <int D>
struct WarpState {
  float m[2], l[2];
  float o[D / 8][4];
  __device__ __forceinline__ void reset() {
    const float neg_inf = -__int_as_float(0x7f800000);
    m[0] = m[1] = neg_inf;
    l[0] = l[1] = 0.f;
#pragma unroll
    for (int j = 0; j < D / 8; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
  }
  // The row sums over the four lanes that hold a row's columns.
  __device__ __forceinline__ void reduce_l() {
    l[0] += __shfl_xor_sync(0xffffffffu, l[0], 1);
    l[0] += __shfl_xor_sync(0xffffffffu, l[0], 2);
    l[1] += __shfl_xor_sync(0xffffffffu, l[1], 1);
    l[1] += __shfl_xor_sync(0xffffffffu, l[1], 2);
  }
};

// Stage 1 of a segment: the range [b_begin, b_end) of sequences touching it. Those entirely before it are a prefix
// (ended by seg_begin, started before it); those starting at or after seg_end a suffix. Empty sequences are owned by
// the segment holding their position (the last segment owns position N). Counted in one pass of independent loads
// rather than a binary search of dependent ones; the first entries stay in shared memory for the table stage.
template <int D, int S, class T, int KB>
__device__ __forceinline__ int2 find_sequences(const Args& a, const Shared<D, S, T, KB>& sh, int seg_begin, int seg_end,
                                               bool last_seg, int* counts) {
  using L = Layout<D, S>;
  const int lane = threadIdx.x % 32;
  if (threadIdx.x < 2) counts[threadIdx.x] = 0;
  __syncthreads();
  int before = 0, started = 0;
  for (int b = threadIdx.x; b < a.batch; b += L::kThreads) {
    const int s = __ldg(a.indptr + b), e = __ldg(a.indptr + b + 1);
    const int last = a.last_len ? __ldg(a.last_len + b) : a.page_size;
    before += (e <= seg_begin && s < seg_begin);
    started += s < seg_end;
    if (b < kIndptrCache) {
      sh.indptr_cache[b] = s;
      sh.last_cache[b] = last;
      if (b + 1 == a.batch || b + 1 == kIndptrCache) sh.indptr_cache[b + 1] = e;
    }
  }
#pragma unroll
  for (int o = 16; o; o >>= 1) {
    before += __shfl_xor_sync(0xffffffffu, before, o);
    started += __shfl_xor_sync(0xffffffffu, started, o);
  }
  if (lane == 0) {
    atomicAdd(&counts[0], before);
    atomicAdd(&counts[1], started);
  }
  __syncthreads();
  const int b_begin = counts[0];
  return make_int2(b_begin, max(b_begin, last_seg ? a.batch : counts[1]));
}

// Stage 2, per table batch of up to kTable sequences: each one's piece of this segment (its page range, tokens, and
// whether one warp streams it alone), and cta_mask: bit k set when piece k is a CTA piece.
template <bool kMod, int D, int S, class T, int KB>
__device__ __forceinline__ void build_table(const Args& a, const Shared<D, S, T, KB>& sh, int tb, int n, int seg_begin,
                                            int seg_end, int solo_tokens, int solo_alone_tokens,
                                            unsigned* cta_mask) {
  if (threadIdx.x >= kTable) return;
  bool cta_piece = false;
  if (threadIdx.x < n) {
    const int b = tb + threadIdx.x;
    int start, end, last;
    if (b < kIndptrCache) {
      start = clampi(sh.indptr_cache[b], 0, a.num_kv_indices);
      end = clampi(sh.indptr_cache[b + 1], start, a.num_kv_indices);
      last = sh.last_cache[b];
    } else {
      seq_range(a, b, start, end);
      last = a.last_len ? __ldg(a.last_len + b) : a.page_size;
    }
    last = clampi(last, 1, a.page_size);
    const int seq_start = start;
    long long kv_len = 0;
    if constexpr (kMod) {  // the pages before the window are not the sequence's as far as the pieces go (the plan's)
      if (end > start) {
        kv_len = (long long)(end - start - 1) * a.page_size + last;
        start += pages_before_window(kv_len, a.q_len, a.window_left, a.page_size);
      }
    }
    const int pb = max(start, seg_begin), pe = min(end, seg_end);
    Piece p{b, pb, 0, start >= seg_begin && end <= seg_end, 0, 0};
    if constexpr (kMod) {  // here once per piece, not from global memory by every warp in piece_bounds
      const long long pos0 = kv_len - a.q_len - (long long)(pb - seq_start) * a.page_size;
      p.pos0 = int(min(max(pos0, -(1ll << 30)), 1ll << 30));
    }
    if (pe > pb) p.tokens = (pe - pb - 1) * a.page_size + (pe == end ? last : a.page_size);
    else if (start != end) p.whole = -1;  // nothing of it lies here: malformed indptr, or pages before the window
    // Solo where the segment holds several pieces; alone, a piece is better streamed by all warps unless it is so
    // short (one chunk) that one warp does all the work anyway: then solo saves the CTA merge.
    p.solo = p.tokens > 0 && p.tokens <= (n > 1 ? solo_tokens : solo_alone_tokens) && p.whole >= 0;
    cta_piece = !p.solo;
    sh.table[threadIdx.x] = p;
  }
  const unsigned mask = __ballot_sync(0xffffffffu, cta_piece);
  if (threadIdx.x % 32 == 0) cta_mask[threadIdx.x / 32] = mask;
}

// The Q rows of a table batch's pieces, into L2 while the ids arrive: the Q loads then hit it.
// (kMod: the first token's rows only: a hint.)
template <int D, int S, class T, bool kMod>
__device__ __forceinline__ void prefetch_q_rows(const Args& a, int tb, int n, int kvh) {
  const int lines = (a.group * D * int(sizeof(T)) + 127) / 128;  // per piece
  for (int i = threadIdx.x; i < n * lines; i += Layout<D, S>::kThreads) {
    const int piece = i / lines, line = i % lines;
    const char* row = reinterpret_cast<const char*>(
        static_cast<const T*>(a.q) + ((long long)(tb + piece) * request_rows<kMod>(a) + kvh * a.group) * D);
    prefetch_l2(row + line * 128);
  }
}

// Per chunk, step 1: S += Q K^T over the chunk's 16 tokens (two n-blocks of 8; s comes in zeroed). With Q in registers, even and odd
// k-steps accumulate separately: two short dependent MMA chains instead of one long one.
template <int D, int S, class T>
__device__ __forceinline__ void compute_qk(uint32_t (&qf)[Layout<D, S>::kQInRegisters ? D / 16 : 1][4],
                                           uint32_t k_smem, uint32_t q_smem, int lane, float (&s)[2][4]) {
  using Tr = Mma<T>;
  const int tt = (lane >> 4) * 8 + (lane & 7), hi = (lane >> 3) & 1;
  if constexpr (Layout<D, S>::kQInRegisters) {
    float s2[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t b[4];
      ldmatrix_x4(b, k_smem + tile_offset<D>(tt, kk * 2 + hi) * 2);
      float(&acc)[2][4] = kk % 2 ? s2 : s;
      Tr::run(acc[0], qf[kk], b[0], b[1]);
      Tr::run(acc[1], qf[kk], b[2], b[3]);
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      s[0][e] += s2[0][e];
      s[1][e] += s2[1][e];
    }
  } else {
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t b[4];
      ldmatrix_x4(b, k_smem + tile_offset<D>(tt, kk * 2 + hi) * 2);
      load_q_fragment<D>(q_smem, kk, lane, qf[0]);
      Tr::run(s[0], qf[0], b[0], b[1]);
      Tr::run(s[1], qf[0], b[2], b[3]);
    }
  }
}

// What the modified kernel does to a chunk's scores: the soft-cap (Args::cap_pre / cap_post), and the tokens
// [lo, hi) that rows g (index 0) and g + 8 (index 1) see (the window and the causal limit), relative to the chunk.
struct ScoreMod {
  float cap_pre = 0, cap_post = 0;
  int lo[2] = {0, 0}, hi[2] = {0x7fffffff, 0x7fffffff};
};

// Per chunk, step 2: the online softmax in log2 units (tokens at or past `valid` masked; kMod: also those before
// mod.lo and from mod.hi on, and the soft-cap): new row maxima, O and l rescaled, and P returned packed as the A
// fragment of P V (the S accumulator layout already is, k = token).
template <int D, class T, bool kMod = false>
__device__ __forceinline__ void update_local_state(WarpState<D>& st, const float (&s)[2][4], int valid,
                                                   float scale_log2, int t4, uint32_t (&pa)[4],
                                                   const ScoreMod& mod = {}) {
  using Tr = Mma<T>;
  const float neg_inf = -__int_as_float(0x7f800000);
  float x[2][4];
#pragma unroll
  for (int nb = 0; nb < 2; ++nb)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int tok = nb * 8 + 2 * t4 + (e & 1);
      if constexpr (kMod) {
        // tanhf, not tanh.approx: its ~2^-11 error, times a cap of 30-50, would move the weights by percents.
        const float logit = mod.cap_pre > 0 ? mod.cap_post * tanhf(s[nb][e] * mod.cap_pre) : s[nb][e] * scale_log2;
        x[nb][e] = tok >= mod.lo[e >> 1] && tok < min(valid, mod.hi[e >> 1]) ? logit : neg_inf;
      } else {
        x[nb][e] = tok < valid ? s[nb][e] * scale_log2 : neg_inf;
      }
    }
  float mx0 = fmaxf(fmaxf(x[0][0], x[0][1]), fmaxf(x[1][0], x[1][1]));
  float mx1 = fmaxf(fmaxf(x[0][2], x[0][3]), fmaxf(x[1][2], x[1][3]));
  mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
  mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
  mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
  mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
  // Lazy rescaling (as FlashAttention-4 does): a row's reference maximum m moves only when the chunk's maximum
  // exceeds it by more than kRescaleSlack (log2 units), the first chunk included (m = -inf); otherwise P = 2^(x - m)
  // stays <= 2^kRescaleSlack, exact enough in fp32 and in T, and O and l keep their scale. Decided for the whole warp,
  // so the D / 2 multiplies of O are skipped together. lse = m + log2(l) and the merges hold for any such m.
  if (__any_sync(0xffffffffu, mx0 > st.m[0] + kRescaleSlack || mx1 > st.m[1] + kRescaleSlack)) {
    const float mn0 = fmaxf(st.m[0], mx0), mn1 = fmaxf(st.m[1], mx1);
    // Finite in the plain kernel: a chunk has a valid token. The modified kernel's rows may have seen none yet (the
    // window): they subtract 0 instead, so -inf - -inf gives no NaN and their p, l and O stay 0.
    float b0 = mn0, b1 = mn1;
    if constexpr (kMod) {
      b0 = mn0 == neg_inf ? 0.f : mn0;
      b1 = mn1 == neg_inf ? 0.f : mn1;
    }
    const float al0 = fast_exp2(st.m[0] - b0), al1 = fast_exp2(st.m[1] - b1);
    st.m[0] = mn0;
    st.m[1] = mn1;
    st.l[0] *= al0;
    st.l[1] *= al1;
#pragma unroll
    for (int j = 0; j < D / 8; ++j) {
      st.o[j][0] *= al0;
      st.o[j][1] *= al0;
      st.o[j][2] *= al1;
      st.o[j][3] *= al1;
    }
  }
  float b0 = st.m[0], b1 = st.m[1];
  if constexpr (kMod) {
    b0 = b0 == neg_inf ? 0.f : b0;
    b1 = b1 == neg_inf ? 0.f : b1;
  }
  float p[2][4];
#pragma unroll
  for (int nb = 0; nb < 2; ++nb) {
    p[nb][0] = fast_exp2(x[nb][0] - b0);
    p[nb][1] = fast_exp2(x[nb][1] - b0);
    p[nb][2] = fast_exp2(x[nb][2] - b1);
    p[nb][3] = fast_exp2(x[nb][3] - b1);
  }
  st.l[0] += (p[0][0] + p[0][1] + p[1][0] + p[1][1]);
  st.l[1] += (p[0][2] + p[0][3] + p[1][2] + p[1][3]);
  pa[0] = Tr::pack(p[0][0], p[0][1]);
  pa[1] = Tr::pack(p[0][2], p[0][3]);
  pa[2] = Tr::pack(p[1][0], p[1][1]);
  pa[3] = Tr::pack(p[1][2], p[1][3]);
}

// Per chunk, step 3: O += P V (V via ldmatrix.trans).
template <int D, class T>
__device__ __forceinline__ void accumulate_pv(WarpState<D>& st, const uint32_t (&pa)[4], uint32_t v_smem, int lane) {
  const int tt = ((lane >> 3) & 1) * 8 + (lane & 7), hi = lane >> 4;
#pragma unroll
  for (int nn = 0; nn < D / 16; ++nn) {
    uint32_t b[4];
    ldmatrix_x4_trans(b, v_smem + tile_offset<D>(tt, nn * 2 + hi) * 2);
    Mma<T>::run(st.o[2 * nn], pa, b[0], b[1]);
    Mma<T>::run(st.o[2 * nn + 1], pa, b[2], b[3]);
  }
}

// The sink joins a row's softmax as one more logit s2 (base 2) with a zero value row: the row's lse (base 2; -inf
// for no key) becomes log2(2^lse + 2^s2), and its output scales by the factor returned, 2^(old lse - new lse).
__device__ __forceinline__ float join_sink(float& lse, float s2) {
  const float m = fmaxf(lse, s2);
  const float total = m + log2f(exp2f(lse - m) + exp2f(s2 - m));
  const float factor = exp2f(lse - total);
  lse = total;
  return factor;
}

// The modified kernel's end of a row with running max m (log2 units) and sum l: the factor its O accumulator is
// multiplied by and its lse. A row that saw no key gives 0 and -inf; a final one (not a partial) then takes the sink
// and v_scale, so each is applied exactly once per row.
__device__ __forceinline__ float finish_row(const Args& a, float m, float l, bool final_row, int head, float& lse) {
  const float neg_inf = -__int_as_float(0x7f800000);
  float factor = l > 0.f ? 1.f / l : 0.f;
  lse = l > 0.f ? m + log2f(l) : neg_inf;
  if (final_row) {
    if (a.sinks) factor *= join_sink(lse, __ldg(a.sinks + head) * 1.4426950408889634f);
    factor *= a.out_scale;
  }
  return factor;
}

// End of a solo piece: its one warp writes the result (or the segment's partial) from its registers.
template <int D, class T, bool kMod>
__device__ __forceinline__ void write_solo_result(const Args& a, const WarpState<D>& st, const Piece& piece, int seg,
                                                  int kvh, int g, int t4) {
  using Tr = Mma<T>;
  const int rows = tile_rows<kMod>(a);
  float inv0 = 1.f / st.l[0], inv1 = 1.f / st.l[1], lse0 = 0.f, lse1 = 0.f;
  long long row0, row1;  // rows g and g + 8 of the output and lse (whole) or of the partials
  if constexpr (kMod) {
    const long long slot = piece.whole ? piece.b : (long long)seg + piece.b, per = request_rows<kMod>(a);
    row0 = slot * per + request_row<kMod>(a, kvh, g);
    row1 = slot * per + request_row<kMod>(a, kvh, g + 8);
    inv0 = finish_row(a, st.m[0], st.l[0], piece.whole && g < rows, kvh * a.group + g % a.group, lse0);
    inv1 = finish_row(a, st.m[1], st.l[1], piece.whole && g + 8 < rows, kvh * a.group + (g + 8) % a.group, lse1);
  } else {
    const long long head0 = (long long)piece.b * a.num_qo_heads + kvh * a.group;
    const long long slot_head0 = ((long long)seg + piece.b) * a.num_qo_heads + kvh * a.group;
    row0 = (piece.whole ? head0 : slot_head0) + g;
    row1 = row0 + 8;
  }
#pragma unroll
  for (int j = 0; j < D / 8; ++j) {
    const int d = j * 8 + 2 * t4;
    if (piece.whole) {
      if (g < rows)
        *reinterpret_cast<uint32_t*>(static_cast<T*>(a.out) + row0 * D + d) =
            Tr::pack(st.o[j][0] * inv0, st.o[j][1] * inv0);
      if (g + 8 < rows)
        *reinterpret_cast<uint32_t*>(static_cast<T*>(a.out) + row1 * D + d) =
            Tr::pack(st.o[j][2] * inv1, st.o[j][3] * inv1);
    } else {
      if (g < rows)
        *reinterpret_cast<float2*>(a.part_o + row0 * D + d) = make_float2(st.o[j][0] * inv0, st.o[j][1] * inv0);
      if (g + 8 < rows)
        *reinterpret_cast<float2*>(a.part_o + row1 * D + d) = make_float2(st.o[j][2] * inv1, st.o[j][3] * inv1);
    }
  }
  if (t4 == 0) {
    float* lse_out = piece.whole ? a.lse : a.part_lse;
    if constexpr (kMod) {
      if (lse_out && g < rows) lse_out[row0] = lse0;
      if (lse_out && g + 8 < rows) lse_out[row1] = lse1;
    } else {
      if (lse_out && g < rows) lse_out[row0] = st.m[0] + __log2f(st.l[0]);
      if (lse_out && g + 8 < rows) lse_out[row1] = st.m[1] + __log2f(st.l[1]);
    }
  }
}

// End of a CTA piece, step 1: the warp parks its (m, l, O) (rows < group) in the ring stage it consumed last, which
// is free: the producer is at most S - 1 chunks ahead of the consumer.
template <int D, int S, class T, bool kMod, int KB>
__device__ __forceinline__ void publish_state(const Args& a, const Shared<D, S, T, KB>& sh, const WarpState<D>& st,
                                              int warp, int free_stage, int lane) {
  const int g = lane / 4, t4 = lane % 4, rows = tile_rows<kMod>(a);
  float* mo = reinterpret_cast<float*>(sh.k_tile(warp, free_stage));
  __syncwarp();  // every lane's ldmatrix reads of that stage are done
#pragma unroll
  for (int j = 0; j < D / 8; ++j) {
    if (g < rows)
      *reinterpret_cast<float2*>(mo + merge_offset<D>(g, j * 8 + 2 * t4)) = make_float2(st.o[j][0], st.o[j][1]);
    if (g + 8 < rows)
      *reinterpret_cast<float2*>(mo + merge_offset<D>(g + 8, j * 8 + 2 * t4)) = make_float2(st.o[j][2], st.o[j][3]);
  }
  if (lane == 0) sh.merge_stage[warp] = free_stage;
  if (t4 == 0) {
    sh.merge_m[warp * kRows + g] = st.m[0];
    sh.merge_l[warp * kRows + g] = st.l[0];
    sh.merge_m[warp * kRows + g + 8] = st.m[1];
    sh.merge_l[warp * kRows + g + 8] = st.l[1];
  }
}

// End of a CTA piece, step 2 (after a barrier): the warps' states merged in fixed order (deterministic) into the
// output or the segment's partial. Each row's weights first: lane group (row r, warp w) of kWarps consecutive
// threads, reduced by shuffles.
template <int D, int S, class T, bool kMod, class O, int KB>
__device__ __forceinline__ void merge_warps(const Args& a, const Shared<D, S, T, KB>& sh, const Piece& piece, int seg,
                                            int kvh) {
  using L = Layout<D, S>;
  const float neg_inf = -__int_as_float(0x7f800000);
  if (threadIdx.x < kRows * L::kWarps) {
    const int r = threadIdx.x / L::kWarps, w = threadIdx.x % L::kWarps;
    const float mw = sh.merge_m[w * kRows + r];
    float mm = mw;
#pragma unroll
    for (int o = 1; o < L::kWarps; o <<= 1) mm = fmaxf(mm, __shfl_xor_sync(0xffffffffu, mm, o));
    // 0 for a warp without tokens (kMod: also where no warp saw a key of the row, the window's doing)
    float e;
    if constexpr (kMod) e = mm == neg_inf ? 0.f : fast_exp2(mw - mm);
    else e = piece.tokens > 0 ? fast_exp2(mw - mm) : 0.f;
    float sum = sh.merge_l[w * kRows + r] * e;
#pragma unroll
    for (int o = 1; o < L::kWarps; o <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if constexpr (kMod) {
      float lse;
      const float factor = finish_row(a, mm, sum, piece.whole && r < a.rows, kvh * a.group + r % a.group, lse);
      sh.merge_w[w * kRows + r] = e * factor;
      if (w == 0) sh.merge_lse[r] = lse;
    } else {
      sh.merge_w[w * kRows + r] = piece.tokens > 0 ? e / sum : 0.f;
      if (w == 0) sh.merge_lse[r] = piece.tokens > 0 ? mm + __log2f(sum) : neg_inf;
    }
  }
  __syncthreads();
  const int rows = tile_rows<kMod>(a);
  const long long per = request_rows<kMod>(a);
  const long long head0 = (long long)piece.b * per + (kMod ? 0 : kvh * a.group);
  const long long slot_head0 = ((long long)seg + piece.b) * per + (kMod ? 0 : kvh * a.group);
  for (int i = threadIdx.x; i < rows * D; i += L::kThreads) {
    const int r = i / D, d = i % D;  // tile row r, request row q (relative to head0 / slot_head0)
    const int q = kMod ? request_row<kMod>(a, kvh, r) : r;
    float acc = 0.f;
#pragma unroll
    for (int w = 0; w < L::kWarps; ++w) {
      const float wt = sh.merge_w[w * kRows + r];
      if (wt != 0.f) {
        const float* wo = reinterpret_cast<const float*>(sh.k_tile(w, sh.merge_stage[w]));
        acc += wo[merge_offset<D>(r, d)] * wt;
      }
    }
    if (piece.whole) {
      static_cast<O*>(a.out)[(head0 + q) * D + d] = Mma<O>::from_float(acc);
      if (d == 0 && a.lse) a.lse[head0 + q] = sh.merge_lse[r];
    } else {
      a.part_o[(slot_head0 + q) * D + d] = acc;
      if (d == 0) a.part_lse[slot_head0 + q] = sh.merge_lse[r];
    }
  }
}

// D / 32 floats of a row per lane (columns lane * D / 32 ...), loaded and stored as one or two vectors.
template <int D>
struct RowSlice {
  static constexpr int kFloats = D / 32;
  float v[kFloats];
  __device__ __forceinline__ void load(const float* row, int lane) {
    if constexpr (D == 64) {
      const float2 x = __ldcg(reinterpret_cast<const float2*>(row) + lane);
      v[0] = x.x, v[1] = x.y;
    } else {
#pragma unroll
      for (int i = 0; i < kFloats / 4; ++i) {
        const float4 x = __ldcg(reinterpret_cast<const float4*>(row) + i * 32 + lane);
        v[4 * i] = x.x, v[4 * i + 1] = x.y, v[4 * i + 2] = x.z, v[4 * i + 3] = x.w;
      }
    }
  }
  // The column of element i of this lane's slice.
  static __device__ __forceinline__ int column(int lane, int i) {
    return D == 64 ? lane * 2 + i : (i / 4) * 128 + lane * 4 + (i % 4);
  }
};

// After a grid-wide barrier (cooperative launch), the rows of the sequences cut over several segments are merged:
// the plan lists those sequences and deals their rows to merge tasks, which the CTAs take in turn. A row of a
// sequence cut into ns segments gets merge_warps_per_row(ns) warps; each folds every such warp's share of the
// segments (its loads in flight together), and the warps' sums are added in warp order. Every sum runs in a fixed
// order, so results are bit-identical run to run.
template <int D, int S, class T, bool kMod, class O, int KB>
__device__ __forceinline__ void merge_split(const Args& a, const Shared<D, S, T, KB>& sh) {
  using L = Layout<D, S>;
  cooperative_groups::this_grid().sync();
  const PlanHeader& h = plan_header(a);
  // A cut sequence holds at least one of the S - 1 cuts: fewer than S items (bounds the shared-memory list).
  const int num_tasks = h.num_tasks, num_split = min(min(h.num_split, a.batch), a.num_segments - 1);
  if (num_tasks <= 0 || num_split <= 0) return;
  const int* seg = plan_segments(a);
  const SplitItem* items = plan_items(a);
  // Read afresh (volatile), not kept live from the kernel's start through the stream, where registers are short.
  unsigned tid, cta;
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(tid));
  asm volatile("mov.u32 %0, %%ctaid.y;" : "=r"(cta));
  cta = cta * gridDim.x + blockIdx.x;
  const int warp = int(tid / 32), lane = int(tid % 32);
  // The ring is free now: the items' first tasks (binary-searched per task) and the warps' sums.
  int* first_task = reinterpret_cast<int*>(sh.ring);
  float* sums = reinterpret_cast<float*>(sh.ring) + align_up(size_t(num_split), 32);
  for (int i = int(tid); i < num_split; i += L::kThreads) first_task[i] = items[i].task_begin;
  __syncthreads();
  const float neg_inf = -__int_as_float(0x7f800000);
  const int nctas = gridDim.x * gridDim.y;
  for (int task = int(cta); task < num_tasks; task += nctas) {
    int lo = 0, hi = num_split - 1;  // the last item whose first task is <= task
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (first_task[mid] <= task) lo = mid;
      else hi = mid - 1;
    }
    const SplitItem item = items[lo];
    const int b = clampi(item.b, 0, a.batch - 1);
    const int s0 = clampi(item.s0, 0, a.num_segments - 1), s1 = clampi(item.s1, s0, a.num_segments - 1);
    const int ns = s1 - s0 + 1;
    const int wpr = merge_warps_per_row(ns, L::kWarps), rows = L::kWarps / wpr;
    const int head = (task - first_task[lo]) * rows + warp / wpr, wi = warp % wpr;
    const int per = request_rows<kMod>(a);  // rows of a request: the merge's "heads"
    const bool active = head < per && task >= first_task[lo];
    int start, end;
    seq_range(a, b, start, end);
    // Segment s holds a piece of the sequence (and so a partial) when their page ranges meet.
    auto has_piece = [&](int s) {
      return max(start, clampi(seg[s], 0, a.num_kv_indices)) < min(end, clampi(seg[s + 1], 0, a.num_kv_indices));
    };
    const long long row0 = (long long)b * per + head;  // slot (s + b) of head: (row0 + s * per)
    RowSlice<D> acc;
#pragma unroll
    for (int i = 0; i < RowSlice<D>::kFloats; ++i) acc.v[i] = 0.f;
    float mx = neg_inf, sum = 0.f;
    if (active) {
      for (int s = s0 + lane; s <= s1; s += 32)
        if (has_piece(s)) mx = fmaxf(mx, __ldcg(a.part_lse + row0 + (long long)s * per));
#pragma unroll
      for (int o = 16; o; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
      // The modified kernel's partials may all be empty (the window ends before them): then every weight is 0.
      const bool none = kMod && mx == neg_inf;
      for (int s = s0 + lane; s <= s1; s += 32)
        if (!none && has_piece(s)) sum += exp2f(__ldcg(a.part_lse + row0 + (long long)s * per) - mx);
#pragma unroll
      for (int o = 16; o; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
      // This warp's share: segments s0 + wi, s0 + wi + wpr, ..., kBatch rows of loads in flight at a time (fewer
      // at head_dim 256, whose rows are twice as long: the registers are the stream's).
      constexpr int kBatch = D == 256 ? kMergeSegmentsPerWarp / 2 : kMergeSegmentsPerWarp;
      for (int s = s0 + wi; s <= s1; s += wpr * kBatch) {
        float wt[kBatch];
        RowSlice<D> part[kBatch];
#pragma unroll
        for (int u = 0; u < kBatch; ++u) {
          const int su = s + u * wpr;
          wt[u] = 0.f;
          if (!none && su <= s1 && has_piece(su)) {
            const long long slot = row0 + (long long)su * per;
            wt[u] = exp2f(__ldcg(a.part_lse + slot) - mx);
            part[u].load(a.part_o + slot * D, lane);
          }
        }
#pragma unroll
        for (int u = 0; u < kBatch; ++u)
          if (wt[u] != 0.f)
#pragma unroll
            for (int i = 0; i < RowSlice<D>::kFloats; ++i) acc.v[i] += wt[u] * part[u].v[i];
      }
    }
    if (wpr > 1) {  // the row's warps add their sums in warp order
      if (active)
#pragma unroll
        for (int i = 0; i < RowSlice<D>::kFloats; ++i) sums[warp * D + RowSlice<D>::column(lane, i)] = acc.v[i];
      __syncthreads();
      if (active && wi == 0)
        for (int w = 1; w < wpr; ++w)
#pragma unroll
          for (int i = 0; i < RowSlice<D>::kFloats; ++i) acc.v[i] += sums[(warp + w) * D + RowSlice<D>::column(lane, i)];
      __syncthreads();  // the sums area is free for the next task
    }
    if (active && wi == 0) {
      float inv, lse = 0.f;
      if constexpr (kMod) inv = finish_row(a, mx, sum, true, head % a.num_qo_heads, lse);
      else inv = 1.f / sum;
      O* out = static_cast<O*>(a.out) + row0 * D;
#pragma unroll
      for (int i = 0; i < RowSlice<D>::kFloats; ++i) out[RowSlice<D>::column(lane, i)] = Mma<O>::from_float(acc.v[i] * inv);
      if (lane == 0 && a.lse) a.lse[row0] = kMod ? lse : mx + log2f(sum);
    }
  }
}

// A run without its plan: every output element and lse NaN (one CTA; the call is wrong anyway).
template <int D, class T, bool kMod>
__device__ void poison_outputs(const Args& a) {
  const float nan = __int_as_float(0x7fc00000);
  const long long rows = (long long)a.batch * request_rows<kMod>(a);
  for (long long i = threadIdx.x; i < rows * D; i += blockDim.x) static_cast<T*>(a.out)[i] = Mma<T>::from_float(nan);
  if (a.lse)
    for (long long i = threadIdx.x; i < rows; i += blockDim.x) a.lse[i] = nan;
}

// The kernel, stage by stage: find the segment's sequences; per table batch of them, build the piece table, start
// the warps' copy rings and stage Q; per piece, each warp streams its chunks (compute_qk -> update_local_state ->
// accumulate_pv, the next chunk's copies issued first), then either writes the piece alone (solo) or publishes its
// state for merge_warps; finally, when sequences were cut over segments, merge_split. With one segment there is no
// plan: the CTA of each KV head takes the whole page list.
// The keys of a piece (kMod: window_left >= 0 or q_len > 1) that tile rows g and g + 8 see, into mod.lo / mod.hi
// relative to the piece and within [0, piece.tokens]: token j of the request sits at position kv_len - q_len + j
// and sees keys from that position - window_left (or 0) to that position. Returns the first key any row sees (the
// same in every lane: chunks before it are skipped whole).
__device__ __forceinline__ int piece_bounds(const Args& a, const Piece& piece, int g, ScoreMod& mod) {
  auto clamp = [&](long long x) { return int(min(max(x, 0ll), (long long)piece.tokens)); };
  const long long pos0 = piece.pos0;  // token 0's position, relative to the piece (build_table)
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const long long pos = pos0 + min((g + 8 * i) / a.group, a.q_len - 1);  // rows past the tile's: any token
    mod.hi[i] = clamp(pos + 1);
    mod.lo[i] = a.window_left >= 0 ? clamp(pos - a.window_left) : 0;
  }
  return a.window_left >= 0 ? clamp(pos0 - a.window_left) : 0;
}

// fp8: one warp converts its ring stage (K and V, [16][D] bytes each) into its K/V pair of T, swizzled as the MMAs
// read it (tile_offset). Each lane turns 16-byte pieces of 16 fp8 values into two 16-byte pieces of T.
template <int D, class T, bool kE5M2>
__device__ __forceinline__ void convert_stage(const uint8_t* stage, T* pair, int lane) {
  constexpr int kPieces = kChunk * D / 16;  // per tile
#pragma unroll 1  // a loop, not 2 * D / 32 copies: at head_dim 256 the registers are the O accumulators
  for (int i = lane; i < 2 * kPieces; i += 32) {
    const int tile = i / kPieces, t = (i % kPieces) / (D / 16), c = i % (D / 16);
    const uint4 x = *reinterpret_cast<const uint4*>(stage + tile * kChunk * D + t * D + c * 16);
    const uint32_t in[4] = {x.x, x.y, x.z, x.w};
    uint32_t out[8];
#pragma unroll
    for (int j = 0; j < 4; ++j) fp8x4_to<T, kE5M2>(in[j], out[2 * j], out[2 * j + 1]);
    T* dst = pair + tile * kChunk * D;
    *reinterpret_cast<uint4*>(dst + tile_offset<D>(t, 2 * c)) = make_uint4(out[0], out[1], out[2], out[3]);
    *reinterpret_cast<uint4*>(dst + tile_offset<D>(t, 2 * c + 1)) = make_uint4(out[4], out[5], out[6], out[7]);
  }
}

// kMod: the modified kernel (launch_run picks it when a version-2 variant is set): soft-cap, window, sinks,
// v_scale, HND strides, several tokens per request; kFp8 (with kMod): fp8 K/V, converted per chunk in shared
// memory. The plain kernel (kMod false) compiles to the same code as before the variants existed. T: the MMAs'
// operands; O: q and the output (T, but fp16 for an fp8 cache whatever O: every e4m3/e5m2 value is exact in it and
// the rotated and scored values keep 3 more bits than in bf16 - the RoPE cases' scores need them).
template <int D, int S, class T, bool kPlain, bool kMod, bool kFp8 = false, class O = T>
__global__ void __launch_bounds__((Layout<D, S>::kThreads), 1) decode_kernel(const Args a) {
  static_assert(!kFp8 || kMod, "fp8 K/V run in the modified kernel");
  constexpr int KB = kFp8 ? 1 : 2;
  using L = Layout<D, S, KB>;
  using Dl = Deal<L::kWarps>;
  extern __shared__ __align__(128) unsigned char smem[];
  const Shared<D, S, T, KB> sh(smem);
  __shared__ int counts[2];
  __shared__ unsigned cta_mask[2];  // per table batch: bit k = piece k is a CTA piece (not solo)

  // The sequence bounds' lines into L2 while the grid before (the plan, or whatever the stream ran) finishes: hints
  // only, right whatever that grid writes. Nothing it may have written is read before pdl_wait. Not at head_dim
  // 256, where the loop raised the kernel's spills from 24 / 48 to 88 / 192 bytes (ptxas, sm_90a).
  if (D <= 128 && threadIdx.x < 32) {
    const int n = min(a.batch + 1, kIndptrCache + 1);
    for (int i = threadIdx.x * 32; i < n; i += 32 * 32) {
      prefetch_l2(a.indptr + i);
      if (a.last_len && i < a.batch) prefetch_l2(a.last_len + i);
    }
  }
  // RoPE's table reads only the arguments: filled before pdl_wait too.
  if constexpr (kMod)
    if (a.rope) fill_rope_table<D, L::kThreads>(a, sh.rope);
  pdl_wait();

  const int seg = blockIdx.x, kvh = blockIdx.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t4 = lane % 4;  // MMA fragment coordinates: row g (and g + 8), column pair t4
  int seg_begin = 0, seg_end = a.num_kv_indices;
  if (a.num_segments > 1) {
    // The header and this segment's bounds in one round trip (the bounds lie inside the workspace the host sized for
    // this plan whatever the header says; they are used only once it matches).
    const PlanHeader h = plan_header(a);
    const int* bounds = plan_segments(a);
    const int bound0 = bounds[seg], bound1 = bounds[seg + 1];
    // A workspace without the plan of these sizes: say so with NaN everywhere rather than read a stale work list.
    if (h.magic != kPlanMagic || h.num_segments != a.num_segments || h.batch != a.batch ||
        h.num_kv_indices != a.num_kv_indices || h.page_size != a.page_size) {
      if (seg == 0 && kvh == 0) poison_outputs<D, O, kMod>(a);
      return;  // every CTA sees the same header: none reaches the grid barrier
    }
    seg_begin = clampi(bound0, 0, a.num_kv_indices);
    seg_end = clampi(bound1, seg_begin, a.num_kv_indices);
  }
  // The page ids this segment will fetch, into L2 while the counting pass runs.
  for (int i = seg_begin + threadIdx.x * 32; i < seg_end; i += L::kThreads * 32) prefetch_l2(a.indices + i);

  const int2 range = find_sequences(a, sh, seg_begin, seg_end, seg == a.num_segments - 1, counts);

  const uint32_t q_smem = uint32_t(__cvta_generic_to_shared(sh.q_tile));
  Producer<D, S, T, kPlain, kMod, typename Shared<D, S, T, KB>::KV> prod;
  prod.ids = sh.id_ring + warp * L::kIdSlots * kChunk;
  prod.offs = sh.off_ring + warp * L::kIdSlots * kChunk;
  prod.policy = l2_policy(true);
  QStage<D, S, T, kMod, O> qnext;
  // Solo pieces read their Q fragments from global memory, so only where Q lives in registers.
  const int solo_tokens = L::kQInRegisters ? kSoloTokens : 0;
  const int solo_alone_tokens = L::kQInRegisters ? kSoloAloneTokens : 0;
  int deal = 0;  // the deal counter (Deal) at the next piece, the same in every warp
  for (int tb = range.x; tb < range.y; tb += kTable) {
    const int n = min(kTable, range.y - tb);
    prefetch_q_rows<D, S, O, kMod>(a, tb, n, kvh);
    __syncthreads();  // the previous batch's table is no longer read
    build_table<kMod>(a, sh, tb, n, seg_begin, seg_end, solo_tokens, solo_alone_tokens, cta_mask);
    __syncthreads();
    // The CTA pieces in order (the Q tile is staged for them only): next_cta(k) is the first one after piece k.
    const unsigned long long ctas = (unsigned long long)cta_mask[0] | ((unsigned long long)cta_mask[1] << 32);
    auto next_cta = [&](int k) {
      const unsigned long long after = k < 0 ? ctas : k >= 63 ? 0ull : ctas & ~((2ull << k) - 1);
      return after ? __ffsll((long long)after) - 1 : n;
    };
    const int first_cta = next_cta(-1);
    // kMod with RoPE: CTA piece k's Q tile, complete in shared memory, rotated at its rows' positions (then a
    // barrier: every warp reads all of it).
    auto rope_q = [&](int k) {
      if constexpr (kMod) {
        if (a.rope) {
          rope_q_tile<D, L::kThreads, T>(sh.q_tile, sh.rope, rope_positions(a, sh, sh.table[k]).y, a.group);
          __syncthreads();
        }
      }
    };
    if (first_cta < n) qnext.load(a, sh.table[first_cta].b, kvh);  // while the ids of the first chunks arrive

    prod.start(a, sh.table, n, warp, lane, deal);
    if (first_cta < n) {
      qnext.store(sh.q_tile);
      const int second = next_cta(first_cta);
      if (second < n) qnext.load(a, sh.table[second].b, kvh);
    }
#pragma unroll
    for (int s = 0; s < S - 1; ++s) prod.issue(a, sh.table, n, sh.ring, warp, lane, kvh);
    __syncthreads();  // the first CTA piece's Q tile is complete
    if (first_cta < n) rope_q(first_cta);

    int consumed = 0;  // this warp's chunks consumed in this batch; chunk i sits in ring stage i % S
    for (int k = 0; k < n; ++k) {
      const Piece piece = sh.table[k];
      WarpState<D> st;
      st.reset();
      const int c0 = Dl::first(piece, deal, warp), step = Dl::step(piece);
      deal = Dl::advance(piece, deal);
      if (piece.tokens > c0 * kChunk) {
        ScoreMod mod, chunk_mod;
        int lo = 0;  // the first key any row sees
        float rope_k0 = 0.f, rope_q0 = 0.f;  // RoPE: the positions of the piece's first key and query token 0
        if constexpr (kMod) {
          mod.cap_pre = chunk_mod.cap_pre = a.cap_pre;
          mod.cap_post = chunk_mod.cap_post = a.cap_post;
          if (a.window_left >= 0 || a.q_len > 1) lo = piece_bounds(a, piece, g, mod);
          if (a.rope) {
            const float2 at = rope_positions(a, sh, piece);
            rope_k0 = at.x;
            rope_q0 = at.y;
          }
        }
        uint32_t qf[L::kQInRegisters ? D / 16 : 1][4];
        if constexpr (L::kQInRegisters) {
          if (piece.solo) {
            load_q_global<D, T, kMod, O>(a, piece.b, kvh, lane, qf, sh.rope, rope_q0);
          } else {
#pragma unroll
            for (int kk = 0; kk < D / 16; ++kk) load_q_fragment<D>(q_smem, kk, lane, qf[kk]);
          }
        }
        for (int c = c0; c * kChunk < piece.tokens; c += step) {
          prod.issue(a, sh.table, n, sh.ring, warp, lane, kvh);
          cp_async_wait<S - 1>();
          __syncwarp();  // this chunk's copies, made by all lanes, are visible to all lanes
          const int stage = consumed++ % S;
          if (kMod && (c + 1) * kChunk <= lo) continue;  // the window starts after this chunk: nothing to add
          const T* kt = sh.k_tile(warp, stage);
          if constexpr (kFp8) {
            // The issue above began with a __syncwarp: every lane is done reading the previous chunk's pair.
            if (a.kv_e5m2) convert_stage<D, T, true>(sh.kv_stage(warp, stage), sh.k_tile(warp, stage), lane);
            else convert_stage<D, T, false>(sh.kv_stage(warp, stage), sh.k_tile(warp, stage), lane);
            __syncwarp();  // the pair, written by all lanes, is visible to all lanes
          }
          if constexpr (kMod) {
            // RoPE on the keys at their positions, after the fp8 conversion (exact: the same as rotating the fp8
            // values); in place, only this warp reads the tile.
            if (a.rope) {
              rope_keys<D, T>(sh.k_tile(warp, stage), sh.rope, rope_k0 + float(c * kChunk), lane);
              __syncwarp();  // the rotated tile, written by all lanes, is visible to all lanes
            }
          }
          const uint32_t k_smem = uint32_t(__cvta_generic_to_shared(kt));
          const uint32_t v_smem = uint32_t(__cvta_generic_to_shared(kt + L::kTileElems));
          float s[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
          compute_qk<D, S, T>(qf, k_smem, q_smem, lane, s);
          uint32_t pa[4];
          if constexpr (kMod)
#pragma unroll
            for (int i = 0; i < 2; ++i) {
              chunk_mod.lo[i] = mod.lo[i] - c * kChunk;
              chunk_mod.hi[i] = mod.hi[i] - c * kChunk;
            }
          update_local_state<D, T, kMod>(st, s, piece.tokens - c * kChunk, a.scale_log2, t4, pa, chunk_mod);
          accumulate_pv<D, T>(st, pa, v_smem, lane);
        }
      }
      st.reduce_l();
      if (piece.solo) {  // the owner alone writes the result from its registers: no merge, no barrier
        if (piece.tokens > c0 * kChunk) write_solo_result<D, O, kMod>(a, st, piece, seg, kvh, g, t4);
        continue;
      }
      publish_state<D, S, T, kMod>(a, sh, st, warp, (consumed + S - 1) % S, lane);
      __syncthreads();
      if (piece.whole >= 0) merge_warps<D, S, T, kMod, O>(a, sh, piece, seg, kvh);
      // Every warp read this piece's Q before the barrier above: stage the next CTA piece's, fetch the one after.
      const int next = next_cta(k);
      if (next < n) {
        qnext.store(sh.q_tile);
        const int after = next_cta(next);
        if (after < n) qnext.load(a, sh.table[after].b, kvh);
      }
      __syncthreads();  // the merge area is free again and the next Q tile complete
      if (next < n) rope_q(next);
    }
    cp_async_wait<0>();  // nothing real is left in flight, but leave no group behind
  }
  if (a.num_segments > 1) merge_split<D, S, T, kMod, O>(a, sh);
}


// The device plan (one CTA). A sequence costs its tokens plus piece_tokens (a piece's fixed cost, charged at its
// start); the concatenated costs [0, C) are cut at the S - 1 targets ceil(s * C / S), each claimed by the sequence
// whose cost range holds it and placed at the nearest page boundary (a cut in a sequence's fixed cost moves the whole
// sequence to the next segment). Then the sequences holding a cut strictly inside are listed with their segments and
// merge tasks. Everything derives from kv_indptr / kv_last_page_len, clamped as the run kernel clamps them.
struct PlanArgs {
  const int* indptr;
  const int* last_len;  // may be null: every last page is full
  char* plan;
  int batch, num_kv_indices, page_size, num_segments, piece_tokens, warps;
  int num_qo_heads;  // rows per request to merge: q_len_per_req * num_qo_heads
  int q_len, window_left;  // the pages before the window are left out (pages_before_window)
};

__global__ void __launch_bounds__(kPlanThreads) plan_kernel(const PlanArgs a) {
  using Scan = cub::BlockScan<long long, kPlanThreads>;
  __shared__ typename Scan::TempStorage scan;
  __shared__ long long carry;
  extern __shared__ int seg[];  // [num_segments + 1]
  pdl_wait();  // the page table may come from the kernel before
  pdl_launch_dependents();  // the run kernel may be scheduled; it waits for this grid before reading the plan
  const int S = a.num_segments, N = a.num_kv_indices;
  auto range = [&](int b, int& start, int& end, long long& tokens) {
    start = clampi(__ldg(a.indptr + b), 0, N);
    end = clampi(__ldg(a.indptr + b + 1), start, N);
    const int last = a.last_len ? clampi(__ldg(a.last_len + b), 1, a.page_size) : a.page_size;
    tokens = end > start ? (long long)(end - start - 1) * a.page_size + last : 0;
    const int skip = pages_before_window(tokens, a.q_len, a.window_left, a.page_size);
    start += skip;
    tokens -= (long long)skip * a.page_size;
  };
  auto cost = [&](long long tokens) { return tokens > 0 ? tokens + a.piece_tokens : 0ll; };

  for (int s = threadIdx.x; s <= S; s += kPlanThreads) seg[s] = s == 0 ? 0 : N;  // unclaimed cuts fall at the end
  if (threadIdx.x == 0) carry = 0;
  __syncthreads();

  // Pass 1: each sequence's first cost position (prefix[b]; prefix[batch] = total), in shared memory where it fits.
  long long* prefix = a.batch + 1 <= kPlanSmemPrefix
                          ? reinterpret_cast<long long*>(seg + align_up(size_t(S) + 1, 2))
                          : reinterpret_cast<long long*>(a.plan + prefix_offset(S, a.batch));
  for (int base = 0; base < a.batch; base += kPlanThreads) {
    const int b = base + threadIdx.x;
    int start, end;
    long long tokens = 0;
    if (b < a.batch) range(b, start, end, tokens);
    long long begin, chunk;
    Scan(scan).ExclusiveSum(cost(tokens), begin, chunk);
    if (b < a.batch) prefix[b] = carry + begin;
    __syncthreads();  // everyone has read carry
    if (threadIdx.x == 0) carry += chunk;
    __syncthreads();
  }
  const long long total = carry;
  if (threadIdx.x == 0) prefix[a.batch] = total;
  __syncthreads();

  // Pass 2: the cuts, in parallel. Cut s (1 <= s < S) at cost position ceil(s * total / S) belongs to the sequence
  // whose cost range [prefix[b], prefix[b + 1]) holds it (the last b with prefix[b] <= target: a sequence of cost 0
  // never is), placed at the nearest page boundary (a cut in a sequence's fixed cost moves the whole sequence to the
  // next segment); a target at or past the total stays unclaimed.
  if (total > 0) {
    for (int s = threadIdx.x + 1; s < S; s += kPlanThreads) {
      const long long target = ((long long)s * total + S - 1) / S;
      if (target >= total) continue;
      int lo = 0, hi = a.batch - 1;
      while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (prefix[mid] <= target) lo = mid;
        else hi = mid - 1;
      }
      int start, end;
      long long tokens;
      range(lo, start, end, tokens);
      const long long into = target - prefix[lo] - a.piece_tokens;  // tokens of this sequence before the cut
      const long long half_up = into + a.page_size / 2;
      const long long cut = half_up <= 0x7fffffffll ? (long long)(unsigned(half_up) / unsigned(a.page_size))
                                                    : half_up / a.page_size;
      seg[s] = into <= 0 ? start : start + int(min((long long)(end - start), cut));
    }
  }
  __syncthreads();

  // Pass 3: the cut sequences (a cut strictly inside), their segments and merge tasks, in batch order.
  auto segment_of = [&](int page) {  // the segment holding page position `page`: seg[s] <= page < seg[s + 1]
    int lo = 0, hi = S - 1;
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (seg[mid] <= page) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  };
  auto* items = reinterpret_cast<SplitItem*>(a.plan + items_offset(S));
  if (threadIdx.x == 0) carry = 0;
  __syncthreads();
  for (int base = 0; base < a.batch; base += kPlanThreads) {
    const int b = base + threadIdx.x;
    int s0 = 0, s1 = 0, tasks = 0;
    if (b < a.batch) {
      int start, end;
      long long tokens;
      range(b, start, end, tokens);
      if (end > start) {
        s0 = segment_of(start);
        s1 = segment_of(end - 1);
        const int rows = a.warps / merge_warps_per_row(s1 - s0 + 1, a.warps);
        if (s1 > s0) tasks = (a.num_qo_heads + rows - 1) / rows;
      }
    }
    // (cut sequences << 32) + tasks, scanned together.
    const long long packed = tasks > 0 ? (1ll << 32) + tasks : 0;
    long long before, chunk;
    Scan(scan).ExclusiveSum(packed, before, chunk);
    before += carry;
    if (tasks > 0) items[before >> 32] = SplitItem{b, s0, s1, int(before & 0xffffffffll)};
    __syncthreads();
    if (threadIdx.x == 0) carry += chunk;
    __syncthreads();
  }
  int* bounds = reinterpret_cast<int*>(a.plan + seg_table_offset());
  for (int s = threadIdx.x; s <= S; s += kPlanThreads) bounds[s] = seg[s];
  if (threadIdx.x == 0) {
    PlanHeader h{kPlanMagic, S, a.batch, N, a.page_size, int(carry >> 32), int(carry & 0xffffffffll), 0};
    *reinterpret_cast<PlanHeader*>(a.plan) = h;
  }
}

// Marks the first bad entry: indptr (kind 0), then kv_indices (1), then kv_last_page_len (2).
__global__ void validate_kernel(const int* indptr, const int* indices, const int* last_len, int batch,
                                long long n, long long num_pages, int page_size,
                                unsigned long long* first_bad) {
  const long long total = max((long long)batch + 1, n);
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
       i += (long long)gridDim.x * blockDim.x) {
    if (i <= batch) {
      const int v = indptr[i];
      const bool bad = (i == 0 && v != 0) || (i > 0 && v < indptr[i - 1]) || (i == batch && v != n) ||
                       v < 0 || v > n;
      if (bad) atomicMin(first_bad, (0ull << 40) | (unsigned long long)i);
    }
    if (i < n) {
      const int id = indices[i];
      if (id < 0 || id >= num_pages) atomicMin(first_bad, (1ull << 40) | (unsigned long long)i);
    }
    if (i < batch && last_len) {
      const int len = last_len[i];
      if (len < 1 || len > page_size) atomicMin(first_bad, (2ull << 40) | (unsigned long long)i);
    }
  }
}

// The workspace after the validation slot: the plan, then the partials.
char* plan_area(const LaunchShape& shape, void* workspace) {
  return static_cast<char*>(workspace) + shape.validate_bytes;
}

Args make_args(const kindex_paged_decode_params& p, const LaunchShape& shape, void* workspace) {
  Args a{};
  a.q = p.q;
  a.k = p.k_cache;
  a.v = p.v_cache;
  a.indptr = p.kv_indptr;
  a.indices = p.kv_indices;
  a.last_len = p.page_size == 1 ? nullptr : p.kv_last_page_len;
  a.out = p.output;
  a.lse = p.lse;
  a.plan = shape.plan_bytes ? plan_area(shape, workspace) : nullptr;
  float* part = reinterpret_cast<float*>(plan_area(shape, workspace) + shape.plan_bytes);
  const long long slots = shape.num_segments + p.batch_size;
  a.part_o = shape.partial_bytes ? part : nullptr;
  a.part_lse = shape.partial_bytes ? part + slots * p.num_qo_heads * p.q_len_per_req * p.head_dim : nullptr;
  a.batch = p.batch_size;
  a.num_qo_heads = p.num_qo_heads;
  a.num_kv_heads = p.num_kv_heads;
  a.group = p.num_qo_heads / p.num_kv_heads;
  a.page_size = p.page_size;
  a.num_kv_indices = int(p.num_kv_indices);
  a.num_segments = int(shape.num_segments);
  constexpr float kLog2e = 1.4426950408889634f;
  const float scale = p.sm_scale * p.k_scale;  // k = k_scale * k_cache: FlashInfer folds it into sm_scale
  a.scale_log2 = scale * kLog2e;
  a.cap_pre = p.logits_soft_cap > 0 ? scale / p.logits_soft_cap : 0.f;
  a.cap_post = p.logits_soft_cap * kLog2e;
  a.out_scale = p.v_scale;
  a.window_left = p.window_left;
  a.sinks = p.sinks;
  const unsigned d = unsigned(p.head_dim) * unsigned(kv_element_bytes(p)), ps = unsigned(p.page_size),
                 hkv = unsigned(p.num_kv_heads);  // d: bytes of a K/V row of one head
  a.page_bytes = ps * hkv * d;  // < 2^31 (launch_shape)
  a.token_bytes = p.kv_layout == KINDEX_KV_LAYOUT_HND ? d : hkv * d;
  a.head_bytes = p.kv_layout == KINDEX_KV_LAYOUT_HND ? ps * d : d;
  a.max_page = int(std::clamp<long long>(p.num_pages - 1, 0, INT32_MAX));
  a.per_page = PageDivider::of(p.page_size);
  a.q_len = p.q_len_per_req;
  a.rows = a.group * p.q_len_per_req;
  a.kv_e5m2 = p.kv_format == KINDEX_KV_FORMAT_FP8_E5M2;
  a.rope = p.pos_encoding == KINDEX_POS_ENCODING_ROPE_LLAMA;
  a.rope_turns0 = 1.0 / (2.0 * 3.14159265358979323846 * double(p.rope_scale));
  a.rope_log2_step = 2.0 * std::log2(double(p.rope_theta)) / double(p.head_dim);
  return a;
}

// Launches with programmatic stream serialization (the kernel is scheduled while the one before finishes; it
// waits for it in pdl_wait), and cooperatively (all CTAs resident, for the grid barrier) when asked.
template <class Kernel, class KernelArgs>
cudaError_t launch(Kernel kernel, dim3 grid, dim3 block, size_t smem, cudaStream_t stream, bool cooperative,
                   const KernelArgs& args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attrs[2]{};
  attrs[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attrs[0].val.programmaticStreamSerializationAllowed = 1;
  attrs[1].id = cudaLaunchAttributeCooperative;
  attrs[1].val.cooperative = 1;
  cfg.attrs = attrs;
  cfg.numAttrs = cooperative ? 2 : 1;
  // A driver that refuses the two attributes together gets the cooperative launch alone (stream order then does
  // what pdl_wait would), decided once per process.
  static std::atomic<bool> cooperative_pdl{true};
  if (cooperative && !cooperative_pdl.load(std::memory_order_relaxed)) {
    cfg.attrs = attrs + 1;
    cfg.numAttrs = 1;
  }
  cudaError_t err = cudaLaunchKernelEx(&cfg, kernel, args);
  if (cooperative && cfg.numAttrs == 2 && (err == cudaErrorInvalidValue || err == cudaErrorNotSupported)) {
    cudaGetLastError();
    cooperative_pdl.store(false, std::memory_order_relaxed);
    cfg.attrs = attrs + 1;
    cfg.numAttrs = 1;
    err = cudaLaunchKernelEx(&cfg, kernel, args);
  }
  return err;
}

// The MMAs' operand type of a kernel whose query / output type is T: fp16 for an fp8 cache whatever T
// (decode_kernel's O).
template <class T, bool kFp8>
using MmaType = std::conditional_t<kFp8, __half, T>;

template <int D, int S, class T, bool kPlain, bool kMod, bool kFp8>
cudaError_t run_kernel(const Args& a, cudaStream_t stream) {
  // The shared-memory limit was raised when the launch shape asked for this kernel's occupancy (ctas_per_sm).
  // S > 1 is one wave by construction (launch_shape): a cooperative launch, merged after a grid barrier.
  using L = Layout<D, S, kFp8 ? 1 : 2>;
  return launch(decode_kernel<D, S, MmaType<T, kFp8>, kPlain, kMod, kFp8, T>, dim3(a.num_segments, a.num_kv_heads),
                dim3(L::kThreads), kMod ? L::kModSmemBytes : L::kSmemBytes, stream, a.num_segments > 1, a);
}

template <int D, int S>
cudaError_t run_dtype(const kindex_paged_decode_params& p, const Args& a, const LaunchShape& shape,
                      cudaStream_t stream) {
  const bool bf = p.dtype == KINDEX_DTYPE_BF16;
  auto go = [&]<bool kPlain, bool kMod, bool kFp8>() {
    return bf ? run_kernel<D, S, __nv_bfloat16, kPlain, kMod, kFp8>(a, stream)
              : run_kernel<D, S, __half, kPlain, kMod, kFp8>(a, stream);
  };
  // The modified kernels come with the hinted copies only (fewer instantiations; their variants are rarer).
  if (shape.kind == KernelKind::fp8) return go.template operator()<false, true, true>();
  if (shape.kind == KernelKind::modified) return go.template operator()<false, true, false>();
  return shape.plain_copies ? go.template operator()<true, false, false>() : go.template operator()<false, false, false>();
}

// Raises the shared-memory limit of the kernels of one kind in this configuration (the plain one's two copy
// variants, or the modified one, or the fp8 one) (launches rely on it) and returns the resident CTAs per SM of the
// fewest.
template <int D, int S, class T>
int occupancy(KernelKind kind) {
  struct Kernel {
    const void* function;
    int smem, threads;
  };
  auto kernel = [](auto function, auto layout, bool mod) {
    using L = decltype(layout);
    return Kernel{reinterpret_cast<const void*>(function), mod ? L::kModSmemBytes : L::kSmemBytes, L::kThreads};
  };
  Kernel kernels[2] = {kernel(decode_kernel<D, S, T, false, false, false>, Layout<D, S>{}, false),
                       kernel(decode_kernel<D, S, T, true, false, false>, Layout<D, S>{}, false)};
  int count = 2;
  if (kind == KernelKind::modified) {
    kernels[0] = kernel(decode_kernel<D, S, T, false, true, false>, Layout<D, S>{}, true);
    count = 1;
  } else if (kind == KernelKind::fp8) {
    kernels[0] = kernel(decode_kernel<D, S, MmaType<T, true>, false, true, true, T>, Layout<D, S, 1>{}, true);
    count = 1;
  }
  int fewest = 1 << 20;
  for (int i = 0; i < count; ++i) {
    int blocks = 0;
    const Kernel& k = kernels[i];
    if (cudaFuncSetAttribute(k.function, cudaFuncAttributeMaxDynamicSharedMemorySize, k.smem) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, k.function, k.threads, k.smem) != cudaSuccess)
      return 1;
    fewest = std::min(fewest, blocks);
  }
  return fewest > 0 ? fewest : 1;
}

}  // namespace

// Ring depths (per warp, 16-token chunks) and, through Layout, warps per CTA: head_dim 64 8 warps x 4 stages,
// 128 8 x 3, 256 4 x 3: the most warps per SM and chunks in flight that fit in an sm_90/sm_100 CTA's 227 KB of
// shared memory (docs/perf/decode.md has the measurements behind them). A device with less (the A100's 163 KB) runs
// the same kernel with a 2-stage ring.
template <int D>
constexpr int kStages = D == 64 ? 4 : 3;
static_assert(kStages<128> == kStages<256>);

// The one dispatch from runtime (head_dim, ring depth) to the kernel configuration: f.template operator()<D, S>()
// for head_dim 64 / 128 / 256 (anything else is refused by launch_shape) and S = 2 or the shipped depth.
template <class F>
decltype(auto) with_config(int head_dim, int stages, F&& f) {
  auto at = [&]<int D>() -> decltype(auto) {
    return stages == 2 ? f.template operator()<D, 2>() : f.template operator()<D, kStages<D>>();
  };
  switch (head_dim) {
    case 64: return at.template operator()<64>();
    case 128: return at.template operator()<128>();
    default: return at.template operator()<256>();
  }
}

size_t ring_smem_bytes(int head_dim, int stages) {
  return with_config(head_dim, stages, []<int D, int S>() {
    static_assert(Layout<D, S, 1>::kModSmemBytes <= Layout<D, S>::kModSmemBytes, "fp8 needs no more");
    return size_t(Layout<D, S>::kModSmemBytes);  // the most any kind needs: the modified kernel's
  });
}

int ring_stages(int head_dim, size_t smem_limit) {
  const int shipped = head_dim == 64 ? kStages<64> : kStages<128>;  // kStages<128> == kStages<256>
  if (ring_smem_bytes(head_dim, shipped) <= smem_limit) return shipped;
  return ring_smem_bytes(head_dim, 2) <= smem_limit ? 2 : 0;
}

int ctas_per_sm(kindex_dtype dtype, int head_dim, int stages, KernelKind kind) {
  return with_config(head_dim, stages, [&]<int D, int S>() {
    return dtype == KINDEX_DTYPE_BF16 ? occupancy<D, S, __nv_bfloat16>(kind) : occupancy<D, S, __half>(kind);
  });
}

int launch_validate(const kindex_paged_decode_params& p, unsigned long long* first_bad, cudaStream_t stream) {
  cudaError_t err = cudaMemsetAsync(first_bad, 0xff, sizeof(unsigned long long), stream);
  if (err != cudaSuccess) return err;
  const long long total = std::max<long long>(p.batch_size + 1LL, p.num_kv_indices);
  const int blocks = int(std::min<long long>((total + 255) / 256, 1024));
  validate_kernel<<<blocks, 256, 0, stream>>>(p.kv_indptr, p.kv_indices,
                                              p.page_size == 1 ? nullptr : p.kv_last_page_len, p.batch_size,
                                              p.num_kv_indices, p.num_pages, p.page_size, first_bad);
  return cudaGetLastError();
}

size_t plan_bytes(int64_t num_segments, int64_t batch) {
  if (num_segments <= 1) return 0;  // one segment: no cuts, nothing to merge, no plan
  const bool scratch = batch + 1 > kPlanSmemPrefix;  // the cost positions go to the workspace
  return align_up(prefix_offset(num_segments, batch) + (scratch ? size_t(batch + 1) * sizeof(long long) : 0), 256);
}

int launch_plan(const kindex_paged_decode_params& p, const LaunchShape& shape, void* workspace, cudaStream_t stream) {
  if (shape.num_segments <= 1) return cudaSuccess;
  PlanArgs a{};
  a.indptr = p.kv_indptr;
  a.last_len = p.page_size == 1 ? nullptr : p.kv_last_page_len;
  a.plan = plan_area(shape, workspace);
  a.batch = p.batch_size;
  a.num_kv_indices = int(p.num_kv_indices);
  a.page_size = p.page_size;
  a.num_segments = int(shape.num_segments);
  a.piece_tokens = shape.piece_tokens;
  a.num_qo_heads = p.num_qo_heads * p.q_len_per_req;  // the merge's rows per request
  a.q_len = p.q_len_per_req;
  a.window_left = p.window_left;
  a.warps = with_config(p.head_dim, shape.stages, []<int D, int S>() { return Layout<D, S>::kWarps; });
  // seg[S + 1], then (8-byte aligned) the sequences' cost positions where they fit (plan_kernel's pass 1)
  const size_t smem = align_up(size_t(shape.num_segments) + 1, 2) * sizeof(int) +
                      (p.batch_size + 1 <= kPlanSmemPrefix ? size_t(p.batch_size + 1) * sizeof(long long) : 0);
  return launch(plan_kernel, dim3(1), dim3(kPlanThreads), smem, stream, false, a);
}

int launch_run(const kindex_paged_decode_params& p, const LaunchShape& shape, void* workspace, cudaStream_t stream) {
  const Args a = make_args(p, shape, workspace);
  return with_config(p.head_dim, shape.stages,
                     [&]<int D, int S>() { return int(run_dtype<D, S>(p, a, shape, stream)); });
}

}  // namespace kindex::decode::detail
