// Tensor-core kernels of the L2/003 attention backward (see attention.hpp for what each computes).
// mma.sync m16n8k16 bf16 -> fp32, operands staged in shared memory by a two-stage cp.async pipeline, 16-byte
// chunks XOR-swizzled by (row & 7) so that ldmatrix reads of 8 rows hit 8 different bank groups.
#include "kernels/layer_backward/attention.hpp"

#include <cuda_bf16.h>

#include <algorithm>
#include <cstring>

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

// Row kernel shared memory: dO tile, then two stages of {V, K, A}.
constexpr uint32_t kRowStage = 2 * kRowTileBytes + kATileBytes;
constexpr uint32_t kRowSmem = kRowTileBytes + 2 * kRowStage;
// Column kernel: two V buffers (one per head in flight), then two stages of {dO, Q, A, D}.
constexpr uint32_t kColStage = 2 * kRowTileBytes + kATileBytes + kBlock * 4;
constexpr uint32_t kColSmem = 2 * kRowTileBytes + 2 * kColStage;

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

__global__ void __launch_bounds__(kThreads) row_kernel(const AttentionArgs p) {
  extern __shared__ __align__(128) uint8_t smem[];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int S = p.seq_len, i0 = blockIdx.x * kBlock, h = blockIdx.y, b = blockIdx.z;
  const int64_t bh = int64_t(b) * 32 + h;
  const int nJ = (S + kBlock - 1) / kBlock, total = 2 * nJ;
  const int64_t ld = p.attn_row_stride;
  const bf16* attn = static_cast<const bf16*>(p.attn_weights) + bh * S * ld;
  const bf16* v = static_cast<const bf16*>(p.value_states) + bh * S * kDim;
  const bf16* k = static_cast<const bf16*>(p.key_states) + bh * S * kDim;
  const bf16* dO = static_cast<const bf16*>(p.grad_attn_output) + int64_t(b) * S * kQProjCols + h * kDim;
  const uint32_t base = uint32_t(__cvta_generic_to_shared(smem));
  const uint32_t s_do = base;
  auto stage_off = [&](int it) { return kRowTileBytes + uint32_t(it & 1) * kRowStage; };

  auto issue = [&](int it) {
    const bool second = it >= nJ;
    const int j0 = (second ? it - nJ : it) * kBlock;
    const uint32_t st = base + stage_off(it);
    load_rows(st, v, kDim, j0, S, tid);
    if (second) load_rows(st + kRowTileBytes, k, kDim, j0, S, tid);
    load_a_tile(st + 2 * kRowTileBytes, attn, S, ld, i0, j0, tid);
  };

  load_rows(s_do, dO, kQProjCols, i0, S, tid);
  issue(0);
  cp_commit();

  uint32_t dof[8][4];
  float dq[16][4];
#pragma unroll
  for (int n = 0; n < 16; ++n) dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.f;
  float d_lo = 0.f, d_hi = 0.f;  // D of rows g and g + 8 of this warp (partial per thread until reduced)

  for (int it = 0; it < total; ++it) {
    if (it + 1 < total) issue(it + 1);
    cp_commit();
    cp_wait_one();
    __syncthreads();
    if (it == 0) {
#pragma unroll
      for (int kc = 0; kc < 8; ++kc) ldsm_x4(dof[kc], a_addr(s_do, warp * 16, kc * 16, lane, 16));
    }
    const bool second = it >= nJ;
    if (it == nJ) {
      d_lo += __shfl_xor_sync(0xffffffffu, d_lo, 1);
      d_lo += __shfl_xor_sync(0xffffffffu, d_lo, 2);
      d_hi += __shfl_xor_sync(0xffffffffu, d_hi, 1);
      d_hi += __shfl_xor_sync(0xffffffffu, d_hi, 2);
      if (t == 0) {
        float* D = p.row_sums + bh * (int64_t(nJ) * kBlock) + i0 + warp * 16 + g;
        D[0] = d_lo;
        D[8] = d_hi;
      }
    }
    const uint32_t sv = base + stage_off(it), sk = sv + kRowTileBytes, sa = sv + 2 * kRowTileBytes;

    float dp[8][4];
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
    uint32_t af[4][4];  // A in the accumulator layout of dp (two n-tiles per 16-column block)
#pragma unroll
    for (int kc = 0; kc < 4; ++kc) ldsm_x4(af[kc], a_addr(sa, warp * 16, kc * 16, lane, 8));

    if (!second) {
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        const float2 al = unpack(af[nt >> 1][2 * (nt & 1)]), ah = unpack(af[nt >> 1][2 * (nt & 1) + 1]);
        d_lo += rb(dp[nt][0]) * al.x + rb(dp[nt][1]) * al.y;
        d_hi += rb(dp[nt][2]) * ah.x + rb(dp[nt][3]) * ah.y;
      }
    } else {
      uint32_t dsf[4][4];
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        const float2 al = unpack(af[nt >> 1][2 * (nt & 1)]), ah = unpack(af[nt >> 1][2 * (nt & 1) + 1]);
        const float s0 = rb(rb(al.x * (rb(dp[nt][0]) - d_lo)) * p.scaling);
        const float s1 = rb(rb(al.y * (rb(dp[nt][1]) - d_lo)) * p.scaling);
        const float s2 = rb(rb(ah.x * (rb(dp[nt][2]) - d_hi)) * p.scaling);
        const float s3 = rb(rb(ah.y * (rb(dp[nt][3]) - d_hi)) * p.scaling);
        dsf[nt >> 1][2 * (nt & 1)] = pack(s0, s1);
        dsf[nt >> 1][2 * (nt & 1) + 1] = pack(s2, s3);
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
  store_rows(dq, true, p, b, i0 + warp * 16, h * kDim, lane);
}

__global__ void __launch_bounds__(kThreads) column_kernel(const AttentionArgs p) {
  extern __shared__ __align__(128) uint8_t smem[];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, t = lane & 3;
  const int S = p.seq_len, j0 = blockIdx.x * kBlock, grp = blockIdx.y, b = blockIdx.z;
  const int nI = (S + kBlock - 1) / kBlock, total = kHeadsPerGroup * nI;
  const int64_t padded = int64_t(nI) * kBlock;
  const uint32_t base = uint32_t(__cvta_generic_to_shared(smem));
  auto stage_off = [&](int it) { return 2 * kRowTileBytes + uint32_t(it & 1) * kColStage; };

  auto issue = [&](int it) {
    const int r = it / nI, i0 = (it - r * nI) * kBlock, h = grp * kHeadsPerGroup + r;
    const int64_t bh = int64_t(b) * 32 + h;
    if (i0 == 0)
      load_rows(base + uint32_t(r & 1) * kRowTileBytes,
                static_cast<const bf16*>(p.value_states) + bh * S * kDim, kDim, j0, S, tid);
    const uint32_t st = base + stage_off(it);
    load_rows(st, static_cast<const bf16*>(p.grad_attn_output) + int64_t(b) * S * kQProjCols + h * kDim, kQProjCols,
              i0, S, tid);
    load_rows(st + kRowTileBytes, static_cast<const bf16*>(p.query_states) + bh * S * kDim, kDim, i0, S, tid);
    load_a_tile(st + 2 * kRowTileBytes, static_cast<const bf16*>(p.attn_weights) + bh * S * p.attn_row_stride, S,
                p.attn_row_stride, i0, j0, tid);
    if (tid < kBlock / 4) cp_async16(st + 2 * kRowTileBytes + kATileBytes + tid * 16, p.row_sums + bh * padded + i0 + tid * 4, true);
  };

  issue(0);
  cp_commit();

  float dv[16][4], dk[16][4];
#pragma unroll
  for (int n = 0; n < 16; ++n) {
    dv[n][0] = dv[n][1] = dv[n][2] = dv[n][3] = 0.f;
    dk[n][0] = dk[n][1] = dk[n][2] = dk[n][3] = 0.f;
  }

  for (int it = 0; it < total; ++it) {
    if (it + 1 < total) issue(it + 1);
    cp_commit();
    cp_wait_one();
    __syncthreads();
    const uint32_t sv = base + uint32_t((it / nI) & 1) * kRowTileBytes;
    const uint32_t sdo = base + stage_off(it), sq = sdo + kRowTileBytes, sa = sdo + 2 * kRowTileBytes;
    const float* sD = reinterpret_cast<const float*>(smem + stage_off(it) + 2 * kRowTileBytes + kATileBytes);

    // dP^T = V_j dO_i^T: rows are this warp's 16 keys, columns the 64 queries of the block.
    float dp[8][4];
#pragma unroll
    for (int n = 0; n < 8; ++n) dp[n][0] = dp[n][1] = dp[n][2] = dp[n][3] = 0.f;
#pragma unroll
    for (int kc = 0; kc < 8; ++kc) {
      uint32_t va[4];
      ldsm_x4(va, a_addr(sv, warp * 16, kc * 16, lane, 16));
#pragma unroll
      for (int np = 0; np < 4; ++np) {
        uint32_t bf[4];
        ldsm_x4(bf, bn_addr(sdo, np * 16, kc * 16, lane, 16));
        mma(dp[2 * np], va, bf[0], bf[1]);
        mma(dp[2 * np + 1], va, bf[2], bf[3]);
      }
    }
    uint32_t at[4][4];  // A^T: the mma operand of dV and, unpacked, the factor of dS^T
#pragma unroll
    for (int kc = 0; kc < 4; ++kc) ldsm_x4_t(at[kc], at_addr(sa, warp * 16, kc * 16, lane, 8));
    uint32_t dsf[4][4];
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      const float2 al = unpack(at[nt >> 1][2 * (nt & 1)]), ah = unpack(at[nt >> 1][2 * (nt & 1) + 1]);
      const float2 d = *reinterpret_cast<const float2*>(sD + nt * 8 + 2 * t);
      const float s0 = rb(rb(al.x * (rb(dp[nt][0]) - d.x)) * p.scaling);
      const float s1 = rb(rb(al.y * (rb(dp[nt][1]) - d.y)) * p.scaling);
      const float s2 = rb(rb(ah.x * (rb(dp[nt][2]) - d.x)) * p.scaling);
      const float s3 = rb(rb(ah.y * (rb(dp[nt][3]) - d.y)) * p.scaling);
      dsf[nt >> 1][2 * (nt & 1)] = pack(s0, s1);
      dsf[nt >> 1][2 * (nt & 1) + 1] = pack(s2, s3);
    }
#pragma unroll
    for (int kc = 0; kc < 4; ++kc) {
#pragma unroll
      for (int np = 0; np < 8; ++np) {
        uint32_t bf[4];
        ldsm_x4_t(bf, bk_addr(sdo, kc * 16, np * 16, lane, 16));
        mma(dv[2 * np], at[kc], bf[0], bf[1]);
        mma(dv[2 * np + 1], at[kc], bf[2], bf[3]);
        ldsm_x4_t(bf, bk_addr(sq, kc * 16, np * 16, lane, 16));
        mma(dk[2 * np], dsf[kc], bf[0], bf[1]);
        mma(dk[2 * np + 1], dsf[kc], bf[2], bf[3]);
      }
    }
    __syncthreads();
  }
  store_rows(dk, true, p, b, j0 + warp * 16, kKOffset + grp * kDim, lane);
  store_rows(dv, false, p, b, j0 + warp * 16, kVOffset + grp * kDim, lane);
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

size_t padded_attn_bytes(int64_t batch_size, int64_t seq_len) {
  if (seq_len % 8 == 0) return 0;
  return size_t(batch_size) * 32 * size_t(seq_len) * size_t((seq_len + 7) / 8 * 8) * 2;
}

cudaError_t launch_attention(const AttentionArgs& given, cudaStream_t stream) {
  AttentionArgs args = given;
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
  if (cudaError_t err = launch(row_kernel, row_grid, kRowSmem, args, stream); err != cudaSuccess) return err;
  return launch(column_kernel, col_grid, kColSmem, args, stream);
}

}  // namespace kindex::kernels::backward
