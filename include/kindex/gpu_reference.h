/* libkindex_gpu_reference.so: besides kindex's C ABI (kindex.h, run by the simple GPU references), the runner's
 * calibration, its input generator and its comparator on the device. The runner loads the library with dlopen
 * (src/runner/execute/libraries.hpp) and looks these up by name. */
#ifndef KINDEX_GPU_REFERENCE_H
#define KINDEX_GPU_REFERENCE_H

#include "kindex/compare_tally.h"
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

/* The runner's comparator on the device: the tally of `numel` elements of `actual` (the solution) against `expected`
 * (the reference), both contiguous device tensors of `dtype` (BF16, FP16 or FP32), under one rule with fp32 atol and
 * rtol, counted by the host comparator's per-element code (src/compare/element_rule.hpp) on `stream`. Waits for it
 * and writes the total to `tally`; compare::fib_report / sol_report turn it into the host comparator's Report. */
typedef enum kindex_compare_rule {
  KINDEX_COMPARE_FLASHINFER_BENCH = 0,
  KINDEX_COMPARE_SOL_EXECBENCH = 1
} kindex_compare_rule;

KINDEX_API kindex_status kindex_gpu_reference_compare(kindex_compare_rule rule, kindex_dtype dtype, const void* actual,
                                                      const void* expected, int64_t numel, float atol, float rtol,
                                                      kindex_compare_tally* tally, void* stream);

/* The runner's timer (src/measure/timer.hpp: time_device, shared with the runner) for a caller in another language,
 * kindex's solution worker (src/runner/execute/python/solution_worker.py), so a Python solution is timed by the very
 * code that times native runs: before every call `prepare(user)` and, with cold_l2, a 2 x L2 buffer zeroed on
 * `stream`, then a synchronisation; `untimed` + `warmup` calls, then `iterations` timed ones, each the span of its GPU
 * activity read with CUPTI (CUDA events on `stream` when CUPTI cannot be loaded or prefer_cupti is 0). */
typedef struct kindex_timing_protocol {
  int32_t untimed, warmup, iterations;
  int32_t cold_l2;      /* non-zero: flush L2 before every call */
  int32_t prefer_cupti; /* zero: CUDA events */
} kindex_timing_protocol;

/* One step the timer calls back: returns 0, or non-zero to stop timing (the caller keeps its own error). */
typedef int (*kindex_timed_step)(void* user);

/* Writes protocol->iterations nanosecond samples to `ns`, the clock used ("cupti_activity" | "cuda_events") to
 * `timer` and why CUPTI was not used (or "") to `note`, both NUL-terminated and cut to their sizes. A step that
 * returns non-zero ends it with KINDEX_STATUS_INVALID_INPUT; a CUDA failure is KINDEX_STATUS_CUDA_ERROR. */
KINDEX_API kindex_status kindex_gpu_reference_time_calls(const kindex_timing_protocol* protocol,
                                                         kindex_timed_step prepare, kindex_timed_step call, void* user,
                                                         void* stream, double* ns, char* timer, size_t timer_size,
                                                         char* note, size_t note_size);

/* The runner's output buffers in kindex's solution worker (another process on the same device): maps the 64-byte
 * cudaIpcMemHandle_t `handle` (handle_size 64) the runner exported, writing the mapped address to `ptr`; close
 * unmaps it. A solution's outputs are copied there, and the runner compares them where they lie. */
KINDEX_API kindex_status kindex_gpu_reference_ipc_open(const void* handle, size_t handle_size, void** ptr);
KINDEX_API kindex_status kindex_gpu_reference_ipc_close(void* ptr);

#ifdef __cplusplus
}
#endif

#endif
