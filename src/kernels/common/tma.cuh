#pragma once
// Hopper's bulk tensor copies (TMA) and the shared-memory barriers they complete on (sm_90 on): mbarrier init /
// arrive / arrive-with-expected-bytes / wait on a phase, and a 2-D tile load from a tensor map (tensor_map.hpp builds
// one whose boxes land in wgmma.cuh's 128-byte-swizzle layout, rows and columns past the matrix read as zeros).
// Everything compiles to nothing below sm_90, so a kernel built on it must only be launched on sm_90 or later.
#include <cuda.h>

#include <cstdint>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define KINDEX_HAVE_TMA 1
#else
#define KINDEX_HAVE_TMA 0
#endif

namespace kindex::ptx {

// `count` arrivals complete a phase (plus, with arrive_expect_tx, the announced bytes).
__device__ __forceinline__ void mbarrier_init(uint32_t bar, uint32_t count) {
#if KINDEX_HAVE_TMA
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
#endif
}
// Makes the initialised barriers visible to the async proxy (TMA); follow with a barrier of the CTA.
__device__ __forceinline__ void mbarrier_init_fence() {
#if KINDEX_HAVE_TMA
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void mbarrier_arrive(uint32_t bar) {
#if KINDEX_HAVE_TMA
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
#endif
}
// One arrival that also announces `bytes` more to come from TMA copies completing on this barrier.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
#if KINDEX_HAVE_TMA
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
#endif
}
// Waits until the phase with parity `phase` (0, 1, 0, ... as phases complete) has completed.
__device__ __forceinline__ void mbarrier_wait(uint32_t bar, uint32_t phase) {
#if KINDEX_HAVE_TMA
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(phase)
        : "memory");
  } while (!done);
#endif
}

// The box at (column c0, row c1) of a 2-D tensor map into shared memory at `dst` (1024-aligned for the swizzled
// layout), completing `bar` with the box's bytes. `map` is the address of a __grid_constant__ kernel parameter.
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0, int c1) {
#if KINDEX_HAVE_TMA
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
      :
      : "r"(dst), "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
#endif
}

}  // namespace kindex::ptx
