// Tensor-core kernels of the L2/003 attention backward (see attention.hpp for what each computes).
// mma.sync m16n8k16 bf16 -> fp32, operands staged in shared memory by a two-stage cp.async pipeline, 16-byte
// chunks XOR-swizzled by (row & 7) so that ldmatrix reads of 8 rows hit 8 different bank groups.
#include "kernels/layer_backward/attention.hpp"

#include <cuda_bf16.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace kindex::kernels::backward {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kBlock = 64;    // attn_weights rows/cols per tile
constexpr int kDim = 128;     // head_dim
constexpr int kThreads = 128; // 4 warps x 16 rows
constexpr int kHeadsPerGroup = 4;
constexpr int kQProjCols = 4096, kQkvCols = 6144, kKOffset = 4096, kVOffset = 5120;
constexpr uint32_t kRowTileBytes = kBlock * kDim * 2;  // 64 x 128 bf16 = 16 KB
constexpr uint32_t kATileBytes = kBlock * kBlock * 2;  // 64 x 64 bf16 = 8 KB

// Column kernels: two stages of {dO, A} or {Q, dS}.
constexpr uint32_t kColStage = kRowTileBytes + kATileBytes;
constexpr uint32_t kColSmem = 2 * kColStage;

// Byte offset of element (r, c) in a tile whose rows are `chunks` 16-byte chunks long (8 or 16).
__device__ __forceinline__ uint32_t swz(int r, int c, int chunks) {
  return uint32_t(r * chunks * 16 + ((((c >> 3) ^ (r & 7))) << 4) + (c & 7) * 2);
}

__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid) {
  const int bytes = valid ? 16 : 0;  // 0: zero-fill, src not read
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_wait_one() { asm volatile("cp.async.wait_group 1;\n" ::); }

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Rounds to the nearest bf16 (the reference's rounding after every bf16 op).
__device__ __forceinline__ float rb(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }
__device__ __forceinline__ uint32_t pack(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  uint32_t u;
  memcpy(&u, &v, 4);
  return u;
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
// A operand stored [k][m] (transposed in memory): block at (m0, k0); use with ldsm_x4_t.
__device__ __forceinline__ uint32_t at_addr(uint32_t tile, int m0, int k0, int lane, int ch) {
  return tile + swz(k0 + (lane & 7) + (lane >> 4) * 8, m0 + ((lane >> 3) & 1) * 8, ch);
}
// B operand for two adjacent n-tiles, stored [n][k]: regs {b0,b1} of n0..n0+7, {b0,b1} of n0+8..n0+15.
__device__ __forceinline__ uint32_t bn_addr(uint32_t tile, int n0, int k0, int lane, int ch) {
  return tile + swz(n0 + (lane & 7) + ((lane >> 4) << 3), k0 + ((lane >> 3) & 1) * 8, ch);
}
// B operand for two adjacent n-tiles, stored [k][n]; use with ldsm_x4_t.
__device__ __forceinline__ uint32_t bk_addr(uint32_t tile, int k0, int n0, int lane, int ch) {
  return tile + swz(k0 + (lane & 7) + ((lane >> 3) & 1) * 8, n0 + (lane >> 4) * 8, ch);
}

// 64 rows x 128 columns starting at `row0` of a [rows, ld] bf16 matrix; rows >= nrows are zero-filled.
__device__ __forceinline__ void load_rows(uint32_t tile, const bf16* base, int64_t ld, int row0, int nrows,
                                          int tid) {
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const int q = tid + k * kThreads, r = q >> 4, ch = q & 15, row = row0 + r;
    const bool valid = row < nrows;
    cp_async16(tile + r * 256 + ((ch ^ (r & 7)) << 4), base + (valid ? row * ld + ch * 8 : 0), valid);
  }
}

// The 64x64 attn_weights tile at (i0, j0) of one (batch, head) [S, S] matrix stored with row stride `ld` (a
// multiple of 8 elements, so every 16-byte chunk is aligned; columns S..ld-1 hold zeros); entries outside the
// matrix are 0.
__device__ __forceinline__ void load_a_tile(uint32_t tile, const bf16* a, int S, int64_t ld, int i0, int j0, int tid) {
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const int q = tid + k * kThreads, r = q >> 3, ch = q & 7, row = i0 + r, col = j0 + ch * 8;
    const bool valid = row < S && col < S;  // a chunk that starts inside the row ends inside ld
    cp_async16(tile + r * 128 + ((ch ^ (r & 7)) << 4), a + (valid ? row * ld + col : 0), valid);
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
      const float g0 = rb(acc[nt][half * 2]), g1 = rb(acc[nt][half * 2 + 1]);
      const float h0 = rb(acc[nt + 8][half * 2]), h1 = rb(acc[nt + 8][half * 2 + 1]);
      if (rope) {
        const float2 cl = load2(cos + token * kDim + c), ch = load2(cos + token * kDim + c + 64);
        const float2 sl = load2(sin + token * kDim + c), sh = load2(sin + token * kDim + c + 64);
        float o0, o1, p0, p1;
        rope_pair(g0, h0, cl.x, ch.x, sl.x, sh.x, o0, p0);
        rope_pair(g1, h1, cl.y, ch.y, sl.y, sh.y, o1, p1);
        out[c / 2] = pack(o0, o1);
        out[(c + 64) / 2] = pack(p0, p1);
      } else {
        out[c / 2] = pack(g0, g1);
        out[(c + 64) / 2] = pack(h0, h1);
      }
    }
  }
}

// The row kernel in two launches (the column kernel needs dS from the second):
//   RowPass::row_sums: D_i = sum_j round(dP_ij) A_ij, with dP = dO V^T    (reads dO, V, A)
//   RowPass::grad_q:   dS from dP and D, dQ = dS K, RoPE; writes dS      (reads dO, V, K, A and D)
// With kStoredDp (AttentionSchedule::store_dp) the row_sums pass also writes round(dP) into the dS buffer and the
// grad_q pass reads it back instead of recomputing it (reads dP, K, A; overwrites dP with dS in place): one matmul
// fewer per tile for two more passes over a dS-sized buffer. Both give bit-identical results: round(dP) is the
// same bf16 value either way.
enum class RowPass { row_sums, grad_q };
template <RowPass kPass, bool kStoredDp>
struct RowLayout {
  static constexpr bool kSums = kPass == RowPass::row_sums;
  static constexpr bool kNeedDo = kSums || !kStoredDp;  // dP is computed here
  // Stage: [V] [K] A [dP], the bracketed ones only when used.
  static constexpr uint32_t kKOffset = kNeedDo ? kRowTileBytes : 0;
  static constexpr uint32_t kAOffset = kKOffset + (kSums ? 0 : kRowTileBytes);
  static constexpr uint32_t kDpOffset = kAOffset + kATileBytes;
  static constexpr uint32_t kStage = kDpOffset + (!kSums && kStoredDp ? kATileBytes : 0);
  static constexpr uint32_t kStagesOffset = kNeedDo ? kRowTileBytes : 0;  // after the dO tile
  static constexpr uint32_t kSmem = kStagesOffset + 2 * kStage;
  // 64 KB passes fit 3 CTAs per SM when they keep to 168 registers (no spills: checked with -Xptxas -v).
  static constexpr int kMinBlocks = kSmem <= 72 * 1024 ? 3 : 1;
};

template <RowPass kPass, bool kStoredDp>
__global__ void __launch_bounds__(kThreads, RowLayout<kPass, kStoredDp>::kMinBlocks) row_kernel(const AttentionArgs p) {
  using L = RowLayout<kPass, kStoredDp>;
  constexpr bool kSums = L::kSums;
  extern __shared__ __align__(128) uint8_t smem[];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int S = p.seq_len, i0 = blockIdx.x * kBlock, h = blockIdx.y, b = blockIdx.z;
  const int64_t bh = int64_t(b) * 32 + h;
  const int nJ = (S + kBlock - 1) / kBlock;
  const int64_t ld = p.attn_row_stride;
  const bf16* attn = static_cast<const bf16*>(p.attn_weights) + bh * S * ld;
  const bf16* v = static_cast<const bf16*>(p.value_states) + bh * S * kDim;
  const bf16* k = static_cast<const bf16*>(p.key_states) + bh * S * kDim;
  const bf16* dO = static_cast<const bf16*>(p.grad_attn_output) + int64_t(b) * S * kQProjCols + h * kDim;
  const int64_t padded = int64_t(nJ) * kBlock;
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
    if (L::kNeedDo) load_rows(st, v, kDim, j0, S, tid);
    if (!kSums) load_rows(st + L::kKOffset, k, kDim, j0, S, tid);
    load_a_tile(st + L::kAOffset, attn, S, ld, i0, j0, tid);
    if (!kSums && kStoredDp) load_a_tile(st + L::kDpOffset, scores, int(padded), padded, i0, j0, tid);
  };

  if (L::kNeedDo) load_rows(s_do, dO, kQProjCols, i0, S, tid);
  issue(0);
  cp_commit();

  uint32_t dof[8][4];
  float dq[16][4];
#pragma unroll
  for (int n = 0; n < 16; ++n) dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.f;
  // D of rows g and g + 8: partial per thread while summing, complete (written by the row_sums pass) for grad_q.
  float d_lo = 0.f, d_hi = 0.f;
  if (!kSums) {
    d_lo = D[0];
    d_hi = D[8];
  }

  for (int it = 0; it < nJ; ++it) {
    if (it + 1 < nJ) issue(it + 1);
    cp_commit();
    cp_wait_one();
    __syncthreads();
    const uint32_t st = base + stage_off(it), sv = st, sk = st + L::kKOffset, sa = st + L::kAOffset;
    const int64_t col = (int64_t(it) * kBlock) / 2;  // this tile's first column pair in scores_out

    float dp[8][4];  // round(dP) in the mma accumulator layout: [n-tile][(g, 2t) (g, 2t+1) (g+8, 2t) (g+8, 2t+1)]
    if (L::kNeedDo) {
      if (it == 0) {
#pragma unroll
        for (int kc = 0; kc < 8; ++kc) ldsm_x4(dof[kc], a_addr(s_do, warp * 16, kc * 16, lane, 16));
      }
#pragma unroll
      for (int n = 0; n < 8; ++n) dp[n][0] = dp[n][1] = dp[n][2] = dp[n][3] = 0.f;
#pragma unroll
      for (int kc = 0; kc < 8; ++kc) {
#pragma unroll
        for (int np = 0; np < 4; ++np) {
          uint32_t bf[4];
          ldsm_x4(bf, bn_addr(sv, np * 16, kc * 16, lane, 16));
          mma(dp[2 * np], dof[kc], bf[0], bf[1]);
          mma(dp[2 * np + 1], dof[kc], bf[2], bf[3]);
        }
      }
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) dp[nt][e] = rb(dp[nt][e]);
      if (kSums && kStoredDp) {
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
          scores_out[col + nt * 4] = pack(dp[nt][0], dp[nt][1]);
          scores_out[col + 4 * padded + nt * 4] = pack(dp[nt][2], dp[nt][3]);
        }
      }
    } else {
      uint32_t dpf[4][4];  // stored round(dP), loaded like A below
#pragma unroll
      for (int kc = 0; kc < 4; ++kc) ldsm_x4(dpf[kc], a_addr(st + L::kDpOffset, warp * 16, kc * 16, lane, 8));
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        const float2 lo = unpack(dpf[nt >> 1][2 * (nt & 1)]), hi = unpack(dpf[nt >> 1][2 * (nt & 1) + 1]);
        dp[nt][0] = lo.x;
        dp[nt][1] = lo.y;
        dp[nt][2] = hi.x;
        dp[nt][3] = hi.y;
      }
    }
    uint32_t af[4][4];  // A in the accumulator layout of dp (two n-tiles per 16-column block)
#pragma unroll
    for (int kc = 0; kc < 4; ++kc) ldsm_x4(af[kc], a_addr(sa, warp * 16, kc * 16, lane, 8));

    if (kSums) {
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        const float2 al = unpack(af[nt >> 1][2 * (nt & 1)]), ah = unpack(af[nt >> 1][2 * (nt & 1) + 1]);
        d_lo += dp[nt][0] * al.x + dp[nt][1] * al.y;
        d_hi += dp[nt][2] * ah.x + dp[nt][3] * ah.y;
      }
    } else {
      uint32_t dsf[4][4];
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        const float2 al = unpack(af[nt >> 1][2 * (nt & 1)]), ah = unpack(af[nt >> 1][2 * (nt & 1) + 1]);
        const float s0 = rb(rb(al.x * (dp[nt][0] - d_lo)) * p.scaling);
        const float s1 = rb(rb(al.y * (dp[nt][1] - d_lo)) * p.scaling);
        const float s2 = rb(rb(ah.x * (dp[nt][2] - d_hi)) * p.scaling);
        const float s3 = rb(rb(ah.y * (dp[nt][3] - d_hi)) * p.scaling);
        dsf[nt >> 1][2 * (nt & 1)] = pack(s0, s1);
        dsf[nt >> 1][2 * (nt & 1) + 1] = pack(s2, s3);
        // Stored dP of this tile was read into shared memory before this write (cp.async completed above).
        scores_out[col + nt * 4] = dsf[nt >> 1][2 * (nt & 1)];
        scores_out[col + 4 * padded + nt * 4] = dsf[nt >> 1][2 * (nt & 1) + 1];
      }
#pragma unroll
      for (int kc = 0; kc < 4; ++kc) {
#pragma unroll
        for (int np = 0; np < 8; ++np) {
          uint32_t bf[4];
          ldsm_x4_t(bf, bk_addr(sk, kc * 16, np * 16, lane, 16));
          mma(dq[2 * np], dsf[kc], bf[0], bf[1]);
          mma(dq[2 * np + 1], dsf[kc], bf[2], bf[3]);
        }
      }
    }
    __syncthreads();
  }
  if (kSums) {
    d_lo += __shfl_xor_sync(0xffffffffu, d_lo, 1);
    d_lo += __shfl_xor_sync(0xffffffffu, d_lo, 2);
    d_hi += __shfl_xor_sync(0xffffffffu, d_hi, 1);
    d_hi += __shfl_xor_sync(0xffffffffu, d_hi, 2);
    if (t == 0) {
      D[0] = d_lo;
      D[8] = d_hi;
    }
  } else {
    store_rows(dq, true, p, b, i0 + warp * 16, h * kDim, lane);
  }
}

// The column kernels, one CTA per (64 key rows, KV group, batch), one matmul per tile over the 4 heads of the group
// and all query blocks, the GQA sum being the fp32 accumulation itself:
//   ColumnGrad::value: dV += A^T dO  (needs only dO, so it runs beside the row passes)
//   ColumnGrad::key:   dK += dS^T Q  (after the grad_q pass), RoPE backward in the epilogue
// Two kernels of 64 accumulators each instead of one of 128: half the registers, so 3 CTAs per SM instead of 2, and
// dV no longer waits for dS.
enum class ColumnGrad { value, key };

template <ColumnGrad kGrad>
__global__ void __launch_bounds__(kThreads, 3) column_kernel(const AttentionArgs p) {
  constexpr bool kKey = kGrad == ColumnGrad::key;
  extern __shared__ __align__(128) uint8_t smem[];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int S = p.seq_len, j0 = blockIdx.x * kBlock, grp = blockIdx.y, b = blockIdx.z;
  const int nI = (S + kBlock - 1) / kBlock, total = kHeadsPerGroup * nI;
  const int64_t padded = int64_t(nI) * kBlock;
  const uint32_t base = uint32_t(__cvta_generic_to_shared(smem));
  auto stage_off = [&](int it) { return uint32_t(it & 1) * kColStage; };

  // Stage: the [queries, 128] operand (dO or Q), then the [queries, keys] tile (A or dS) read transposed.
  auto issue = [&](int it) {
    const int r = it / nI, i0 = (it - r * nI) * kBlock, h = grp * kHeadsPerGroup + r;
    const int64_t bh = int64_t(b) * 32 + h;
    const uint32_t st = base + stage_off(it);
    if (kKey) {
      load_rows(st, static_cast<const bf16*>(p.query_states) + bh * S * kDim, kDim, i0, S, tid);
      load_a_tile(st + kRowTileBytes, static_cast<const bf16*>(p.grad_scores) + bh * padded * padded, int(padded),
                  padded, i0, j0, tid);
    } else {
      load_rows(st, static_cast<const bf16*>(p.grad_attn_output) + int64_t(b) * S * kQProjCols + h * kDim,
                kQProjCols, i0, S, tid);
      load_a_tile(st + kRowTileBytes, static_cast<const bf16*>(p.attn_weights) + bh * S * p.attn_row_stride, S,
                  p.attn_row_stride, i0, j0, tid);
    }
  };

  issue(0);
  cp_commit();

  float acc[16][4];
#pragma unroll
  for (int n = 0; n < 16; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;

  for (int it = 0; it < total; ++it) {
    if (it + 1 < total) issue(it + 1);
    cp_commit();
    cp_wait_one();
    __syncthreads();
    const uint32_t sx = base + stage_off(it), sy = sx + kRowTileBytes;
    uint32_t yt[4][4];  // A^T or dS^T for this warp's 16 keys x the 64 queries of the block
#pragma unroll
    for (int kc = 0; kc < 4; ++kc) ldsm_x4_t(yt[kc], at_addr(sy, warp * 16, kc * 16, lane, 8));
#pragma unroll
    for (int kc = 0; kc < 4; ++kc) {
#pragma unroll
      for (int np = 0; np < 8; ++np) {
        uint32_t bf[4];
        ldsm_x4_t(bf, bk_addr(sx, kc * 16, np * 16, lane, 16));
        mma(acc[2 * np], yt[kc], bf[0], bf[1]);
        mma(acc[2 * np + 1], yt[kc], bf[2], bf[3]);
      }
    }
    __syncthreads();
  }
  store_rows(acc, kKey, p, b, j0 + warp * 16, (kKey ? kKOffset : kVOffset) + grp * kDim, lane);
}

template <class Kernel>
cudaError_t launch(Kernel kernel, dim3 grid, uint32_t smem_bytes, const AttentionArgs& args, cudaStream_t stream) {
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem_bytes));
  if (err != cudaSuccess) return err;
  kernel<<<grid, kThreads, smem_bytes, stream>>>(args);
  return cudaGetLastError();
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

cudaError_t launch_attention(const AttentionArgs& given, const AttentionStreams& streams) {
  AttentionArgs args = given;
  const cudaStream_t stream = streams.main;
  const int S = args.seq_len;
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
  const int blocks = int((S + kBlock - 1) / kBlock);
  const dim3 row_grid(blocks, 32, args.batch_size), col_grid(blocks, 8, args.batch_size);
  auto row_passes = [&](auto stored_dp) {
    constexpr bool kStoredDp = decltype(stored_dp)::value;
    using Sums = RowLayout<RowPass::row_sums, kStoredDp>;
    using GradQ = RowLayout<RowPass::grad_q, kStoredDp>;
    cudaError_t err = launch(row_kernel<RowPass::row_sums, kStoredDp>, row_grid, Sums::kSmem, args, stream);
    if (err == cudaSuccess) err = launch(row_kernel<RowPass::grad_q, kStoredDp>, row_grid, GradQ::kSmem, args, stream);
    return err;
  };
  // dV needs only dO and A: it starts on the `value` stream while the row passes run.
  if (cudaError_t err = cudaEventRecord(streams.inputs_ready, stream); err != cudaSuccess) return err;
  if (cudaError_t err = cudaStreamWaitEvent(streams.value, streams.inputs_ready, 0); err != cudaSuccess) return err;
  if (cudaError_t err = launch(column_kernel<ColumnGrad::value>, col_grid, kColSmem, args, streams.value);
      err != cudaSuccess)
    return err;
  if (cudaError_t err = cudaEventRecord(streams.grad_v_ready, streams.value); err != cudaSuccess) return err;
  const cudaError_t row_err = args.schedule == AttentionSchedule::store_dp ? row_passes(std::true_type{})
                                                                           : row_passes(std::false_type{});
  if (row_err != cudaSuccess) return row_err;
  if (cudaError_t err = cudaEventRecord(streams.grad_q_ready, stream); err != cudaSuccess) return err;
  if (cudaError_t err = cudaStreamWaitEvent(streams.column, streams.grad_q_ready, 0); err != cudaSuccess) return err;
  if (cudaError_t err = launch(column_kernel<ColumnGrad::key>, col_grid, kColSmem, args, streams.column);
      err != cudaSuccess)
    return err;
  if (cudaError_t err = cudaStreamWaitEvent(streams.column, streams.grad_v_ready, 0); err != cudaSuccess) return err;
  return cudaEventRecord(streams.grad_kv_ready, streams.column);
}

}  // namespace kindex::kernels::backward
