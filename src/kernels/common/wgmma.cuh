#pragma once
// Hopper warpgroup MMA (wgmma, sm_90a only): the 128-byte-swizzle shared-memory layout it reads, its matrix
// descriptors, the m64nNk16 bf16 -> fp32 instructions (both operands from shared memory, or A from registers) and
// the fences around them. Everything compiles to nothing where wgmma does not exist (sm_80, sm_100a, host), so a
// kernel built on it must only be launched on a device of compute capability 9.0 (wgmma_supported()).
//
// Layout (the one the loaders write and the descriptors describe): a [rows][cols] bf16 tile, cols a multiple of 64,
// is stored as cols / 64 column blocks of 64 elements one after the other (block stride rows * 128 bytes); in a
// block, row r occupies bytes r * 128 .. r * 128 + 127 and its 16-byte chunk j (elements 8j .. 8j + 7) sits at chunk
// j ^ (r & 7). The tile must start on a 1024-byte boundary (the hardware applies the XOR to address bits 4-6 from
// bits 7-9). The same bytes serve as a K-major operand (the tile's columns are the K dimension: dP = dO V^T reads
// dO [64 queries][128] and V [64 keys][128] this way) and as an MN-major operand (the tile's rows are K: dQ = dS K
// reads K [64 keys][128], dV = A^T dO reads A [64 queries][64 keys] and dO [64 queries][128] this way).
//
// Accumulators: a warpgroup's 64 x N fp32 result is N / 2 floats per thread, warp w holding rows 16w .. 16w + 15 in
// the mma.sync m16n8 accumulator layout per 8-column block i: d[4i + 0, 1] = (row g, cols 8i + 2t, + 1),
// d[4i + 2, 3] = (row g + 8, same cols), g = lane / 4, t = lane % 4. An A operand from registers uses the
// m16n8k16 A-fragment layout (rows of warp w, as above): a[0] = (g, 2t .. 2t + 1), a[1] = (g + 8, 2t ..),
// a[2] = (g, 2t + 8 ..), a[3] = (g + 8, 2t + 8 ..).
#include <cstdint>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define KINDEX_HAVE_WGMMA 1
#else
#define KINDEX_HAVE_WGMMA 0
#endif

namespace kindex::ptx {

// ---- the 128-byte-swizzle tile layout --------------------------------------------------------------------------
// Byte offset of 16-byte chunk `chunk` (elements 8 chunk .. 8 chunk + 7) of row r in a tile of `rows` rows.
__host__ __device__ constexpr uint32_t sw128_chunk_offset(int rows, int r, int chunk) {
  return uint32_t((chunk >> 3) * rows * 128 + r * 128 + (((chunk & 7) ^ (r & 7)) << 4));
}
// Byte offset of element (r, c).
__host__ __device__ constexpr uint32_t sw128_offset(int rows, int r, int c) {
  return sw128_chunk_offset(rows, r, c >> 3) + uint32_t(c & 7) * 2;
}

// ---- matrix descriptors ----------------------------------------------------------------------------------------
// Bits 0-13 start address >> 4, 16-29 leading byte offset >> 4, 32-45 stride byte offset >> 4, 62-63 layout
// (1 = 128-byte swizzle); base offset (bits 49-51) 0, as every tile starts 1024-aligned.
__device__ __forceinline__ uint64_t sw128_descriptor(uint32_t smem_addr, uint32_t leading_bytes,
                                                    uint32_t stride_bytes) {
  return uint64_t((smem_addr & 0x3FFFF) >> 4) | uint64_t((leading_bytes & 0x3FFFF) >> 4) << 16 |
         uint64_t((stride_bytes & 0x3FFFF) >> 4) << 32 | uint64_t(1) << 62;
}
// The operand whose K dimension is the tile's columns (K-major), for the 16 columns k0 .. k0 + 15 (k0 % 16 == 0) and
// all `rows` rows (64 for A; N for B): within a 64-column block a k-step is a 32-byte move of the start address
// (the swizzle is applied to the absolute address); 8-row groups are 1024 bytes apart; the leading offset is unused.
__device__ __forceinline__ uint64_t kmajor_descriptor(uint32_t tile, int rows, int k0) {
  return sw128_descriptor(tile + uint32_t((k0 >> 6) * rows * 128 + (k0 & 63) * 2), 16, 1024);
}
// The operand whose K dimension is the tile's rows (MN-major), for rows k0 .. k0 + 15 (k0 % 16 == 0) and the 64 or
// 128 columns from mn0 (mn0 % 64 == 0): 8-row K groups 1024 bytes apart (stride offset), 64-column blocks
// rows * 128 bytes apart (leading offset).
__device__ __forceinline__ uint64_t mnmajor_descriptor(uint32_t tile, int rows, int k0, int mn0) {
  return sw128_descriptor(tile + uint32_t((mn0 >> 6) * rows * 128 + k0 * 128), uint32_t(rows * 128), 1024);
}
// Transpose flags of the instructions: 0 = K-major operand, 1 = MN-major.
constexpr int kKMajor = 0, kMnMajor = 1;

// ---- fences ------------------------------------------------------------------------------------------------------
// Before the first wgmma of a batch (orders earlier register/shared-memory accesses before the asynchronous MMA).
__device__ __forceinline__ void wgmma_fence() {
#if KINDEX_HAVE_WGMMA
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#if KINDEX_HAVE_WGMMA
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
// Waits until at most N committed wgmma groups are pending.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
#if KINDEX_HAVE_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
// Keeps the compiler from moving accesses to the accumulators across wgmma_fence / wgmma_wait.
template <int N>
__device__ __forceinline__ void wgmma_fence_operands(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
// Makes this thread's generic-proxy writes to shared memory (st.shared, cp.async) visible to the async proxy that
// wgmma reads through; follow with a barrier before the wgmma is issued.
__device__ __forceinline__ void fence_proxy_async_shared() {
#if KINDEX_HAVE_WGMMA
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// ---- wgmma.mma_async m64nNk16, bf16 inputs, fp32 accumulators ----------------------------------------------------
// The accumulators of one instruction, the first asm operands: N / 2 registers "%0, %1, ..." in the instruction's
// text, and the operands "+f"(d[0]), "+f"(d[1]), ... that bind them (written once here for both shapes).
#define KINDEX_WGMMA_REGS32                                                    \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define KINDEX_WGMMA_REGS64                                                             \
  KINDEX_WGMMA_REGS32 ", "                                                              \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define KINDEX_WGMMA_D8(d, i)                                                                 \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
      "+f"(d[i + 6]), "+f"(d[i + 7])
#define KINDEX_WGMMA_D32(d) KINDEX_WGMMA_D8(d, 0), KINDEX_WGMMA_D8(d, 8), KINDEX_WGMMA_D8(d, 16), KINDEX_WGMMA_D8(d, 24)
#define KINDEX_WGMMA_D64(d) \
  KINDEX_WGMMA_D32(d), KINDEX_WGMMA_D8(d, 32), KINDEX_WGMMA_D8(d, 40), KINDEX_WGMMA_D8(d, 48), KINDEX_WGMMA_D8(d, 56)

template <int N>
struct Wgmma;

template <>
struct Wgmma<64> {
  // d (64 x 64 fp32, accumulator layout) = a * b + (accumulate ? d : 0), a and b from shared memory.
  template <int kTransA, int kTransB>
  static __device__ __forceinline__ void ss(float (&d)[32], uint64_t desc_a, uint64_t desc_b, bool accumulate) {
#if KINDEX_HAVE_WGMMA
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
        KINDEX_WGMMA_REGS32
        "}, %32, %33, p, 1, 1, %35, %36;\n}\n"
        : KINDEX_WGMMA_D32(d)
        : "l"(desc_a), "l"(desc_b), "r"(int(accumulate)), "n"(kTransA), "n"(kTransB));
#endif
  }
  // The same with a (64 x 16) from registers in the mma.sync m16n8k16 A-fragment layout (warp w of the warpgroup
  // holds rows 16w .. 16w + 15).
  template <int kTransB>
  static __device__ __forceinline__ void rs(float (&d)[32], const uint32_t (&a)[4], uint64_t desc_b,
                                            bool accumulate) {
#if KINDEX_HAVE_WGMMA
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
        KINDEX_WGMMA_REGS32
        "}, {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"
        : KINDEX_WGMMA_D32(d)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(int(accumulate)), "n"(kTransB));
#endif
  }
};

template <>
struct Wgmma<128> {
  // d (64 x 128 fp32, accumulator layout) = a * b + (accumulate ? d : 0), a and b from shared memory.
  template <int kTransA, int kTransB>
  static __device__ __forceinline__ void ss(float (&d)[64], uint64_t desc_a, uint64_t desc_b, bool accumulate) {
#if KINDEX_HAVE_WGMMA
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
        KINDEX_WGMMA_REGS64
        "}, %64, %65, p, 1, 1, %67, %68;\n}\n"
        : KINDEX_WGMMA_D64(d)
        : "l"(desc_a), "l"(desc_b), "r"(int(accumulate)), "n"(kTransA), "n"(kTransB));
#endif
  }
  // The same with a (64 x 16) from registers in the mma.sync m16n8k16 A-fragment layout (warp w of the warpgroup
  // holds rows 16w .. 16w + 15).
  template <int kTransB>
  static __device__ __forceinline__ void rs(float (&d)[64], const uint32_t (&a)[4], uint64_t desc_b,
                                            bool accumulate) {
#if KINDEX_HAVE_WGMMA
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
        KINDEX_WGMMA_REGS64
        "}, {%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"
        : KINDEX_WGMMA_D64(d)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(int(accumulate)), "n"(kTransB));
#endif
  }
};

#undef KINDEX_WGMMA_REGS32
#undef KINDEX_WGMMA_REGS64
#undef KINDEX_WGMMA_D8
#undef KINDEX_WGMMA_D32
#undef KINDEX_WGMMA_D64

}  // namespace kindex::ptx
