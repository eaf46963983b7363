/* libkindex_gpu_reference.so: besides kindex's C ABI (kindex.h, run by the simple GPU references), the runner's
 * calibration and its input generator on the device. The runner loads the library with dlopen
 * (src/runner/libraries.hpp) and looks these up by name. */
#ifndef KINDEX_GPU_REFERENCE_C_ABI_H
#define KINDEX_GPU_REFERENCE_C_ABI_H

#include "kindex/kindex.h"

#ifdef __cplusplus
extern "C" {
#endif

/* This device's device-to-device copy rate (bytes read + written per second) and 8192^3 bf16 GEMM rate (FLOP/s),
 * measured now (gpu_reference.hpp: measure_rates). */
KINDEX_API kindex_status kindex_gpu_reference_measure_rates(double* copy_bytes_per_s, double* gemm_flops_per_s);
KINDEX_API const char* kindex_gpu_reference_nvcc_version(void);     /* baked at build */
KINDEX_API const char* kindex_gpu_reference_cublaslt_version(void); /* at run time */

/* One random input tensor drawn on the device, bit for bit the values the host generator gives
 * (catalog::fill_random; the arithmetic is src/core/random_math.hpp's). */
typedef enum kindex_random_kind {
  KINDEX_RANDOM_NORMAL = 0,        /* standard normal times scale */
  KINDEX_RANDOM_COS_OF_ANGLE = 1,  /* cos of a standard normal angle clamped to [-pi, pi] */
  KINDEX_RANDOM_SIN_OF_ANGLE = 2,  /* its sin */
  KINDEX_RANDOM_SOFTMAX_ROWS = 3   /* softmax (fp32) over rows of `row` standard normals */
} kindex_random_kind;

typedef struct kindex_random_fill {
  kindex_random_kind kind;
  kindex_dtype dtype; /* BF16, FP16 or FP32 */
  int64_t numel;
  uint64_t seed, stream;
  double scale;               /* NORMAL */
  int64_t row;                /* SOFTMAX_ROWS: the row length; numel a multiple of it */
  const uint8_t* pages_used;  /* NORMAL over a paged cache: host array of num_pages flags (0: page of zeros), or NULL */
  int64_t num_pages, page_elems;
} kindex_random_fill;

/* Writes fill->numel elements to `out` (device memory) on `stream`. */
KINDEX_API kindex_status kindex_gpu_reference_fill_random(const kindex_random_fill* fill, void* out, void* stream);

#ifdef __cplusplus
}
#endif

#endif
