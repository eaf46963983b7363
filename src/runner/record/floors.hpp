#pragma once
// Lower bounds on a kernel's latency, and the SOL-ExecBench score.
//   headroom-v1 (KernelIndex, exactly): max(bytes of every declared input tensor / datasheet DRAM bandwidth,
//     FLOPs / datasheet dense peak); FLOPs only for the GEMM (2MNK) and attention (4*B*H*Lq*Lk*D) families.
//     The gqa-paged-attention and rope families have no arithmetic formula: bandwidth floor only.
//   kindex floor (tighter): bytes a call must actually move (docs/protocols.md section 3, "Floors": for decode only
//     the KV tokens it reads, plus q, output, lse and the index arrays) over the MEASURED copy bandwidth, FLOPs
//     over the MEASURED tensor rate.
//   SOL score (L2/003): S = 1 / (1 + (T_k - T_SOL) / (T_b - T_SOL)), T_SOL = max(2*MACs / 989.4e12,
//     compulsory bytes / 4.8e12), T_b the optimized-PyTorch baseline of the same GPU.
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "kindex/kindex.h"
#include "store/ranking.hpp"

namespace kindex::runner {

// Datasheet peaks of a GPU: the store's table (store/ranking.hpp), so the runner's headroom-v1 and the pages' agree.
using store::Datasheet;
using store::datasheet_for;

// Rates measured on a real device, with where they come from.
struct MeasuredRates {
  double copy_bytes_per_s = 0;    // device-to-device copy, bytes read + written per second
  double tensor_flops_per_s = 0;  // large bf16 GEMM
  std::string provenance;
};
// protocols.md section 4 (H200, 2026-12-02): 4.28 TB/s and 784 TFLOP/s; nullopt for other GPUs.
std::optional<MeasuredRates> published_measured_rates(const std::string& device_name);

// What one call of a workload must do.
struct WorkCount {
  double declared_input_bytes = 0;       // every declared input tensor, whole (scalars excluded)
  double compulsory_bytes = 0;           // every input read once + every output written once
  double referenced_bytes = 0;           // bytes a call must actually move (decode: KV tokens read + q/out/lse/indices)
  double flops = 0;                      // arithmetic of the kindex floor (0: none counted)
};

// The bytes one paged-decode call must move and its FLOPs: the one definition, used by the runner (count_work),
// benchmarks/gpu/bench_decode.cu and, through the runs they record, the pages. `p` holds host pointers to the index arrays
// (kv_indptr, kv_indices, kv_last_page_len); element_bytes is the size of a q / cache / output element.
//   referenced_bytes = K and V of every distinct (page, slot) some sequence reads (a page several sequences share
//     counts once, up to the longest prefix of it any of them reads) + q + output + lse (fp32) + kv_indptr +
//     kv_indices (+ kv_last_page_len), the index arrays 4 B an entry;
//   flops = 4 * num_qo_heads * head_dim per (sequence, token) read (q.k and p.v; a shared token counts per reader).
// Variants (kindex.h version 2): an fp8 cache element is 1 byte; q, output and lse have q_len_per_req rows per
// request and flops count each row; sinks add 4 B per query head; a window or the causal limit among a request's
// rows is not subtracted (the floor of a windowed call is then its whole sequence's).
// declared_input_bytes / compulsory_bytes are left 0: they need the whole declared tensors (count_work).
WorkCount paged_decode_work(const kindex_paged_decode_params& p, double element_bytes);

struct Floor {
  std::string method;  // "headroom-v1" | "kindex-referenced-v1"
  double bytes = 0, flops = 0;
  double memory_s = 0, compute_s = 0;
  double floor_s = 0;  // max of the two
  std::string bound;   // "bandwidth" | "compute"
  std::string basis;   // which peaks, and their provenance
};

// headroom-v1 of a run on `gpu`: store::headroom_v1 (the one formula, which the pages apply to imported runs) on the
// run's OperationSpec and WorkloadCase manifest documents, in the runner's units; nullopt without a datasheet.
std::optional<Floor> headroom_v1_floor(const nlohmann::json& operation, const nlohmann::json& workload,
                                       const std::string& gpu);
Floor kindex_floor(const WorkCount& work, const MeasuredRates& rates);

// SOL-ExecBench L2/003. T_SOL's peaks: H200 dense bf16 989.4 TFLOP/s and 4.8 TB/s (docs/protocols.md).
inline constexpr double kSolPeakFlopsPerS = 989.4e12;
inline constexpr double kSolPeakBytesPerS = 4.8e12;
double l2_003_macs(int64_t batch_size, int64_t seq_len);         // 104,857,600*B*S + 16,384*B*S^2
double sol_t_sol_seconds(double macs, double compulsory_bytes);  // max(2*MACs/989.4e12, bytes/4.8e12)
double sol_score(double t_kernel, double t_sol, double t_baseline);
// T_b of L2/003 for (B, S) on a GPU: H200 from protocols.md section 4 (torch.compile, ms), B200 from the
// published SOL-ExecBench values; nullopt when unknown.
std::optional<double> l2_003_baseline_seconds(const std::string& device_name, int64_t batch_size, int64_t seq_len);
// T_b of L2/003 measured in one run on this machine: torch.compile of the definition's reference, per (B, S), from
// the JSON benchmarks/gpu/backward_vs_torch.py writes (its "device".name and each workload's batch_size, seq_len, t_b_ms).
struct BaselineTimes {
  std::string path;    // the file
  std::string device;  // the GPU it was measured on
  std::map<std::pair<int64_t, int64_t>, double> seconds;  // (batch_size, seq_len) -> T_b
  std::optional<double> find(int64_t batch_size, int64_t seq_len) const;
};
// Reads such a file; throws kindex::Error("--baseline", path or field, value, problem) for anything else.
BaselineTimes load_baseline_times(const std::string& path);
// Published B200 T_SOL (SOLAR at 1.5 GHz), for context next to the H200 roofline.
std::optional<double> l2_003_published_b200_sol_seconds(int64_t batch_size, int64_t seq_len);

}  // namespace kindex::runner
