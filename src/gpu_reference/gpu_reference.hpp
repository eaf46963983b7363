#pragma once
// Simple, obviously-correct GPU implementations of the two problems: the "reference" the runner times for
// speedup_factor and checks the fast kernels against on large workloads. Same params structs as the C ABI
// (device pointers). Every function returns a kindex_status; on failure kindex_last_error() says why.
//   paged_decode: one plain kernel, one thread block per (sequence, query head), fp32 accumulation (online
//     softmax per warp, warps merged at the end), lse base 2; empty sequences give zeros and -inf.
//   gqa_rope_backward: the definition's ops one by one, each matmul through cuBLASLt (bf16 in, fp32 accumulate,
//     bf16 out: the reference's rounding points), and small elementwise kernels for the head transposes, the
//     softmax backward (fp32, rounded to bf16, scaled and rounded again), the GQA sums and the RoPE backward.
// Only built with CUDA.
#include <cstddef>
#include <cstdint>

#include "kindex/gpu_reference.h"

namespace kindex::gpu_reference {

kindex_status paged_decode(const kindex_paged_decode_params& p, void* stream);

size_t gqa_rope_backward_workspace_bytes(int64_t batch_size, int64_t seq_len);
kindex_status gqa_rope_backward(const kindex_gqa_rope_backward_params& p, void* workspace, size_t workspace_bytes,
                                void* stream);

// A calibration kernel of known duration: one thread spins until %globaltimer has advanced by `nanoseconds`,
// and writes the span it observed (globaltimer ns) and the SM clock cycles it took to observed[0..1].
kindex_status spin(uint64_t nanoseconds, unsigned long long* observed_device, void* stream);

// Rates of this device, measured now: device-to-device copy (bytes read + written per second, 1 GiB copied)
// and a 8192^3 bf16 cuBLASLt GEMM on random data (FLOP/s); each the median of 10 timed repetitions (events).
kindex_status measure_rates(double* copy_bytes_per_s, double* gemm_flops_per_s);

// The runner's input generator on the device (kindex/gpu_reference.h: kindex_random_fill): the host generator's
// values, bit for bit.
kindex_status fill_random(const kindex_random_fill& fill, void* out, void* stream);

// The runner's comparator on the device (kindex/gpu_reference.h: kindex_gpu_reference_compare): the host
// comparator's tally.
kindex_status compare_tally(kindex_compare_rule rule, kindex_dtype dtype, const void* actual, const void* expected,
                            int64_t numel, float atol, float rtol, kindex_compare_tally* tally, void* stream);

const char* nvcc_version();      // "13.0.48" (baked at build)
const char* cublaslt_version();  // "13.0.0" from cublasLtGetVersion at run time

}  // namespace kindex::gpu_reference
