#pragma once
// ranking-v1, evidence levels, the headroom-v1 floor and suite scores: the rules every surface shares.
#include <nlohmann/json.hpp>

#include <array>
#include <optional>
#include <string>
#include <vector>

namespace kindex::store {

// reported < reproducible < verified < replicated, as KernelIndex's trust policy derives them: "replicated" has
// two or more independent replications; "verified" is a run kindex's own runner measured on a real GPU with its
// raw samples kept (or one KernelIndex itself reproduced); "reproducible" has public source and raw evidence
// (samples, logs or an equivalent artifact; an install recipe is not needed); everything else is "reported".
enum class EvidenceLevel { reported = 0, reproducible = 1, verified = 2, replicated = 3 };
std::string to_string(EvidenceLevel level);

struct RunEvidence {
  bool reproduced_by_kernelindex = false;
  int64_t independent_replications = 0;
  bool source_available = false;
  bool has_raw_evidence = false;
};
EvidenceLevel evidence_level(const RunEvidence& e);

// One cohort member as ranking sees it.
struct Ranked {
  std::string id;
  double value = 0;                       // primary latency, ns
  std::optional<double> low, high;        // 95% interval, ns
  EvidenceLevel evidence = EvidenceLevel::reported;
  std::string observed_at;  // UTC instant (ISO-8601)
  bool source_native = false;
  int rank = 0;
  bool tied_with_previous = false;
};

// ranking-v1 exactly as KernelIndex's frozen policy: runs sorted ascending by value are grouped into tie chains; a
// run joins the current chain only when it ties with every member (equal values, or, in a cohort that is not
// source-native, overlapping 95% intervals; a missing interval ties only on equal values), so ties never pass
// through an intermediate run (A~B, B~C, A!~C ranks 1, 1, 2). Each chain is one dense rank; within it the order
// is higher evidence, then newer observation, then id. A cohort is source-native when any member is
// (cohort_is_source_native).
void rank_v1(std::vector<Ranked>& runs, bool source_native);
bool cohort_is_source_native(const std::vector<Ranked>& runs);

// The cohort's record holder (KernelIndex's record ledger: the running minimum): the fastest run, the earliest
// observed of equal values (then the smaller id), whatever order rank_v1 lists its tie chain in. nullptr when empty.
// Every output that names a holder (record events, `kindex records`, the operation page's recordStatus) uses it.
const Ranked* record_holder(const std::vector<Ranked>& runs);

// Datasheet peaks (headroom-v1; docs/protocols.md section 3), the one table the store's floors and the runner's
// (src/runner/record/floors.hpp) read: DRAM bandwidth in bytes/s and dense bf16 tensor FLOP/s for a GPU product name
// ("NVIDIA H200", "NVIDIA H100 80GB HBM3", "NVIDIA B200", any case); nullopt for an unknown GPU (and for the
// H100 PCIe and NVL, which have other peaks).
struct Datasheet {
  std::string product;           // "NVIDIA H200"
  double dram_bytes_per_s = 0;   // 4.8e12
  double dense_flops_per_s = 0;  // 989e12
};
std::optional<Datasheet> datasheet_for(const std::string& hardware_model);

// The headroom-v1 lower bound of a workload on a GPU: every declared input tensor crosses HBM once, and the
// arithmetic bound where the family has a formula (GEMM 2MNK, attention 4*B*H*Lq*Lk*D).
struct Floor {
  double bytes = 0;
  double flops = 0;            // 0: no arithmetic formula for this family
  double memory_ns = 0;
  double compute_ns = 0;
  double floor_ns = 0;         // max of the two
  std::string bound;           // "bandwidth" or "compute"
  std::string gpu;             // the datasheet product used
  double dram_gbps = 0, tflops = 0;
};
// `operation` and `workload` are OperationSpec and WorkloadCase manifests (documents); nullopt for suites, or
// when the GPU has no datasheet entry.
std::optional<Floor> headroom_v1(const nlohmann::json& operation, const nlohmann::json& workload,
                                 const std::string& hardware_model);

// SOL-ExecBench score of one workload: 1 / (1 + (T_k - T_SOL) / (T_b - T_SOL)).
double sol_score(double t_kernel, double t_baseline, double t_sol);
struct SuiteScore {
  double mean_sol_score = 0;
  double avg_speedup = 0;  // mean of T_b / T_k
  int fast_1 = 0;          // workloads with T_k < T_b
  int total = 0;
  double geomean_latency = 0;
};
// Per-workload triples (T_k, T_b, T_SOL) in any unit.
SuiteScore suite_score(const std::vector<std::array<double, 3>>& per_workload);

}  // namespace kindex::store
