/* libkindex_gpu_reference.so: besides kindex's C ABI (kindex.h, run by the simple GPU references), the runner's
 * calibration. The runner loads the library with dlopen (src/bench/libraries.hpp) and looks these up by name. */
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

#ifdef __cplusplus
}
#endif

#endif
