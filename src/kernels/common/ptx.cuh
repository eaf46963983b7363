#pragma once
// The one place for kindex's inline PTX: asynchronous copies, ldmatrix, the m16n8k16 tensor-core MMA, packing and
// exp2, and programmatic dependent launch. Everything here runs from sm_80 on; PDL compiles to nothing below
// sm_90, where dependent launches are ordinary stream order anyway.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace kindex::ptx {

// ---- cp.async -------------------------------------------------------------------------------------------------
// A 16-byte global -> shared copy; valid = false zero-fills the 16 bytes without reading src (masked rows read
// as zeros, never as stale shared memory).
// (The ignore-src predicate form: the copy's own predicate, no source size computed per copy.)
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid) {
  asm volatile(
      "{\n .reg .pred ignore;\n setp.eq.u32 ignore, %2, 0;\n"
      " cp.async.cg.shared.global [%0], [%1], 16, ignore;\n}\n" ::"r"(dst),
      "l"(src), "r"(unsigned(valid)));
}
// The same with an L2 eviction-priority policy (l2_policy).
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid, uint64_t policy) {
  asm volatile(
      "{\n .reg .pred ignore;\n setp.eq.u32 ignore, %2, 0;\n"
      " cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, ignore, %3;\n}\n" ::"r"(dst),
      "l"(src), "r"(unsigned(valid)), "l"(policy));
}
// A 4-byte copy through L1 (page ids).
__device__ __forceinline__ void cp_async4(uint32_t dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(dst), "l"(src));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most N committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
// evict_first: rows read once replace each other rather than other lines; otherwise evict_normal.
__device__ __forceinline__ uint64_t l2_policy(bool evict_first) {
  uint64_t policy;
  if (evict_first)
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  else
    asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

// Brings the 128-byte line holding `p` into L2 (no register result, nothing to wait for).
__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

// ---- ldmatrix --------------------------------------------------------------------------------------------------
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// ---- mma.sync m16n8k16, fp32 accumulate ------------------------------------------------------------------------
// c += a (16x16, row) * b (16x8, col), a and b of element type T (__nv_bfloat16 or __half); pack() makes the A/B
// register of two values.
template <class T>
struct Mma {
  static_assert(std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>, "bf16 or fp16 inputs");
  static constexpr bool kBf16 = std::is_same_v<T, __nv_bfloat16>;
  static __device__ __forceinline__ void run(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#define KINDEX_MMA_M16N8K16(type)                                                                              \
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." type "." type                                           \
               ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"                                  \
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])                                                 \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1))
    if constexpr (kBf16) {
      KINDEX_MMA_M16N8K16("bf16");
    } else {
      KINDEX_MMA_M16N8K16("f16");
    }
#undef KINDEX_MMA_M16N8K16
  }
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    uint32_t bits;
    if constexpr (kBf16) {
      __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
      memcpy(&bits, &h, 4);
    } else {
      __half2 h = __floats2half2_rn(lo, hi);
      memcpy(&bits, &h, 4);
    }
    return bits;
  }
  static __device__ __forceinline__ T from_float(float x) {
    if constexpr (kBf16) return __float2bfloat16_rn(x);
    else return __float2half_rn(x);
  }
};

// ---- fp8 -------------------------------------------------------------------------------------------------------
// Four fp8 values (e4m3 "fn", or e5m2 when kE5M2), the first in the low byte, to two T x2 registers (values 0, 1
// in lo; 2, 3 in hi; the first in the low half), exactly, in integer ops and one multiply. Each byte placed as the top
// byte of a 16-bit word has its sign where T's is; its exponent and mantissa, shifted so the mantissas' tops meet,
// give the value times 2^-(T's exponent bias - the fp8 bias), normal and subnormal alike, and one multiply by that
// power of two (exact, subnormals included) finishes it. e5m2 is the top byte of its fp16: no shift, no multiply.
// Four integer ops and a multiply per pair, where cvt (fp8 -> fp16 -> fp32 -> bf16) took four conversions at a
// quarter of the rate: the conversion, not the halved bytes, limited the fp8 kernel (0.86x bf16's speed, H100).
// Special values: the e4m3 NaN (S.1111.111) becomes +-480, e5m2's infinities and NaNs become finite numbers.
template <class T, bool kE5M2>
__device__ __forceinline__ void fp8x4_to(uint32_t x, uint32_t& lo, uint32_t& hi) {
  constexpr bool kBf16 = std::is_same_v<T, __nv_bfloat16>;
  constexpr int kShift = 8 + (kE5M2 ? 2 : 3) - (kBf16 ? 7 : 10);  // fp8 mantissa bits - T's, from the top byte
  constexpr uint32_t kMagnitude = 0x7f007f00u >> kShift;
  uint32_t w[2] = {__byte_perm(x, 0u, 0x1404u), __byte_perm(x, 0u, 0x3424u)};  // bytes 0, 1 and 2, 3 on top
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    if constexpr (kShift > 0) w[i] = (w[i] & 0x80008000u) | ((w[i] >> kShift) & kMagnitude);
    if constexpr (kBf16) {  // x 2^120 (e4m3) or 2^112 (e5m2)
      __nv_bfloat162 v;
      memcpy(&v, &w[i], 4);
      v = __hmul2(v, __nv_bfloat162(__ushort_as_bfloat16(kE5M2 ? 0x7780u : 0x7b80u),
                                    __ushort_as_bfloat16(kE5M2 ? 0x7780u : 0x7b80u)));
      memcpy(&w[i], &v, 4);
    } else if constexpr (!kE5M2) {  // x 2^8
      __half2 v;
      memcpy(&v, &w[i], 4);
      v = __hmul2(v, __half2half2(__ushort_as_half(0x5c00u)));
      memcpy(&w[i], &v, 4);
    }
  }
  lo = w[0];
  hi = w[1];
}

// ---- math ------------------------------------------------------------------------------------------------------
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// ---- programmatic dependent launch (sm_90+) ----------------------------------------------------------------------
// The dependent grid may be scheduled now (it still waits for this grid's memory before pdl_wait returns).
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
#endif
}
// Waits until the grids this one depends on have completed and their memory is visible.
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

}  // namespace kindex::ptx
