// Tensor-core paged GQA decode (see paged_decode.hpp for the split-KV scheme; docs/perf/decode.md for the
// measurements behind the choices below).
//
// A CTA = one KV head x one segment of the global page list; 8 warps (4 at head_dim 256). The query-head group of
// the KV head is packed as the 16 rows of mma.m16n8k16 (rows >= group are zero and never written). The chunks
// (16 tokens) of the segment's pieces are dealt to the warps (Deal): a piece's chunks round-robin over all warps,
// starting where the previous piece ended, or - a "solo" piece of at most Tuning::solo_tokens tokens in a segment
// of several pieces - all to one warp, which then writes that piece's result from its registers with no
// cross-warp merge and no CTA barrier. Each warp runs its own cp.async ring (K and V rows, 16 B per copy, L2
// evict-first); the chunks' page ids are copied into a small shared ring S chunks ahead, so page_size 1 streams
// like page_size 64. Per chunk: S = Q K^T (Q fragments from a shared Q tile staged one CTA piece ahead, or from
// global memory for a solo piece; K via ldmatrix), online softmax in fp32 with exp2 and the scale folded into log2
// units, O += P V (P re-packed from the S accumulators as the A operand, V via ldmatrix.trans). At the end of a
// CTA piece each warp parks its (m, l, O) in the ring stage it consumed last, per-row weights are reduced once and
// the warps merge in fixed order (deterministic), writing the output or a split-KV partial. Split sequences are
// merged in the same kernel after a grid-wide barrier (merge_in_kernel).
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/common/ptx.cuh"
#include "kernels/decode/paged_decode.hpp"

namespace kindex::decode::detail {
namespace {

using namespace kindex::ptx;

constexpr int kMergeThreads = 128;  // the split-KV merge kernel
constexpr int kChunk = 16;  // tokens per warp per pipeline stage: one k-step of P V
constexpr int kRows = 16;   // MMA rows
constexpr int kTable = 64;  // sequence pieces staged in shared memory at a time
constexpr int kIndptrCache = 1024;  // kv_indptr / kv_last_page_len entries kept in shared memory from the count pass

struct Args {
  const void* q;
  const void* k;
  const void* v;
  const int* indptr;
  const int* indices;
  const int* last_len;  // may be null: every last page is full
  void* out;
  float* lse;           // may be null
  float* part_o;        // [num_segments + batch][num_qo_heads][head_dim], normalised partial outputs
  float* part_lse;      // [num_segments + batch][num_qo_heads]
  int batch, num_qo_heads, num_kv_heads, group, page_size;
  int num_kv_indices;   // N
  int pages_per_segment, num_segments;
  long long num_pages;
  float scale_log2;     // sm_scale * log2(e)
  int round_robin;      // deal a piece's chunks to warps round-robin from where the previous piece ended
  int solo_tokens;      // pieces of 1..solo_tokens tokens go to one warp whole (0: none)...
  int solo_alone_tokens;  // ...and so does a piece alone in its table batch of 1..solo_alone_tokens tokens
  int fused;            // cooperative launch: merge split sequences in this kernel after a grid-wide barrier
  int prefetch;         // prefetch the segment's page ids into L2 first
  int evict_first;      // hinted K/V copies carry the L2 evict-first policy (read once: recycle their own lines)
};

struct Piece {
  int b;           // sequence
  int page_begin;  // first page position of the piece in kv_indices
  int tokens;      // 0: an empty sequence this segment owns (write zeros and -inf)
  int whole;       // the piece is the whole sequence: write the final output, not a partial
  int solo;        // 1: one warp streams the whole piece and writes its result alone (no CTA merge)
};

constexpr int kNoChunk = 1 << 26;  // "first chunk" of a warp that has none in a solo piece (* kChunk > any solo piece)

// How a piece's chunks are dealt to the warps. A deal counter d (mod warps) runs over the pieces in order, the
// same in every warp: a CTA piece's chunk c goes to warp (d + c) % warps, then d advances by its chunk count
// (round-robin across pieces; without it d stays 0 and every piece starts at warp 0); a solo piece goes whole to
// warp d % warps, then d advances by one.
template <int W>
struct Deal {
  static __device__ __forceinline__ int first(const Piece& p, int d, int warp) {
    if (p.solo) return d == warp ? 0 : kNoChunk;
    return (warp - d + W) % W;
  }
  static __device__ __forceinline__ int step(const Piece& p) { return p.solo ? 1 : W; }
  static __device__ __forceinline__ int advance(const Piece& p, int d, int round_robin) {
    if (p.solo) return (d + 1) % W;
    if (!round_robin) return d;
    const int chunks = (p.tokens >> 4) + ((p.tokens & (kChunk - 1)) != 0);
    return (d + chunks % W) % W;
  }
};

template <int D, int S>
struct Layout {
  // Warps per CTA: 8 (two per scheduler hide each other's MMA/softmax latency), 4 at head_dim 256, where the ring
  // would not fit otherwise.
  static constexpr int kWarps = D == 256 ? 4 : 8;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kChunksPerRow = D / 8;  // 16-byte copies per token row
  static constexpr int kTokPerPass = kChunksPerRow >= 32 ? 1 : 32 / kChunksPerRow;
  static constexpr int kTokPerLane = kChunk / kTokPerPass;
  static constexpr int kTileElems = kChunk * D;  // one K or V chunk
  static constexpr int kIdSlots = S + 1;         // page ids are fetched S chunks ahead of their K/V copies
  static constexpr int kQPieces = kRows * D / 8;                      // 16-byte pieces of the Q tile
  static constexpr int kQVec = (kQPieces + kThreads - 1) / kThreads;  // per thread
  static constexpr bool kQInRegisters = D <= 128;         // at 256 the O accumulators need the registers
  // Shared memory, in this order.
  static constexpr int kRingBytes = kWarps * S * 2 * kTileElems * 2;  // bf16/fp16
  // At the end of a piece a warp's (rows x D) fp32 state goes to the ring stage it consumed last, which no copy
  // targets until the next piece starts: exactly one stage's bytes (16 rows x D x 4 B = K + V of 16 tokens).
  static_assert(kRows * D * 4 == 2 * kTileElems * 2, "a ring stage holds one warp's merge state");
  // m, l, the merge weights (per warp and row), each warp's merge stage, and per-row lse
  static constexpr int kStatBytes = kWarps * kRows * 3 * 4 + kWarps * 4 + kRows * 4;
  static constexpr int kQBytes = kRows * D * 2;
  static constexpr int kIdBytes = kWarps * kIdSlots * kChunk * 2 * 4;  // page id and in-page offset
  static constexpr int kTableBytes = kTable * int(sizeof(Piece));
  static constexpr int kCacheBytes = (2 * kIndptrCache + 1) * 4;
  static constexpr int kSmemBytes =
      kRingBytes + kStatBytes + kQBytes + kIdBytes + kTableBytes + kCacheBytes;
  static_assert(kSmemBytes <= 227 * 1024, "more shared memory than an sm_90 CTA may have");
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

// The per-warp producer walks this warp's chunks (piece k, chunk c = warp, warp + kWarps, ...) with two cursors: one
// copies the chunks' page ids (and stores the in-page offsets) into a small shared ring S chunks ahead, the other
// issues the K/V copies of a chunk from ids that have long arrived. So a warp keeps S - 1 chunks in flight and
// never waits on a page id, even at page_size 1 where every token has its own.
template <int D, int S, class T, bool kPlain>
struct Producer {
  using L = Layout<D, S>;
  using Dl = Deal<L::kWarps>;
  int k, c, seq, dk;     // next chunk to issue, its number in this warp's sequence of chunks, piece k's deal
  int fk, fc, fseq, fdk;  // next chunk whose ids to fetch
  int* ids;          // this warp's [kIdSlots][kChunk] page ids
  int* offs;         // this warp's [kIdSlots][kChunk] in-page offsets, -1 past the piece's end
  uint64_t policy;   // L2 policy of the K/V copies (unused when kPlain: copies without a cache-policy operand)

  static __device__ __forceinline__ void next(const Args& a, const Piece* table, int n, int warp, int& k, int& c,
                                              int& d) {
    while (k < n && c * kChunk >= table[k].tokens) {
      d = Dl::advance(table[k], d, a.round_robin);
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
        const int page = t / a.page_size;
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
  __device__ __forceinline__ void issue(const Args& a, const Piece* table, int n, T* ring, int warp, int lane,
                                        int kvh) {
    __syncwarp();  // every lane is done with the id slot the fetch below may overwrite
    if (k < n) {
      const int stage = seq % S;
      const int slot = (seq % L::kIdSlots) * kChunk;
      T* kt = ring + ((warp * S + stage) * 2) * L::kTileElems;
      T* vt = kt + L::kTileElems;
      const uint32_t k_smem = uint32_t(__cvta_generic_to_shared(kt));
      const uint32_t v_smem = uint32_t(__cvta_generic_to_shared(vt));
      const int chunk = lane % L::kChunksPerRow;
      const long long max_page = a.num_pages - 1;
#pragma unroll
      for (int i = 0; i < L::kTokPerLane; ++i) {
        const int t = lane / L::kChunksPerRow + i * L::kTokPerPass;
        const int toff = offs[slot + t];
        const long long page = min(max((long long)ids[slot + t], 0ll), max_page);  // bad ids stay in bounds
        const long long row = page * a.page_size + max(toff, 0);
        const long long elem = (row * a.num_kv_heads + kvh) * D + chunk * 8;
        const int so = tile_offset<D>(t, chunk) * 2;
        if constexpr (kPlain) {
          cp_async16(k_smem + so, static_cast<const T*>(a.k) + elem, toff >= 0);
          cp_async16(v_smem + so, static_cast<const T*>(a.v) + elem, toff >= 0);
        } else {
          cp_async16(k_smem + so, static_cast<const T*>(a.k) + elem, toff >= 0, policy);
          cp_async16(v_smem + so, static_cast<const T*>(a.v) + elem, toff >= 0, policy);
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
// ahead, so a piece never waits on its Q.
template <int D, int S, class T>
struct QStage {
  using L = Layout<D, S>;
  uint4 v[L::kQVec];
  __device__ __forceinline__ void load(const Args& a, int b, int kvh) {
#pragma unroll
    for (int i = 0; i < L::kQVec; ++i) {
      const int idx = threadIdx.x + i * L::kThreads, row = idx / L::kChunksPerRow, col = idx % L::kChunksPerRow;
      v[i] = make_uint4(0, 0, 0, 0);
      if (idx < L::kQPieces && row < a.group)
        v[i] = __ldg(reinterpret_cast<const uint4*>(static_cast<const T*>(a.q) +
                                                    ((long long)b * a.num_qo_heads + kvh * a.group + row) * D) + col);
    }
  }
  __device__ __forceinline__ void store(T* q_tile) const {
#pragma unroll
    for (int i = 0; i < L::kQVec; ++i) {
      const int idx = threadIdx.x + i * L::kThreads, row = idx / L::kChunksPerRow, col = idx % L::kChunksPerRow;
      if (idx < L::kQPieces) *reinterpret_cast<uint4*>(q_tile + tile_offset<D>(row, col)) = v[i];
    }
  }
};

// A fragment of Q for k-step kk from the shared Q tile.
template <int D>
__device__ __forceinline__ void load_q_fragment(uint32_t q_smem, int kk, int lane, uint32_t (&f)[4]) {
  const int row = (lane & 7) + ((lane >> 3) & 1) * 8, col = kk * 2 + (lane >> 4);
  ldmatrix_x4(f, q_smem + tile_offset<D>(row, col) * 2);
}

// The same fragments straight from global memory (a solo piece; rows >= group are zero).
template <int D, class T>
__device__ __forceinline__ void load_q_global(const Args& a, int b, int kvh, int lane, uint32_t (&f)[D / 16][4]) {
  const int g = lane / 4, t4 = lane % 4;
  const uint32_t* r0 = reinterpret_cast<const uint32_t*>(static_cast<const T*>(a.q) +
                                                         ((long long)b * a.num_qo_heads + kvh * a.group + g) * D);
  const uint32_t* r1 = r0 + 8 * D / 2;
  const bool v0 = g < a.group, v1 = g + 8 < a.group;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    f[kk][0] = v0 ? __ldg(r0 + kk * 8 + t4) : 0u;
    f[kk][1] = v1 ? __ldg(r1 + kk * 8 + t4) : 0u;
    f[kk][2] = v0 ? __ldg(r0 + kk * 8 + 4 + t4) : 0u;
    f[kk][3] = v1 ? __ldg(r1 + kk * 8 + 4 + t4) : 0u;
  }
}

// The fused merge (cooperative launch only): after a grid-wide barrier every CTA takes (sequence, KV head) items
// round-robin and combines the partials of the sequences cut over several segments, in segment order
// (deterministic). Each output element folds its partials four segments at a time (online rescaling), every load
// of a group independent: one L2 round trip per four segments.
template <int D, int S, class T>
__device__ __forceinline__ void merge_in_kernel(const Args& a, const int* indptr_cache) {
  using L = Layout<D, S>;
  cooperative_groups::this_grid().sync();
  const float neg_inf = -__int_as_float(0x7f800000);
  const int nctas = gridDim.x * gridDim.y, cta = blockIdx.y * gridDim.x + blockIdx.x;
  const long long items = (long long)a.batch * a.num_kv_heads;
  const long long o_stride = (long long)a.num_qo_heads * D;  // floats between two segments' partial slots
  for (long long j = cta; j < items; j += nctas) {
    const int b = int(j / a.num_kv_heads), kvh = int(j % a.num_kv_heads);
    int start, end;
    if (b < kIndptrCache) {
      start = clampi(indptr_cache[b], 0, a.num_kv_indices);
      end = clampi(indptr_cache[b + 1], start, a.num_kv_indices);
    } else {
      seq_range(a, b, start, end);
    }
    if (end <= start) continue;
    const int s0 = start / a.pages_per_segment, s1 = (end - 1) / a.pages_per_segment;
    if (s0 == s1) continue;
    const int ns = s1 - s0 + 1;
    const long long head0 = (long long)b * a.num_qo_heads + kvh * a.group;
    for (int i = threadIdx.x; i < a.group * D; i += L::kThreads) {
      const int r = i / D, d = i % D;
      const long long slot0 = ((long long)s0 + b) * a.num_qo_heads + kvh * a.group + r;
      const float* lp = a.part_lse + slot0;
      const float* op = a.part_o + slot0 * D + d;
      float mm = neg_inf, sum = 0.f, acc = 0.f;
      for (int s = 0; s < ns; s += 4) {
        float lv[4], ov[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          const bool in = s + u < ns;
          lv[u] = in ? __ldcg(lp + (long long)(s + u) * a.num_qo_heads) : neg_inf;
          ov[u] = in ? __ldcg(op + (long long)(s + u) * o_stride) : 0.f;
        }
        const float nm = fmaxf(fmaxf(mm, fmaxf(lv[0], lv[1])), fmaxf(lv[2], lv[3]));
        const float sc = exp2f(mm - nm);  // 0 on the first group (mm = -inf, nm finite)
        sum *= sc;
        acc *= sc;
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          const float e = exp2f(lv[u] - nm);
          sum += e;
          acc += e * ov[u];
        }
        mm = nm;
      }
      static_cast<T*>(a.out)[(head0 + r) * D + d] = Mma<T>::from_float(acc / sum);
      if (d == 0 && a.lse) a.lse[head0 + r] = mm + log2f(sum);
    }
  }
}

// The CTA's shared memory, carved in Layout's order.
template <int D, int S, class T>
struct Shared {
  using L = Layout<D, S>;
  T* ring;             // [warp][stage][K | V][16][D]
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
  __device__ __forceinline__ explicit Shared(unsigned char* smem) {
    ring = reinterpret_cast<T*>(smem);
    merge_m = reinterpret_cast<float*>(smem + L::kRingBytes);
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
  }
  // Ring stage `stage` of warp `warp`: its K tile, the V tile follows.
  __device__ __forceinline__ T* k_tile(int warp, int stage) const {
    return ring + ((warp * S + stage) * 2) * L::kTileElems;
  }
};

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
template <int D, int S, class T>
__device__ __forceinline__ int2 find_sequences(const Args& a, const Shared<D, S, T>& sh, int seg_begin, int seg_end,
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
template <int D, int S, class T>
__device__ __forceinline__ void build_table(const Args& a, const Shared<D, S, T>& sh, int tb, int n, int seg_begin,
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
    const int pb = max(start, seg_begin), pe = min(end, seg_end);
    Piece p{b, pb, 0, start >= seg_begin && end <= seg_end, 0};
    if (pe > pb) p.tokens = (pe - pb - 1) * a.page_size + (pe == end ? last : a.page_size);
    else if (start != end) p.whole = -1;  // malformed indptr: nothing of it lies here
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
template <int D, int S, class T>
__device__ __forceinline__ void prefetch_q_rows(const Args& a, int tb, int n, int kvh) {
  const int lines = (a.group * D * int(sizeof(T)) + 127) / 128;  // per piece
  for (int i = threadIdx.x; i < n * lines; i += Layout<D, S>::kThreads) {
    const int piece = i / lines, line = i % lines;
    const char* row = reinterpret_cast<const char*>(static_cast<const T*>(a.q) +
                                                    ((long long)(tb + piece) * a.num_qo_heads + kvh * a.group) * D);
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

// Per chunk, step 2: the online softmax in log2 units (tokens at or past `valid` masked): new row maxima, O and l
// rescaled, and P returned packed as the A fragment of P V (the S accumulator layout already is, k = token).
template <int D, class T>
__device__ __forceinline__ void update_local_state(WarpState<D>& st, const float (&s)[2][4], int valid,
                                                   float scale_log2, int t4, uint32_t (&pa)[4]) {
  using Tr = Mma<T>;
  const float neg_inf = -__int_as_float(0x7f800000);
  float x[2][4];
#pragma unroll
  for (int nb = 0; nb < 2; ++nb)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int tok = nb * 8 + 2 * t4 + (e & 1);
      x[nb][e] = tok < valid ? s[nb][e] * scale_log2 : neg_inf;
    }
  float mx0 = fmaxf(fmaxf(x[0][0], x[0][1]), fmaxf(x[1][0], x[1][1]));
  float mx1 = fmaxf(fmaxf(x[0][2], x[0][3]), fmaxf(x[1][2], x[1][3]));
  mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
  mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
  mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
  mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
  const float mn0 = fmaxf(st.m[0], mx0), mn1 = fmaxf(st.m[1], mx1);  // finite: a chunk has a valid token
  const float al0 = fast_exp2(st.m[0] - mn0), al1 = fast_exp2(st.m[1] - mn1);
  st.m[0] = mn0;
  st.m[1] = mn1;
  float p[2][4];
#pragma unroll
  for (int nb = 0; nb < 2; ++nb) {
    p[nb][0] = fast_exp2(x[nb][0] - mn0);
    p[nb][1] = fast_exp2(x[nb][1] - mn0);
    p[nb][2] = fast_exp2(x[nb][2] - mn1);
    p[nb][3] = fast_exp2(x[nb][3] - mn1);
  }
  st.l[0] = st.l[0] * al0 + (p[0][0] + p[0][1] + p[1][0] + p[1][1]);
  st.l[1] = st.l[1] * al1 + (p[0][2] + p[0][3] + p[1][2] + p[1][3]);
#pragma unroll
  for (int j = 0; j < D / 8; ++j) {
    st.o[j][0] *= al0;
    st.o[j][1] *= al0;
    st.o[j][2] *= al1;
    st.o[j][3] *= al1;
  }
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

// End of a solo piece: its one warp writes the result (or the segment's partial) from its registers.
template <int D, class T>
__device__ __forceinline__ void write_solo_result(const Args& a, const WarpState<D>& st, const Piece& piece, int seg,
                                                  int kvh, int g, int t4) {
  using Tr = Mma<T>;
  const float inv0 = 1.f / st.l[0], inv1 = 1.f / st.l[1];
  const long long head0 = (long long)piece.b * a.num_qo_heads + kvh * a.group;
  const long long slot_head0 = ((long long)seg + piece.b) * a.num_qo_heads + kvh * a.group;
#pragma unroll
  for (int j = 0; j < D / 8; ++j) {
    const int d = j * 8 + 2 * t4;
    if (piece.whole) {
      if (g < a.group)
        *reinterpret_cast<uint32_t*>(static_cast<T*>(a.out) + (head0 + g) * D + d) =
            Tr::pack(st.o[j][0] * inv0, st.o[j][1] * inv0);
      if (g + 8 < a.group)
        *reinterpret_cast<uint32_t*>(static_cast<T*>(a.out) + (head0 + g + 8) * D + d) =
            Tr::pack(st.o[j][2] * inv1, st.o[j][3] * inv1);
    } else {
      if (g < a.group)
        *reinterpret_cast<float2*>(a.part_o + (slot_head0 + g) * D + d) =
            make_float2(st.o[j][0] * inv0, st.o[j][1] * inv0);
      if (g + 8 < a.group)
        *reinterpret_cast<float2*>(a.part_o + (slot_head0 + g + 8) * D + d) =
            make_float2(st.o[j][2] * inv1, st.o[j][3] * inv1);
    }
  }
  if (t4 == 0) {
    float* lse_out = piece.whole ? a.lse : a.part_lse;
    const long long h0 = piece.whole ? head0 : slot_head0;
    if (lse_out && g < a.group) lse_out[h0 + g] = st.m[0] + __log2f(st.l[0]);
    if (lse_out && g + 8 < a.group) lse_out[h0 + g + 8] = st.m[1] + __log2f(st.l[1]);
  }
}

// End of a CTA piece, step 1: the warp parks its (m, l, O) (rows < group) in the ring stage it consumed last, which
// is free: the producer is at most S - 1 chunks ahead of the consumer.
template <int D, int S, class T>
__device__ __forceinline__ void publish_state(const Args& a, const Shared<D, S, T>& sh, const WarpState<D>& st,
                                              int warp, int free_stage, int lane) {
  const int g = lane / 4, t4 = lane % 4;
  float* mo = reinterpret_cast<float*>(sh.k_tile(warp, free_stage));
  __syncwarp();  // every lane's ldmatrix reads of that stage are done
#pragma unroll
  for (int j = 0; j < D / 8; ++j) {
    if (g < a.group)
      *reinterpret_cast<float2*>(mo + merge_offset<D>(g, j * 8 + 2 * t4)) = make_float2(st.o[j][0], st.o[j][1]);
    if (g + 8 < a.group)
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
template <int D, int S, class T>
__device__ __forceinline__ void merge_warps(const Args& a, const Shared<D, S, T>& sh, const Piece& piece, int seg,
                                            int kvh) {
  using L = Layout<D, S>;
  const float neg_inf = -__int_as_float(0x7f800000);
  if (threadIdx.x < kRows * L::kWarps) {
    const int r = threadIdx.x / L::kWarps, w = threadIdx.x % L::kWarps;
    const float mw = sh.merge_m[w * kRows + r];
    float mm = mw;
#pragma unroll
    for (int o = 1; o < L::kWarps; o <<= 1) mm = fmaxf(mm, __shfl_xor_sync(0xffffffffu, mm, o));
    const float e = piece.tokens > 0 ? fast_exp2(mw - mm) : 0.f;  // 0 for a warp without tokens
    float sum = sh.merge_l[w * kRows + r] * e;
#pragma unroll
    for (int o = 1; o < L::kWarps; o <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    sh.merge_w[w * kRows + r] = piece.tokens > 0 ? e / sum : 0.f;
    if (w == 0) sh.merge_lse[r] = piece.tokens > 0 ? mm + __log2f(sum) : neg_inf;
  }
  __syncthreads();
  const int rows = a.group;
  const long long head0 = (long long)piece.b * a.num_qo_heads + kvh * a.group;
  const long long slot_head0 = ((long long)seg + piece.b) * a.num_qo_heads + kvh * a.group;
  for (int i = threadIdx.x; i < rows * D; i += L::kThreads) {
    const int r = i / D, d = i % D;
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
      static_cast<T*>(a.out)[(head0 + r) * D + d] = Mma<T>::from_float(acc);
      if (d == 0 && a.lse) a.lse[head0 + r] = sh.merge_lse[r];
    } else {
      a.part_o[(slot_head0 + r) * D + d] = acc;
      if (d == 0) a.part_lse[slot_head0 + r] = sh.merge_lse[r];
    }
  }
}

// The kernel, stage by stage: find the segment's sequences; per table batch of them, build the piece table, start
// the warps' copy rings and stage Q; per piece, each warp streams its chunks (compute_qk -> update_local_state ->
// accumulate_pv, the next chunk's copies issued first), then either writes the piece alone (solo) or publishes its
// state for merge_warps; finally, when sequences were cut over segments, merge_in_kernel.
template <int D, int S, class T, bool kPlain>
__global__ void __launch_bounds__((Layout<D, S>::kThreads), 1) decode_kernel(const Args a) {
  using L = Layout<D, S>;
  using Dl = Deal<L::kWarps>;
  extern __shared__ __align__(128) unsigned char smem[];
  const Shared<D, S, T> sh(smem);
  __shared__ int counts[2];
  __shared__ unsigned cta_mask[2];  // per table batch: bit k = piece k is a CTA piece (not solo)

  // The merge kernel may be scheduled now; it waits for this grid's completion before reading anything.
  pdl_launch_dependents();

  const int seg = blockIdx.x, kvh = blockIdx.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t4 = lane % 4;  // MMA fragment coordinates: row g (and g + 8), column pair t4
  const int seg_begin = int(min((long long)seg * a.pages_per_segment, (long long)a.num_kv_indices));
  const int seg_end = int(min((long long)seg_begin + a.pages_per_segment, (long long)a.num_kv_indices));
  if (a.prefetch)  // the page ids this segment will fetch, into L2 while the counting pass runs
    for (int i = seg_begin + threadIdx.x * 32; i < seg_end; i += L::kThreads * 32)
      prefetch_l2(a.indices + i);

  const int2 range = find_sequences(a, sh, seg_begin, seg_end, seg == a.num_segments - 1, counts);

  const uint32_t q_smem = uint32_t(__cvta_generic_to_shared(sh.q_tile));
  Producer<D, S, T, kPlain> prod;
  prod.ids = sh.id_ring + warp * L::kIdSlots * kChunk;
  prod.offs = sh.off_ring + warp * L::kIdSlots * kChunk;
  prod.policy = l2_policy(a.evict_first != 0);
  QStage<D, S, T> qnext;
  // Pieces of at most this many tokens go whole to one warp when a table batch holds several pieces (Q fragments
  // from global memory, so only where Q lives in registers).
  const int solo_tokens = L::kQInRegisters ? a.solo_tokens : 0;
  const int solo_alone_tokens = L::kQInRegisters ? a.solo_alone_tokens : 0;
  int deal = 0;  // the deal counter (Deal) at the next piece, the same in every warp
  for (int tb = range.x; tb < range.y; tb += kTable) {
    const int n = min(kTable, range.y - tb);
    if (a.prefetch) prefetch_q_rows<D, S, T>(a, tb, n, kvh);
    __syncthreads();  // the previous batch's table is no longer read
    build_table(a, sh, tb, n, seg_begin, seg_end, solo_tokens, solo_alone_tokens, cta_mask);
    __syncthreads();
    // The CTA pieces in order (the Q tile is staged for them only): next_cta(k) is the first one after piece k.
    const unsigned long long ctas = (unsigned long long)cta_mask[0] | ((unsigned long long)cta_mask[1] << 32);
    auto next_cta = [&](int k) {
      const unsigned long long after = k < 0 ? ctas : k >= 63 ? 0ull : ctas & ~((2ull << k) - 1);
      return after ? __ffsll((long long)after) - 1 : n;
    };
    const int first_cta = next_cta(-1);
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

    int consumed = 0;  // this warp's chunks consumed in this batch; chunk i sits in ring stage i % S
    for (int k = 0; k < n; ++k) {
      const Piece piece = sh.table[k];
      WarpState<D> st;
      st.reset();
      const int c0 = Dl::first(piece, deal, warp), step = Dl::step(piece);
      deal = Dl::advance(piece, deal, a.round_robin);
      if (piece.tokens > c0 * kChunk) {
        uint32_t qf[L::kQInRegisters ? D / 16 : 1][4];
        if constexpr (L::kQInRegisters) {
          if (piece.solo) {
            load_q_global<D, T>(a, piece.b, kvh, lane, qf);
          } else {
#pragma unroll
            for (int kk = 0; kk < D / 16; ++kk) load_q_fragment<D>(q_smem, kk, lane, qf[kk]);
          }
        }
        for (int c = c0; c * kChunk < piece.tokens; c += step) {
          prod.issue(a, sh.table, n, sh.ring, warp, lane, kvh);
          cp_async_wait<S - 1>();
          __syncwarp();  // this chunk's copies, made by all lanes, are visible to all lanes
          const T* kt = sh.k_tile(warp, consumed++ % S);
          const uint32_t k_smem = uint32_t(__cvta_generic_to_shared(kt));
          const uint32_t v_smem = uint32_t(__cvta_generic_to_shared(kt + L::kTileElems));
          float s[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
          compute_qk<D, S, T>(qf, k_smem, q_smem, lane, s);
          uint32_t pa[4];
          update_local_state<D, T>(st, s, piece.tokens - c * kChunk, a.scale_log2, t4, pa);
          accumulate_pv<D, T>(st, pa, v_smem, lane);
        }
      }
      st.reduce_l();
      if (piece.solo) {  // the owner alone writes the result from its registers: no merge, no barrier
        if (piece.tokens > c0 * kChunk) write_solo_result<D, T>(a, st, piece, seg, kvh, g, t4);
        continue;
      }
      publish_state(a, sh, st, warp, (consumed + S - 1) % S, lane);
      __syncthreads();
      if (piece.whole >= 0) merge_warps(a, sh, piece, seg, kvh);
      // Every warp read this piece's Q before the barrier above: stage the next CTA piece's, fetch the one after.
      const int next = next_cta(k);
      if (next < n) {
        qnext.store(sh.q_tile);
        const int after = next_cta(next);
        if (after < n) qnext.load(a, sh.table[after].b, kvh);
      }
      __syncthreads();  // the merge area is free again and the next Q tile complete
    }
    cp_async_wait<0>();  // nothing real is left in flight, but leave no group behind
  }
  if (a.fused) merge_in_kernel<D, S, T>(a, sh.indptr_cache);
}


// Combines the partials of each sequence that spans several segments, in segment order (deterministic).
template <int D, class T>
__global__ void __launch_bounds__(kMergeThreads) merge_kernel(const Args a) {
  pdl_wait();
  const int b = blockIdx.x, kvh = blockIdx.y;
  int start, end;
  seq_range(a, b, start, end);
  if (end <= start) return;
  const int s0 = start / a.pages_per_segment, s1 = (end - 1) / a.pages_per_segment;
  if (s0 == s1) return;
  const long long head0 = (long long)b * a.num_qo_heads + kvh * a.group;
  for (int i = threadIdx.x; i < a.group * D; i += kMergeThreads) {
    const int r = i / D, d = i % D;
    const int h = kvh * a.group + r;
    float mm = -__int_as_float(0x7f800000);
    for (int s = s0; s <= s1; ++s) mm = fmaxf(mm, a.part_lse[((long long)s + b) * a.num_qo_heads + h]);
    float acc = 0.f, sum = 0.f;
    for (int s = s0; s <= s1; ++s) {
      const long long slot = ((long long)s + b) * a.num_qo_heads + h;
      const float wt = exp2f(a.part_lse[slot] - mm);
      sum += wt;
      acc += wt * a.part_o[slot * D + d];
    }
    static_cast<T*>(a.out)[(head0 + r) * D + d] = Mma<T>::from_float(acc / sum);
    if (d == 0 && a.lse) a.lse[head0 + r] = mm + log2f(sum);
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

Args make_args(const kindex_paged_decode_params& p, const Plan& plan, void* workspace) {
  Args a{};
  a.q = p.q;
  a.k = p.k_cache;
  a.v = p.v_cache;
  a.indptr = p.kv_indptr;
  a.indices = p.kv_indices;
  a.last_len = p.page_size == 1 ? nullptr : p.kv_last_page_len;
  a.out = p.output;
  a.lse = p.lse;
  float* part = reinterpret_cast<float*>(static_cast<char*>(workspace) + plan.validate_bytes);
  const long long slots = plan.num_segments + p.batch_size;
  a.part_o = plan.partial_bytes ? part : nullptr;
  a.part_lse = plan.partial_bytes ? part + slots * p.num_qo_heads * p.head_dim : nullptr;
  a.batch = p.batch_size;
  a.num_qo_heads = p.num_qo_heads;
  a.num_kv_heads = p.num_kv_heads;
  a.group = p.num_qo_heads / p.num_kv_heads;
  a.page_size = p.page_size;
  a.num_kv_indices = int(p.num_kv_indices);
  a.pages_per_segment = int(plan.pages_per_segment);
  a.num_segments = int(plan.num_segments);
  a.num_pages = p.num_pages;
  a.scale_log2 = p.sm_scale * 1.4426950408889634f;
  const Tuning& tune = plan.tuning;
  a.round_robin = tune.round_robin ? 1 : 0;
  a.solo_tokens = std::clamp(tune.solo_tokens, 0, 1 << 20);
  a.solo_alone_tokens = std::clamp(tune.solo_alone_tokens, 0, 1 << 20);
  a.prefetch = tune.prefetch_ids ? 1 : 0;
  a.evict_first = tune.evict_first ? 1 : 0;
  a.fused = plan.num_segments > 1 && plan.fused_merge ? 1 : 0;
  return a;
}

template <int D, int S, class T, bool kPlain>
cudaError_t run(const Args& a, const Tuning& tune, cudaStream_t stream) {
  // The shared-memory limit was raised when the plan asked for this kernel's occupancy (ctas_per_sm).
  constexpr int smem = Layout<D, S>::kSmemBytes;
  if (a.fused) {  // one wave by construction (make_plan): a cooperative launch, merged after a grid barrier
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(a.num_segments, a.num_kv_heads);
    cfg.blockDim = dim3(Layout<D, S>::kThreads);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeCooperative;
    attr.val.cooperative = 1;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    return cudaLaunchKernelEx(&cfg, decode_kernel<D, S, T, kPlain>, a);
  }
  decode_kernel<D, S, T, kPlain><<<dim3(a.num_segments, a.num_kv_heads), Layout<D, S>::kThreads, smem, stream>>>(a);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess || a.num_segments == 1 || tune.merge == 2) return err;

  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(a.batch, a.num_kv_heads);
  cfg.blockDim = dim3(kMergeThreads);
  cfg.stream = stream;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = tune.programmatic_merge ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, merge_kernel<D, T>, a);
}

template <int D, int S>
cudaError_t run_dtype(const kindex_paged_decode_params& p, const Args& a, const Plan& plan, cudaStream_t stream) {
  const bool bf = p.dtype == KINDEX_DTYPE_BF16;
  if (plan.plain_copies)
    return bf ? run<D, S, __nv_bfloat16, true>(a, plan.tuning, stream) : run<D, S, __half, true>(a, plan.tuning, stream);
  return bf ? run<D, S, __nv_bfloat16, false>(a, plan.tuning, stream) : run<D, S, __half, false>(a, plan.tuning, stream);
}

// Raises both copy variants' shared-memory limit (launches rely on it) and returns the resident CTAs per SM of the
// fewer (they differ only in the copy instruction).
template <int D, int S, class T>
int occupancy() {
  constexpr int smem = Layout<D, S>::kSmemBytes;
  int fewest = 1 << 20;
  for (const void* kernel : {reinterpret_cast<const void*>(decode_kernel<D, S, T, false>),
                             reinterpret_cast<const void*>(decode_kernel<D, S, T, true>)}) {
    int blocks = 0;
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, Layout<D, S>::kThreads, smem) != cudaSuccess)
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
// for head_dim 64 / 128 / 256 (anything else is refused by make_plan) and S = 2 or the shipped depth.
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
  return with_config(head_dim, stages, []<int D, int S>() { return size_t(Layout<D, S>::kSmemBytes); });
}

int ring_stages(int head_dim, size_t smem_limit) {
  const int shipped = head_dim == 64 ? kStages<64> : kStages<128>;  // kStages<128> == kStages<256>
  if (ring_smem_bytes(head_dim, shipped) <= smem_limit) return shipped;
  return ring_smem_bytes(head_dim, 2) <= smem_limit ? 2 : 0;
}

int ctas_per_sm(kindex_dtype dtype, int head_dim, int stages) {
  return with_config(head_dim, stages, [&]<int D, int S>() {
    return dtype == KINDEX_DTYPE_BF16 ? occupancy<D, S, __nv_bfloat16>() : occupancy<D, S, __half>();
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

int launch_decode(const kindex_paged_decode_params& p, const Plan& plan, void* workspace, cudaStream_t stream) {
  const Args a = make_args(p, plan, workspace);
  return with_config(p.head_dim, plan.stages,
                     [&]<int D, int S>() { return int(run_dtype<D, S>(p, a, plan, stream)); });
}

}  // namespace kindex::decode::detail
