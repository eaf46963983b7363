#include "runner/record/derive.hpp"

#include "catalog/builtin.hpp"
#include "problem_manifest/problem_manifest.hpp"

namespace kindex::runner {

// Floors, ratios, speedup and SOL score of a finished run.
void derive(RunResult& r, const WorkItem& item, const Environment& env, const std::optional<MeasuredRates>& measured,
            const std::optional<BaselineTimes>& baseline) {
  if (!r.timing.trials_ns.empty()) r.timing.summary = summarize_trials(r.timing.trials_ns);
  if (!r.reference_timing.trials_ns.empty())
    r.reference_timing.summary = summarize_trials(r.reference_timing.trials_ns);
  if (r.timing.summary && r.reference_timing.summary && r.timing.summary->latency > 0)
    r.speedup = r.reference_timing.summary->latency / r.timing.summary->latency;
  if (r.work.compulsory_bytes <= 0) return;
  const std::string target = env.floor_target();
  if (datasheet_for(target)) {  // on the manifests the run is recorded with, as the pages do for imported runs
    const evidence::Manifest op = problem_manifest::operation_spec(*item.definition);
    r.headroom = headroom_v1_floor(op.document, problem_manifest::workload_case(*item.definition, *item.workload, op).document,
                                   target);
  }
  std::optional<MeasuredRates> rates = published_measured_rates(target);
  if (!rates && measured) rates = measured;
  if (rates) r.kindex_floor = kindex_floor(r.work, *rates);
  const double latency_s = r.latency_ns() * 1e-9;
  if (latency_s > 0) {
    if (r.headroom && r.headroom->floor_s > 0) r.headroom_ratio = latency_s / r.headroom->floor_s;
    if (r.kindex_floor && r.kindex_floor->floor_s > 0) r.kindex_ratio = latency_s / r.kindex_floor->floor_s;
  }
  if (r.definition == catalog::kSolGqaRopeBackward && r.axes.count("batch_size") && r.axes.count("seq_len")) {
    const int64_t b = r.axes.at("batch_size"), s = r.axes.at("seq_len");
    r.t_sol_s = sol_t_sol_seconds(l2_003_macs(b, s), r.work.compulsory_bytes);
    if (baseline) {
      r.t_baseline_s = baseline->find(b, s);
      if (r.t_baseline_s)
        r.t_baseline_source = "torch.compile measured on " + baseline->device + " (" + baseline->path + ")";
    } else if (env.has_gpu) {
      r.t_baseline_s = l2_003_baseline_seconds(env.gpu_name, b, s);
      if (r.t_baseline_s)
        r.t_baseline_source = "published for " + env.gpu_name +
                              " (H200: docs/protocols.md section 4; B200: SOL-ExecBench's published values)";
    }
    if (r.t_baseline_s && latency_s > 0 && r.timed_on_device)
      r.sol_score = sol_score(latency_s, *r.t_sol_s, *r.t_baseline_s);
  }
}


}  // namespace kindex::runner
