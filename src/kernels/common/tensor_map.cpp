#include "kernels/common/tensor_map.hpp"

#include <cuda_runtime.h>
#include <cudaTypedefs.h>

namespace kindex::kernels {

bool encode_sw128_map(CUtensorMap& map, const void* base, uint64_t rows, uint64_t cols, uint64_t row_stride,
                      uint32_t box_rows, std::string& error) {
  if (row_stride % 8 != 0 || reinterpret_cast<uintptr_t>(base) % 16 != 0 || box_rows == 0 || box_rows > 256) {
    error = "tensor map: row_stride = " + std::to_string(row_stride) + " elements (need a multiple of 8), box_rows = " +
            std::to_string(box_rows) + " (need 1..256), base 16-byte aligned";
    return false;
  }
  static PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
      fn = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  if (!encode) {
    error = "tensor map: the driver has no cuTensorMapEncodeTiled";
    return false;
  }
  const cuuint64_t dims[2] = {cols, rows};
  const cuuint64_t strides[1] = {row_stride * 2};  // bytes between rows
  const cuuint32_t box[2] = {64, box_rows};         // 64 bf16 = the 128-byte swizzle span
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult r = encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(base), dims, strides, box,
                            element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    error = "tensor map: cuTensorMapEncodeTiled returned " + std::to_string(int(r)) + " for rows = " +
            std::to_string(rows) + ", cols = " + std::to_string(cols) + ", row_stride = " + std::to_string(row_stride);
    return false;
  }
  return true;
}

}  // namespace kindex::kernels
