#pragma once
// Host side of the TMA loads (common/tma.cuh): tensor maps whose boxes land in wgmma's 128-byte-swizzle layout.
#include <cuda.h>

#include <cstdint>
#include <string>

namespace kindex::kernels {

// A 2-D tensor map over a row-major [rows][cols] bf16 matrix at `base` (device memory, 16-byte aligned) with row
// stride `row_stride` elements (a multiple of 8), in boxes of box_rows x 64 columns stored 128-byte-swizzled: a
// box loaded at a 1024-aligned address is one 64-column block of wgmma.cuh's layout. Rows at or past `rows` and
// columns at or past `cols` read as zeros. False, with `error` naming the value, when the driver refuses it (the
// driver's cuTensorMapEncodeTiled, reached through the runtime, so nothing links libcuda).
bool encode_sw128_map(CUtensorMap& map, const void* base, uint64_t rows, uint64_t cols, uint64_t row_stride,
                      uint32_t box_rows, std::string& error);

}  // namespace kindex::kernels
