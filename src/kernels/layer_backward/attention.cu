// Tensor-core kernels of the L2/003 attention backward (see attention.hpp for what each computes).
// mma.sync m16n8k16 bf16 -> fp32, operands staged in shared memory by a two-stage cp.async pipeline, 16-byte
// chunks XOR-swizzled by (row & 7) so that ldmatrix reads of 8 rows hit 8 different bank groups. The wgmma variant
// (kWgmma, AttentionKernels::wgmma) is the same kernels with the matmuls on Hopper warpgroup MMA: the tiles wgmma
// reads are stored in its 128-byte-swizzle layout (common/wgmma.cuh; for 64-column tiles that is the very layout
// above), everything else (loads, dS, rounding, epilogues, grids, splits) is shared.
#include "kernels/layer_backward/attention.hpp"

#include <cuda_bf16.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "kernels/common/ptx.cuh"
#include "kernels/common/wgmma.cuh"

namespace kindex::kernels::backward {
namespace {

using bf16 = __nv_bfloat16;
using namespace kindex::ptx;

constexpr int kBlock = 64;    // keys per tile of the row kernel, queries per tile of the column kernels
constexpr int kDim = 128;     // head_dim
constexpr int kHeadsPerGroup = 4;
constexpr int kQProjCols = 4096, kQkvCols = 6144, kKOffset = 4096, kVOffset = 5120, kKvCols = 1024;
constexpr uint32_t kRowTileBytes = kBlock * kDim * 2;  // 64 x 128 bf16 = 16 KB
// A CTA has kWarps warps (4 or 8) of 16 rows each: the row kernel owns 16 kWarps query rows, a column kernel
// 16 kWarps key rows. Every warp does exactly the same arithmetic in the same order whatever kWarps is, so the
// results are bit-identical; 8 warps halve the re-reads of the shared 64x128 operand tiles (V, K, dO, Q) from L2.

// Byte offset of element (r, c) in a tile whose rows are `chunks` 16-byte chunks long (8 or 16).
__device__ __forceinline__ uint32_t swz(int r, int c, int chunks) {
  return uint32_t(r * chunks * 16 + ((((c >> 3) ^ (r & 7))) << 4) + (c & 7) * 2);
}

// Rounds to the nearest bf16 (the reference's rounding after every bf16 op).
__device__ __forceinline__ float rb(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }
__device__ __forceinline__ uint32_t pack(float lo, float hi) { return ptx::Mma<bf16>::pack(lo, hi); }
__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  ptx::Mma<bf16>::run(c, a, b0, b1);
}
// acc (N n-tiles of 8 columns) += a (16 x 16) * B, where load_b(bf, np) loads the B fragments of columns
// 16 np .. 16 np + 15 (two n-tiles).
template <int N, class LoadB>
__device__ __forceinline__ void mma_row(float (&acc)[N][4], const uint32_t (&a)[4], LoadB load_b) {
#pragma unroll
  for (int np = 0; np < N / 2; ++np) {
    uint32_t bf[4];
    load_b(bf, np);
    mma(acc[2 * np], a, bf[0], bf[1]);
    mma(acc[2 * np + 1], a, bf[2], bf[3]);
  }
}
__device__ __forceinline__ float2 unpack(uint32_t u) {
  __nv_bfloat162 v;
  memcpy(&v, &u, 4);
  return __bfloat1622float2(v);
}
__device__ __forceinline__ float2 load2(const bf16* p) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(p));
}

// Fragment addresses (lane-dependent) for a 16x16 block of a swizzled tile with `ch` chunks per row.
// A operand stored [m][k]: block at (m0, k0).
__device__ __forceinline__ uint32_t a_addr(uint32_t tile, int m0, int k0, int lane, int ch) {
  return tile + swz(m0 + (lane & 15), k0 + (lane >> 4) * 8, ch);
}
// A operand stored [k][m] (transposed in memory): block at (m0, k0); use with ldmatrix_x4_trans.
__device__ __forceinline__ uint32_t at_addr(uint32_t tile, int m0, int k0, int lane, int ch) {
  return tile + swz(k0 + (lane & 7) + (lane >> 4) * 8, m0 + ((lane >> 3) & 1) * 8, ch);
}
// B operand for two adjacent n-tiles, stored [n][k]: regs {b0,b1} of n0..n0+7, {b0,b1} of n0+8..n0+15.
__device__ __forceinline__ uint32_t bn_addr(uint32_t tile, int n0, int k0, int lane, int ch) {
  return tile + swz(n0 + (lane & 7) + ((lane >> 4) << 3), k0 + ((lane >> 3) & 1) * 8, ch);
}
// B operand for two adjacent n-tiles, stored [k][n]; use with ldmatrix_x4_trans.
__device__ __forceinline__ uint32_t bk_addr(uint32_t tile, int k0, int n0, int lane, int ch) {
  return tile + swz(k0 + (lane & 7) + ((lane >> 3) & 1) * 8, n0 + (lane >> 4) * 8, ch);
}

// kRows rows x 128 columns starting at `row0` of a [rows, ld] bf16 matrix, loaded by kThreads threads; rows >= nrows
// are zero-filled. Stored in 256-byte rows for ldmatrix, or (kSw128) in wgmma's two 64-column swizzled blocks.
template <int kRows, int kThreads, bool kSw128 = false>
__device__ __forceinline__ void load_rows(uint32_t tile, const bf16* base, int64_t ld, int row0, int nrows,
                                          int tid) {
  static_assert(kRows * 16 % kThreads == 0);
#pragma unroll
  for (int k = 0; k < kRows * 16 / kThreads; ++k) {
    const int q = tid + k * kThreads, r = q >> 4, ch = q & 15, row = row0 + r;
    const bool valid = row < nrows;
    const uint32_t offset = kSw128 ? sw128_chunk_offset(kRows, r, ch) : uint32_t(r * 256 + ((ch ^ (r & 7)) << 4));
    cp_async16(tile + offset, base + (valid ? row * ld + ch * 8 : 0), valid);
  }
}

// The first 1024-byte boundary at or after the dynamic shared memory's start (wgmma's swizzled tiles need it; the
// wgmma kernels ask for 1 KB more).
__device__ __forceinline__ uint8_t* align_1024(uint8_t* smem) {
  return smem + ((1024u - uint32_t(__cvta_generic_to_shared(smem)) % 1024u) % 1024u);
}

// The kRows x kCols attn_weights tile at (i0, j0) of one (batch, head) [S, S] matrix stored with row stride `ld` (a
// multiple of 8 elements, so every 16-byte chunk is aligned; columns S..ld-1 hold zeros); entries outside the
// matrix are 0. Tile rows are kCols / 8 swizzled 16-byte chunks, or (kSw128) wgmma's 64-column swizzled blocks (the
// same bytes when kCols is 64).
template <int kRows, int kCols, int kThreads, bool kSw128 = false>
__device__ __forceinline__ void load_a_tile(uint32_t tile, const bf16* a, int S, int64_t ld, int i0, int j0, int tid) {
  constexpr int kChunks = kCols / 8;
  static_assert(kRows * kChunks % kThreads == 0);
#pragma unroll
  for (int k = 0; k < kRows * kChunks / kThreads; ++k) {
    const int q = tid + k * kThreads, r = q / kChunks, ch = q % kChunks, row = i0 + r, col = j0 + ch * 8;
    const bool valid = row < S && col < S;  // a chunk that starts inside the row ends inside ld
    const uint32_t offset =
        kSw128 ? sw128_chunk_offset(kRows, r, ch) : uint32_t(r * (kChunks * 16) + ((ch ^ (r & 7)) << 4));
    cp_async16(tile + offset, a + (valid ? row * ld + col : 0), valid);
  }
}

// Copies attn_weights [rows, S] into [rows, ld] (ld = S rounded up to 8) with zero padding: odd seq_len leaves the
// rows unaligned for 16-byte loads, and one extra pass over A is cheaper than element-wise tile loads.
__global__ void pad_rows_kernel(const uint16_t* __restrict__ src, uint4* __restrict__ dst, int64_t rows, int S,
                                int64_t ld) {
  const int64_t chunks_per_row = ld / 8, total = rows * chunks_per_row;
  for (int64_t q = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; q < total; q += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = q / chunks_per_row;
    const int c0 = int(q - row * chunks_per_row) * 8;
    const uint16_t* in = src + row * S;
    uint16_t v[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) v[e] = c0 + e < S ? __ldg(in + c0 + e) : uint16_t(0);
    uint4 out;
    memcpy(&out, v, 16);
    dst[q] = out;
  }
}

// out[c], out[c+64] for c < 64 from g = round(grad): the reference's RoPE backward, every op rounded to bf16:
//   out[c] = rb(g[c] cos[c]) + rb(g[c+64] sin[c+64]);  out[c+64] = rb(g[c+64] cos[c+64]) - rb(g[c] sin[c]).
__device__ __forceinline__ void rope_pair(float g_lo, float g_hi, float cos_lo, float cos_hi, float sin_lo,
                                          float sin_hi, float& out_lo, float& out_hi) {
  out_lo = rb(g_lo * cos_lo) + rb(g_hi * sin_hi);
  out_hi = rb(g_hi * cos_hi) - rb(g_lo * sin_lo);
}

// The epilogue store_rows and column_reduce_kernel share: rounded gradients (g0, g1) of columns c, c + 1 and
// (h0, h1) of c + 64, c + 65 of one dQKV row, through the RoPE backward (that token's cos/sin rows) when `rope`.
__device__ __forceinline__ void store_quad(uint32_t* out, int c, float g0, float g1, float h0, float h1, bool rope,
                                           const bf16* cos_row, const bf16* sin_row) {
  if (rope) {
    const float2 cl = load2(cos_row + c), ch = load2(cos_row + c + 64);
    const float2 sl = load2(sin_row + c), sh = load2(sin_row + c + 64);
    float o0, o1, p0, p1;
    rope_pair(g0, h0, cl.x, ch.x, sl.x, sh.x, o0, p0);
    rope_pair(g1, h1, cl.y, ch.y, sl.y, sh.y, o1, p1);
    g0 = o0, g1 = o1, h0 = p0, h1 = p1;
  }
  out[c / 2] = pack(g0, g1);
  out[(c + 64) / 2] = pack(h0, h1);
}

// Writes a warp's 16 x 128 fp32 accumulator (rows row_base + g, + 8) rounded to bf16, through the RoPE backward
// when `rope`, into dQKV columns col0 .. col0 + 127.
__device__ __forceinline__ void store_rows(const float (&acc)[16][4], bool rope, const AttentionArgs& p, int b,
                                           int row_base, int col0, int lane) {
  const int g = lane >> 2, t = lane & 3, S = p.seq_len;
  const bf16* cos = static_cast<const bf16*>(p.cos);
  const bf16* sin = static_cast<const bf16*>(p.sin);
  bf16* out_base = static_cast<bf16*>(p.grad_qkv);
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = row_base + g + half * 8;
    if (row >= S) continue;
    const int64_t token = int64_t(b) * S + row;
    uint32_t* out = reinterpret_cast<uint32_t*>(out_base + token * kQkvCols + col0);
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      const int c = nt * 8 + 2 * t;
      store_quad(out, c, rb(acc[nt][half * 2]), rb(acc[nt][half * 2 + 1]), rb(acc[nt + 8][half * 2]),
                 rb(acc[nt + 8][half * 2 + 1]), rope, cos + token * kDim, sin + token * kDim);
    }
  }
}

// Writes a warp's 16 x 128 fp32 accumulator (rows row_base + g, + 8; rows >= seq_len skipped) unrounded into a
// token-major [B*S, 1024] fp32 partial-sum buffer, columns col0 .. col0 + 127.
__device__ __forceinline__ void store_partial(const float (&acc)[16][4], float* out, int b, int S, int row_base,
                                              int col0, int lane) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = row_base + g + half * 8;
    if (row >= S) continue;
    float2* o = reinterpret_cast<float2*>(out + (int64_t(b) * S + row) * kKvCols + col0);
#pragma unroll
    for (int nt = 0; nt < 16; ++nt) o[nt * 4 + t] = make_float2(acc[nt][half * 2], acc[nt][half * 2 + 1]);
  }
}

// Sums the `splits` fp32 partials of dK or dV in a fixed order (deterministic), then does exactly what store_rows
// does with the sum: rounds, applies the RoPE backward when kRope, writes dQKV columns col0 .. col0 + 1023. One
// thread per (token, KV group, column pair 2q) covering columns 2q, 2q + 1 and 2q + 64, 2q + 65.
template <bool kRope>
__global__ void column_reduce_kernel(const AttentionArgs p, const float* __restrict__ partials, int splits, int col0) {
  const int64_t tokens = int64_t(p.batch_size) * p.seq_len;
  const int64_t q = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (q >= tokens * 256) return;
  const int64_t token = q >> 8;
  const int grp = int(q >> 5) & 7, c = int(q & 31) * 2;
  const float* in = partials + token * kKvCols + grp * kDim + c;
  float2 lo = *reinterpret_cast<const float2*>(in), hi = *reinterpret_cast<const float2*>(in + 64);
  for (int sp = 1; sp < splits; ++sp) {
    in += tokens * kKvCols;
    const float2 l = *reinterpret_cast<const float2*>(in), h = *reinterpret_cast<const float2*>(in + 64);
    lo.x += l.x;
    lo.y += l.y;
    hi.x += h.x;
    hi.y += h.y;
  }
  uint32_t* out = reinterpret_cast<uint32_t*>(static_cast<bf16*>(p.grad_qkv) + token * kQkvCols + col0 + grp * kDim);
  store_quad(out, c, rb(lo.x), rb(lo.y), rb(hi.x), rb(hi.y), kRope, static_cast<const bf16*>(p.cos) + token * kDim,
             static_cast<const bf16*>(p.sin) + token * kDim);
}

// The row kernel in two launches (the column kernel needs dS from the second):
//   RowPass::row_sums: D_i = sum_j round(dP_ij) A_ij, with dP = dO V^T    (reads dO, V, A)
//   RowPass::grad_q:   dS from dP and D, dQ = dS K, RoPE; writes dS      (reads dO, V, K, A and D)
// With kStoredDp (AttentionSchedule::store_dp) the row_sums pass also writes round(dP) into the dS buffer and the
// grad_q pass reads it back instead of recomputing it (reads dP, K, A; overwrites dP with dS in place): one matmul
// fewer per tile for two more passes over a dS-sized buffer. Both give bit-identical results: round(dP) is the
// same bf16 value either way.
enum class RowPass { row_sums, grad_q };
template <RowPass kPass, bool kStoredDp, int kWarps, bool kWgmma = false>
struct RowLayout {
  static constexpr int kThreads = kWarps * 32, kRows = kWarps * 16;
  static constexpr bool kSums = kPass == RowPass::row_sums;
  static constexpr bool kNeedDo = kSums || !kStoredDp;  // dP is computed here
  static constexpr uint32_t kDoBytes = kRows * kDim * 2;      // the CTA's dO rows
  static constexpr uint32_t kATileBytes = kRows * kBlock * 2;  // kRows x 64 tile of A (or dP)
  // Stage: [V] [K] A [dP], the bracketed ones only when used.
  static constexpr uint32_t kKOffset = kNeedDo ? kRowTileBytes : 0;
  static constexpr uint32_t kAOffset = kKOffset + (kSums ? 0 : kRowTileBytes);
  static constexpr uint32_t kDpOffset = kAOffset + kATileBytes;
  static constexpr uint32_t kStage = kDpOffset + (!kSums && kStoredDp ? kATileBytes : 0);
  static constexpr uint32_t kStagesOffset = kNeedDo ? kDoBytes : 0;  // after the dO tile
  static constexpr uint32_t kSmem = kStagesOffset + 2 * kStage + (kWgmma ? 1024 : 0);
  // 4 warps: 64 KB passes fit 3 CTAs per SM when they keep to 168 registers. 8 warps: 96 KB passes fit 2 CTAs per
  // SM at 128 registers (no spills: checked with -Xptxas -v); the 128 KB recompute_dp grad_q pass runs 1, and so
  // does the wgmma grad_q pass (the dQ accumulators and the tile's dS fragments spill at 128 registers).
  static constexpr int kMinBlocks = kWarps == 4 ? (kSmem <= 72 * 1024 ? 3 : 1)
                                                : (kSmem <= 112 * 1024 && (kSums || !kWgmma) ? 2 : 1);
};

// Longer than ~150 lines on purpose: one fused pass over a row tile (loads, the QK^T and dO V^T products, softmax
// recompute, dS, the dQ accumulation) whose registers and shared-memory ring live across all of it; split into calls
// it would only move the same state through parameters (the kernel is force-inlined anyway).
template <RowPass kPass, bool kStoredDp, int kWarps, bool kWgmma>
__device__ __forceinline__ void row_kernel_body(const AttentionArgs& p) {
  using L = RowLayout<kPass, kStoredDp, kWarps, kWgmma>;
  constexpr bool kSums = L::kSums;
  constexpr int kThreads = L::kThreads, kRows = L::kRows;
  extern __shared__ __align__(128) uint8_t smem_raw[];
  uint8_t* smem = kWgmma ? align_1024(smem_raw) : smem_raw;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int S = p.seq_len, i0 = blockIdx.x * kRows, h = blockIdx.y, b = blockIdx.z;
  const int64_t bh = int64_t(b) * 32 + h;
  const int nJ = (S + kBlock - 1) / kBlock;
  const int64_t ld = p.attn_row_stride;
  const bf16* attn = static_cast<const bf16*>(p.attn_weights) + bh * S * ld;
  const bf16* v = static_cast<const bf16*>(p.value_states) + bh * S * kDim;
  const bf16* k = static_cast<const bf16*>(p.key_states) + bh * S * kDim;
  const bf16* dO = static_cast<const bf16*>(p.grad_attn_output) + int64_t(b) * S * kQProjCols + h * kDim;
  const int64_t padded = int64_t(nJ) * kBlock;
  // With 128-row CTAs the last CTA's upper warps can lie past the padded D/dS rows (a multiple of 64): they load
  // zeros and compute with the others but write nothing.
  const bool live = i0 + warp * 16 < padded;
  float* D = p.row_sums + bh * padded + i0 + warp * 16 + g;  // rows g and g + 8 of this warp
  // The [padded, padded] dP/dS matrix of this (batch, head); it covers every tile, and rows/columns past seq_len
  // hold 0 (A is zero-filled there).
  bf16* scores = static_cast<bf16*>(p.grad_scores) + bh * padded * padded;
  // Rows g and g + 8 of this warp, as 32-bit pairs of columns starting at 2t.
  uint32_t* scores_out = reinterpret_cast<uint32_t*>(scores + (i0 + warp * 16 + g) * padded + 2 * t);
  const uint32_t base = uint32_t(__cvta_generic_to_shared(smem));
  const uint32_t s_do = base;
  auto stage_off = [&](int it) { return L::kStagesOffset + uint32_t(it & 1) * L::kStage; };

  auto issue = [&](int it) {
    const int j0 = it * kBlock;
    const uint32_t st = base + stage_off(it);
    if (L::kNeedDo) load_rows<kBlock, kThreads, kWgmma>(st, v, kDim, j0, S, tid);
    if (!kSums) load_rows<kBlock, kThreads, kWgmma>(st + L::kKOffset, k, kDim, j0, S, tid);
    load_a_tile<kRows, kBlock, kThreads>(st + L::kAOffset, attn, S, ld, i0, j0, tid);
    if (!kSums && kStoredDp)
      load_a_tile<kRows, kBlock, kThreads>(st + L::kDpOffset, scores, int(padded), padded, i0, j0, tid);
  };

  if (L::kNeedDo) load_rows<kRows, kThreads>(s_do, dO, kQProjCols, i0, S, tid);
  issue(0);
  cp_async_commit();

  uint32_t dof[8][4];
  float dq[16][4];
#pragma unroll
  for (int n = 0; n < 16; ++n) dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.f;
  // D of rows g and g + 8: partial per thread while summing, complete (written by the row_sums pass) for grad_q.
  float d_lo = 0.f, d_hi = 0.f;
  if (!kSums && live) {
    d_lo = D[0];
    d_hi = D[8];
  }

  for (int it = 0; it < nJ; ++it) {
    if (it + 1 < nJ) issue(it + 1);
    cp_async_commit();
    cp_async_wait<1>();
    if constexpr (kWgmma) fence_proxy_async_shared();  // cp.async wrote what wgmma (async proxy) reads
    __syncthreads();
    const uint32_t st = base + stage_off(it), sv = st, sk = st + L::kKOffset, sa = st + L::kAOffset;
    const int64_t col = (int64_t(it) * kBlock) / 2;  // this tile's first column pair in scores_out

    float dp[8][4];  // round(dP) in the mma accumulator layout: [n-tile][(g, 2t) (g, 2t+1) (g+8, 2t) (g+8, 2t+1)]
    if (L::kNeedDo) {
      if (it == 0) {
#pragma unroll
        for (int kc = 0; kc < 8; ++kc) ldmatrix_x4(dof[kc], a_addr(s_do, warp * 16, kc * 16, lane, 16));
      }
#pragma unroll
      for (int n = 0; n < 8; ++n) dp[n][0] = dp[n][1] = dp[n][2] = dp[n][3] = 0.f;
      if constexpr (kWgmma) {
        // dP (64 x 64) = dO (registers, the fragments above) x V^T (V tile K-major): 8 k-steps over head_dim.
        float(&d)[32] = reinterpret_cast<float(&)[32]>(dp);
        wgmma_fence_operands(d);
        wgmma_fence();
#pragma unroll
        for (int kc = 0; kc < 8; ++kc) Wgmma<64>::rs<kKMajor>(d, dof[kc], kmajor_descriptor(sv, kBlock, kc * 16), true);
        wgmma_commit();
        wgmma_wait<0>();
        wgmma_fence_operands(d);
      } else {
#pragma unroll
        for (int kc = 0; kc < 8; ++kc) {
          mma_row(dp, dof[kc], [&](uint32_t(&bf)[4], int np) {
            ldmatrix_x4(bf, bn_addr(sv, np * 16, kc * 16, lane, 16));
          });
        }
      }
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) dp[nt][e] = rb(dp[nt][e]);
      if (kSums && kStoredDp && live) {
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
          scores_out[col + nt * 4] = pack(dp[nt][0], dp[nt][1]);
          scores_out[col + 4 * padded + nt * 4] = pack(dp[nt][2], dp[nt][3]);
        }
      }
    }

    if (kSums) {
#pragma unroll
      for (int kc = 0; kc < 4; ++kc) {
        uint32_t af[4];  // A in the accumulator layout of dp (two n-tiles per 16-column block)
        ldmatrix_x4(af, a_addr(sa, warp * 16, kc * 16, lane, 8));
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int nt = 2 * kc + e;
          const float2 al = unpack(af[2 * e]), ah = unpack(af[2 * e + 1]);
          d_lo += dp[nt][0] * al.x + dp[nt][1] * al.y;
          d_hi += dp[nt][2] * ah.x + dp[nt][3] * ah.y;
        }
      }
    } else {
      // One 16-column block of dS at a time (fewer live registers): form it, store it, multiply it into dQ (mma.sync),
      // or keep it as a wgmma A fragment for the four k-steps after the loop (wgmma must not read registers that
      // are still being written, so the tile's dS is formed first).
      [[maybe_unused]] uint32_t ds_tile[4][4];
      auto ds_block = [&](int kc, const float (&dpb)[2][4]) {
        uint32_t af[4], dsf[4];
        ldmatrix_x4(af, a_addr(sa, warp * 16, kc * 16, lane, 8));
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int nt = 2 * kc + e;
          const float2 al = unpack(af[2 * e]), ah = unpack(af[2 * e + 1]);
          const float s0 = rb(rb(al.x * (dpb[e][0] - d_lo)) * p.scaling);
          const float s1 = rb(rb(al.y * (dpb[e][1] - d_lo)) * p.scaling);
          const float s2 = rb(rb(ah.x * (dpb[e][2] - d_hi)) * p.scaling);
          const float s3 = rb(rb(ah.y * (dpb[e][3] - d_hi)) * p.scaling);
          dsf[2 * e] = pack(s0, s1);
          dsf[2 * e + 1] = pack(s2, s3);
          // Stored dP of this tile was read into shared memory before this write (cp.async completed above).
          if (live) {
            scores_out[col + nt * 4] = dsf[2 * e];
            scores_out[col + 4 * padded + nt * 4] = dsf[2 * e + 1];
          }
        }
        if constexpr (kWgmma) {
#pragma unroll
          for (int e = 0; e < 4; ++e) ds_tile[kc][e] = dsf[e];
        } else {
          mma_row(dq, dsf, [&](uint32_t(&bf)[4], int np) {
            ldmatrix_x4_trans(bf, bk_addr(sk, kc * 16, np * 16, lane, 16));
          });
        }
      };
      if constexpr (L::kNeedDo) {
#pragma unroll
        for (int kc = 0; kc < 4; ++kc) {
          float dpb[2][4];
#pragma unroll
          for (int e = 0; e < 2; ++e)
#pragma unroll
            for (int r = 0; r < 4; ++r) dpb[e][r] = dp[2 * kc + e][r];
          ds_block(kc, dpb);
        }
      } else {
        // Not unrolled with 8 mma.sync warps (128 registers): the unrolled loop spills. The wgmma form keeps the
        // tile's dS fragments in registers (ds_tile), which needs static indices: unrolled.
#pragma unroll(kWarps == 8 && !kWgmma ? 1 : 4)
        for (int kc = 0; kc < 4; ++kc) {
          uint32_t dpf[4];  // stored round(dP), loaded like A
          ldmatrix_x4(dpf, a_addr(st + L::kDpOffset, warp * 16, kc * 16, lane, 8));
          float dpb[2][4];
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float2 lo = unpack(dpf[2 * e]), hi = unpack(dpf[2 * e + 1]);
            dpb[e][0] = lo.x;
            dpb[e][1] = lo.y;
            dpb[e][2] = hi.x;
            dpb[e][3] = hi.y;
          }
          ds_block(kc, dpb);
        }
      }
      if constexpr (kWgmma) {
        // dQ (64 x 128) += dS (registers) x K (K tile MN-major: its rows are the k dimension).
        float(&d)[64] = reinterpret_cast<float(&)[64]>(dq);
        wgmma_fence_operands(d);
        wgmma_fence();
#pragma unroll
        for (int kc = 0; kc < 4; ++kc)
          Wgmma<128>::rs<kMnMajor>(d, ds_tile[kc], mnmajor_descriptor(sk, kBlock, kc * 16, 0), true);
        wgmma_commit();
        wgmma_wait<0>();
        wgmma_fence_operands(d);
      }
    }
    __syncthreads();
  }
  if (kSums) {
    d_lo += __shfl_xor_sync(0xffffffffu, d_lo, 1);
    d_lo += __shfl_xor_sync(0xffffffffu, d_lo, 2);
    d_hi += __shfl_xor_sync(0xffffffffu, d_hi, 1);
    d_hi += __shfl_xor_sync(0xffffffffu, d_hi, 2);
    if (t == 0 && live) {
      D[0] = d_lo;
      D[8] = d_hi;
    }
  } else {
    store_rows(dq, true, p, b, i0 + warp * 16, h * kDim, lane);
  }
}

// The wgmma form exists only where wgmma does (sm_90a); elsewhere (sm_80, sm_100a) it is a stub that traps, never
// launched (wgmma_supported), and its body is not even compiled.
template <RowPass kPass, bool kStoredDp, int kWarps, bool kWgmma>
__global__ void __launch_bounds__(kWarps * 32, RowLayout<kPass, kStoredDp, kWarps, kWgmma>::kMinBlocks)
    row_kernel(const AttentionArgs p) {
  if constexpr (kWgmma && !KINDEX_HAVE_WGMMA) __trap();
  else row_kernel_body<kPass, kStoredDp, kWarps, kWgmma>(p);
}

// The column kernels, one CTA per (16 kWarps key rows, KV group, batch), one matmul per tile over the 4 heads of the
// group and all 64-query blocks, the GQA sum being the fp32 accumulation itself:
//   ColumnGrad::value: dV += A^T dO  (needs only dO, so it runs beside the row passes)
//   ColumnGrad::key:   dK += dS^T Q  (after the grad_q pass), RoPE backward in the epilogue
// Two kernels of 64 accumulators each instead of one of 128: half the registers, so more CTAs per SM, and dV no
// longer waits for dS.
enum class ColumnGrad { value, key };

template <int kWarps, bool kWgmma = false>
struct ColumnLayout {
  static constexpr int kThreads = kWarps * 32, kKeys = kWarps * 16;
  // Stage: the [64 queries, 128] operand (dO or Q), then the [64 queries, kKeys] tile (A or dS) read transposed.
  static constexpr uint32_t kStage = kRowTileBytes + kBlock * kKeys * 2;
  // wgmma: 3 stages (72 KB + 1 KB for the alignment, still 3 CTAs per SM), so two tiles load while one multiplies.
  static constexpr int kStages = kWgmma ? 3 : 2;
  static constexpr uint32_t kSmem = kStages * kStage + (kWgmma ? 1024 : 0);
  static constexpr int kMinBlocks = kWarps == 4 ? 3 : 2;
};

template <ColumnGrad kGrad, int kWarps, bool kWgmma>
__device__ __forceinline__ void column_kernel_body(const AttentionArgs& p) {
  using L = ColumnLayout<kWarps, kWgmma>;
  constexpr bool kKey = kGrad == ColumnGrad::key;
  constexpr int kThreads = L::kThreads, kKeys = L::kKeys, kStages = L::kStages;
  extern __shared__ __align__(128) uint8_t smem_raw[];
  uint8_t* smem = kWgmma ? align_1024(smem_raw) : smem_raw;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  // blockIdx.y = group * splits + part: the CTA sums iterations [begin, end) of the group's (head, query block) loop.
  const int splits = p.column_splits, part = int(blockIdx.y) % splits;
  const int S = p.seq_len, j0 = blockIdx.x * kKeys, grp = blockIdx.y / splits, b = blockIdx.z;
  const int nI = (S + kBlock - 1) / kBlock, total = kHeadsPerGroup * nI;
  const int begin = total * part / splits, end = total * (part + 1) / splits;
  const int64_t padded = int64_t(nI) * kBlock;
  const uint32_t base = uint32_t(__cvta_generic_to_shared(smem));
  auto stage_off = [&](int it) { return uint32_t(it % kStages) * L::kStage; };

  auto issue = [&](int it) {
    const int r = it / nI, i0 = (it - r * nI) * kBlock, h = grp * kHeadsPerGroup + r;
    const int64_t bh = int64_t(b) * 32 + h;
    const uint32_t st = base + stage_off(it);
    if (kKey) {
      load_rows<kBlock, kThreads, kWgmma>(st, static_cast<const bf16*>(p.query_states) + bh * S * kDim, kDim, i0, S,
                                          tid);
      load_a_tile<kBlock, kKeys, kThreads, kWgmma>(st + kRowTileBytes,
                                                   static_cast<const bf16*>(p.grad_scores) + bh * padded * padded,
                                                   int(padded), padded, i0, j0, tid);
    } else {
      load_rows<kBlock, kThreads, kWgmma>(
          st, static_cast<const bf16*>(p.grad_attn_output) + int64_t(b) * S * kQProjCols + h * kDim, kQProjCols, i0,
          S, tid);
      load_a_tile<kBlock, kKeys, kThreads, kWgmma>(
          st + kRowTileBytes, static_cast<const bf16*>(p.attn_weights) + bh * S * p.attn_row_stride, S,
          p.attn_row_stride, i0, j0, tid);
    }
  };

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (begin + s < end) issue(begin + s);
    cp_async_commit();
  }

  float acc[16][4];
#pragma unroll
  for (int n = 0; n < 16; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;

  for (int it = begin; it < end; ++it) {
    if (it + kStages - 1 < end) issue(it + kStages - 1);
    cp_async_commit();
    cp_async_wait<kStages - 1>();
    if constexpr (kWgmma) fence_proxy_async_shared();  // cp.async wrote what wgmma (async proxy) reads
    __syncthreads();
    const uint32_t sx = base + stage_off(it), sy = sx + kRowTileBytes;
    if constexpr (kWgmma) {
      // acc (this warpgroup's 64 keys x 128) += Y^T X: Y = the [64 queries, kKeys] tile (A or dS), its 64-column
      // block of the warpgroup's keys as an MN-major A operand, X = the [64 queries, 128] tile (dO or Q) as an
      // MN-major B operand; 4 k-steps over the queries.
      float(&d)[64] = reinterpret_cast<float(&)[64]>(acc);
      const int keys0 = (warp >> 2) * 64;
      wgmma_fence_operands(d);
      wgmma_fence();
#pragma unroll
      for (int kc = 0; kc < 4; ++kc)
        Wgmma<128>::ss<kMnMajor, kMnMajor>(d, mnmajor_descriptor(sy, kBlock, kc * 16, keys0),
                                           mnmajor_descriptor(sx, kBlock, kc * 16, 0), true);
      wgmma_commit();
      wgmma_wait<0>();
      wgmma_fence_operands(d);
    } else {
      uint32_t yt[4][4];  // A^T or dS^T for this warp's 16 keys x the 64 queries of the block
#pragma unroll
      for (int kc = 0; kc < 4; ++kc) ldmatrix_x4_trans(yt[kc], at_addr(sy, warp * 16, kc * 16, lane, kKeys / 8));
#pragma unroll
      for (int kc = 0; kc < 4; ++kc) {
        mma_row(acc, yt[kc], [&](uint32_t(&bf)[4], int np) {
          ldmatrix_x4_trans(bf, bk_addr(sx, kc * 16, np * 16, lane, 16));
        });
      }
    }
    __syncthreads();
  }
  if (splits == 1) {
    store_rows(acc, kKey, p, b, j0 + warp * 16, (kKey ? kKOffset : kVOffset) + grp * kDim, lane);
  } else {
    const int64_t tokens = int64_t(p.batch_size) * S;
    float* out = p.column_partials + (int64_t(kKey ? splits : 0) + part) * tokens * kKvCols;
    store_partial(acc, out, b, S, j0 + warp * 16, grp * kDim, lane);
  }
}

template <ColumnGrad kGrad, int kWarps, bool kWgmma>
__global__ void __launch_bounds__(kWarps * 32, ColumnLayout<kWarps, kWgmma>::kMinBlocks)
    column_kernel(const AttentionArgs p) {
  if constexpr (kWgmma && !KINDEX_HAVE_WGMMA) __trap();  // as row_kernel
  else column_kernel_body<kGrad, kWarps, kWgmma>(p);
}

template <class Kernel>
cudaError_t launch(Kernel kernel, dim3 grid, int threads, uint32_t smem_bytes, const AttentionArgs& args,
                   cudaStream_t stream) {
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem_bytes));
  if (err != cudaSuccess) return err;
  kernel<<<grid, threads, smem_bytes, stream>>>(args);
  return cudaGetLastError();
}

template <ColumnGrad kGrad>
cudaError_t launch_column(int warps, const AttentionArgs& args, cudaStream_t stream) {
  auto go = [&](auto w, auto wgmma) {
    constexpr int kWarps = decltype(w)::value;
    constexpr bool kWgmma = decltype(wgmma)::value;
    using L = ColumnLayout<kWarps, kWgmma>;
    const dim3 grid((args.seq_len + L::kKeys - 1) / L::kKeys, 8 * args.column_splits, args.batch_size);
    return launch(column_kernel<kGrad, kWarps, kWgmma>, grid, L::kThreads, L::kSmem, args, stream);
  };
  using Four = std::integral_constant<int, 4>;
  using Eight = std::integral_constant<int, 8>;
  const bool wgmma = args.kernels == AttentionKernels::wgmma;
  cudaError_t err = wgmma ? (warps == 8 ? go(Eight{}, std::true_type{}) : go(Four{}, std::true_type{}))
                          : (warps == 8 ? go(Eight{}, std::false_type{}) : go(Four{}, std::false_type{}));
  if (err != cudaSuccess || args.column_splits == 1) return err;
  constexpr bool kKey = kGrad == ColumnGrad::key;
  const int64_t tokens = int64_t(args.batch_size) * args.seq_len;
  const float* partials = args.column_partials + (kKey ? int64_t(args.column_splits) * tokens * kKvCols : 0);
  column_reduce_kernel<kKey><<<unsigned((tokens * 256 + 255) / 256), 256, 0, stream>>>(
      args, partials, args.column_splits, kKey ? kKOffset : kVOffset);
  return cudaGetLastError();
}

template <bool kStoredDp, int kWarps, bool kWgmma = false>
cudaError_t launch_row_passes(const AttentionArgs& args, cudaStream_t stream) {
  using Sums = RowLayout<RowPass::row_sums, kStoredDp, kWarps, kWgmma>;
  using GradQ = RowLayout<RowPass::grad_q, kStoredDp, kWarps, kWgmma>;
  const dim3 grid((args.seq_len + Sums::kRows - 1) / Sums::kRows, 32, args.batch_size);
  cudaError_t err = launch(row_kernel<RowPass::row_sums, kStoredDp, kWarps, kWgmma>, grid, Sums::kThreads,
                           Sums::kSmem, args, stream);
  if (err == cudaSuccess)
    err = launch(row_kernel<RowPass::grad_q, kStoredDp, kWarps, kWgmma>, grid, GradQ::kThreads, GradQ::kSmem, args,
                 stream);
  return err;
}

}  // namespace

int64_t padded_seq_len(int64_t seq_len) { return (seq_len + kBlock - 1) / kBlock * kBlock; }

size_t grad_scores_bytes(int64_t batch_size, int64_t seq_len) {
  const size_t padded = size_t(padded_seq_len(seq_len));
  return size_t(batch_size) * 32 * padded * padded * 2;
}

size_t padded_attn_bytes(int64_t batch_size, int64_t seq_len) {
  if (seq_len % 8 == 0) return 0;
  return size_t(batch_size) * 32 * size_t(seq_len) * size_t((seq_len + 7) / 8 * 8) * 2;
}

AttentionPlan default_plan(AttentionKernels kernels) {
  if (kernels == AttentionKernels::wgmma) return {kernels, AttentionSchedule::recompute_dp, {8, 8}};
  return {kernels, AttentionSchedule::store_dp, {4, 4}};
}

bool wgmma_supported() {
  int device = 0, major = 0, minor = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess)
    return false;
  if (major != 9 || minor != 0) return false;
  // The code the device would run for a wgmma kernel: sm_90a SASS reports PTX version 90; the JIT of an sm_80
  // build's PTX reports 80 (and holds only the trap stub).
  cudaFuncAttributes attributes{};
  if (cudaFuncGetAttributes(&attributes, row_kernel<RowPass::row_sums, false, 4, true>) != cudaSuccess) {
    cudaGetLastError();  // not sticky: clear it so the caller's next launch check does not see it
    return false;
  }
  return attributes.ptxVersion >= 90 && attributes.binaryVersion >= 90;
}

AttentionKernels default_kernels() {
  return wgmma_supported() ? AttentionKernels::wgmma : AttentionKernels::mma_sync;
}

int column_splits(int64_t batch_size, int64_t seq_len) {
  const int64_t blocks = (seq_len + kBlock - 1) / kBlock, ctas = blocks * 8 * batch_size;
  const int64_t total = kHeadsPerGroup * blocks;  // iterations of one CTA's loop without a split
  if (ctas >= kColumnSplitBelowCtas) return 1;
  const int64_t splits = std::min<int64_t>({(kColumnTargetCtas + ctas - 1) / ctas, kMaxColumnSplits, total / 2});
  return int(std::max<int64_t>(splits, 1));
}

size_t column_partials_bytes(int64_t batch_size, int64_t seq_len) {
  const int splits = column_splits(batch_size, seq_len);
  return splits == 1 ? 0 : size_t(2) * splits * size_t(batch_size) * size_t(seq_len) * kKvCols * sizeof(float);
}

cudaError_t launch_attention(const AttentionArgs& given, const AttentionStreams& streams) {
  AttentionArgs args = given;
  const cudaStream_t stream = streams.main;
  const int S = args.seq_len;
  const AttentionTiling tiling = args.tiling == AttentionTiling{} ? default_plan(args.kernels).tiling : args.tiling;
  if ((tiling.row_warps != 4 && tiling.row_warps != 8) || (tiling.col_warps != 4 && tiling.col_warps != 8))
    return cudaErrorInvalidValue;
  const bool wgmma = args.kernels == AttentionKernels::wgmma;
  if (wgmma && !wgmma_supported()) return cudaErrorNotSupported;
  args.column_splits = std::max(1, std::min(args.max_column_splits, column_splits(args.batch_size, S)));
  if (S % 8 != 0) {
    const int64_t ld = (S + 7) / 8 * 8, rows = int64_t(args.batch_size) * 32 * S;
    const int64_t chunks = rows * (ld / 8);
    const int blocks = int(std::min<int64_t>((chunks + 255) / 256, 132 * 16));
    pad_rows_kernel<<<blocks, 256, 0, stream>>>(static_cast<const uint16_t*>(args.attn_weights),
                                                static_cast<uint4*>(args.attn_scratch), rows, S, ld);
    if (cudaError_t err = cudaGetLastError(); err != cudaSuccess) return err;
    args.attn_weights = args.attn_scratch;
    args.attn_row_stride = ld;
  } else {
    args.attn_row_stride = S;
  }
  // dV needs only dO and A: it starts on the `value` stream while the row passes run.
  if (cudaError_t err = cudaEventRecord(streams.inputs_ready, stream); err != cudaSuccess) return err;
  if (cudaError_t err = cudaStreamWaitEvent(streams.value, streams.inputs_ready, 0); err != cudaSuccess) return err;
  if (cudaError_t err = launch_column<ColumnGrad::value>(tiling.col_warps, args, streams.value); err != cudaSuccess)
    return err;
  if (cudaError_t err = cudaEventRecord(streams.grad_v_ready, streams.value); err != cudaSuccess) return err;
  const cudaStream_t rows = streams.rows;
  if (rows != stream) {
    if (cudaError_t err = cudaStreamWaitEvent(rows, streams.inputs_ready, 0); err != cudaSuccess) return err;
  }
  const bool stored = args.schedule == AttentionSchedule::store_dp;
  auto row_passes = [&](auto warps, auto with_wgmma) {
    constexpr int kWarps = decltype(warps)::value;
    constexpr bool kWgmma = decltype(with_wgmma)::value;
    return stored ? launch_row_passes<true, kWarps, kWgmma>(args, rows)
                  : launch_row_passes<false, kWarps, kWgmma>(args, rows);
  };
  using Four = std::integral_constant<int, 4>;
  using Eight = std::integral_constant<int, 8>;
  const bool eight = tiling.row_warps == 8;
  const cudaError_t row_err =
      wgmma ? (eight ? row_passes(Eight{}, std::true_type{}) : row_passes(Four{}, std::true_type{}))
            : (eight ? row_passes(Eight{}, std::false_type{}) : row_passes(Four{}, std::false_type{}));
  if (row_err != cudaSuccess) return row_err;
  if (cudaError_t err = cudaEventRecord(streams.grad_q_ready, rows); err != cudaSuccess) return err;
  if (cudaError_t err = cudaStreamWaitEvent(streams.column, streams.grad_q_ready, 0); err != cudaSuccess) return err;
  if (cudaError_t err = launch_column<ColumnGrad::key>(tiling.col_warps, args, streams.column); err != cudaSuccess)
    return err;
  if (cudaError_t err = cudaStreamWaitEvent(streams.column, streams.grad_v_ready, 0); err != cudaSuccess) return err;
  return cudaEventRecord(streams.grad_kv_ready, streams.column);
}

}  // namespace kindex::kernels::backward
