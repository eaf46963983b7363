// Benchmark of kindex_gqa_rope_backward (SOL-ExecBench L2/003) on all 16 workloads, SOL-style: cold L2 (a 2x L2
// buffer zeroed before every iteration), inputs alternating between two copies at different addresses, 10 warm-up
// and 50 timed iterations, median of CUDA-event spans. Also times the GEMMs alone and the attention kernels alone
// (the share of each), and reports T_SOL (datasheet H200: 989.4 TFLOP/s, 4.8 TB/s), T_b (H200 torch.compile,
// docs/protocols.md section 4) and the SOL score S = 1 / (1 + (T_k - T_SOL) / (T_b - T_SOL)).
// Each workload is also timed whole and attention-only with the other attention schedule (attention.hpp: both give
// bit-identical results), so one run shows which schedule wins where.
//   bench_backward [--out FILE.json] [--iters N] [--warmup N] [--cases 1x128,4x1024] [--attention-only]
//                  [--schedule store_dp|recompute_dp] [--tiling R,C] [--plan v3|value_stream|value_high|rows_high]
//                  [--max-splits N] [--kernels mma_sync|wgmma] [--variants SPEC/SPEC/...]
// --attention-only runs just the attention kernels (no cuBLASLt, no JSON): for compute-sanitizer racecheck, which
// cannot instrument cuBLASLt's Hopper kernels. --schedule, --tiling (row_warps,col_warps: 4 or 8) and --plan pick
// the primary variant (default: the C ABI's plan for this device, backward.hpp resolve). --variants sweeps variants
// instead (whole call and attention only per workload and variant, a summary per variant, JSON with all of it);
// SPEC = store|recompute:R:C:v3|value|high|rows
// optionally followed by :N, the cap on the split of the dK/dV sums (1: no split, as in v3; default 8), and then by
// :wgmma or :mma_sync, the attention kernels' instructions (attention.hpp AttentionKernels; default: the device's,
// default_kernels; wgmma needs an sm_90 device). --kernels picks them for the primary variant.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "check_cuda.hpp"

#include "runner/record/floors.hpp"
#include "catalog/builtin.hpp"
#include "kernels/layer_backward/backward.hpp"
#include "kindex/kindex.h"

namespace {

namespace kb = kindex::kernels::backward;

struct Workload {
  int b, s;
  double t_b_ms;        // H200 torch.compile baseline (docs/protocols.md section 4)
  double b200_sol_ms;   // published B200 SOL bound (published-b200.json), for context
  double b200_base_ms;  // published B200 scoring baseline
};
// The 16 workloads in upstream order (the bundled workload.jsonl), with the runner's baselines (src/runner/record/floors.hpp).
std::vector<Workload> sol_workloads() {
  namespace runner = kindex::runner;
  std::vector<Workload> out;
  for (const auto& w : kindex::catalog::builtin_workloads(kindex::catalog::kSolGqaRopeBackward)) {
    const int64_t b = w.axes.at("batch_size"), s = w.axes.at("seq_len");
    out.push_back({int(b), int(s), *runner::l2_003_baseline_seconds("NVIDIA H200", b, s) * 1e3,
                   *runner::l2_003_published_b200_sol_seconds(b, s) * 1e3,
                   *runner::l2_003_baseline_seconds("NVIDIA B200", b, s) * 1e3});
  }
  return out;
}

// Deterministic pseudo-random bf16 fill on the device: uniform in [lo, hi) from a hash of the index. Timing only
// needs realistic, non-zero, finite values (never zeros: they can run faster).
__global__ void fill_kernel(uint16_t* out, size_t n, uint32_t seed, float lo, float hi) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t x = uint32_t(i) * 0x9E3779B1u ^ seed ^ uint32_t(i >> 32) * 0x85EBCA77u;
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    const float v = lo + (hi - lo) * float(x >> 8) * (1.0f / 16777216.0f);
    out[i] = uint16_t(__float_as_uint(v) >> 16);
  }
}

struct Inputs {
  std::vector<void*> ptrs;  // in kindex_gqa_rope_backward_params order
};

const char* const kInputNames[] = {"grad_output", "hidden_states", "cos", "sin", "q_weight", "k_weight", "v_weight",
                                   "o_weight", "query_states", "key_states", "value_states", "attn_weights",
                                   "attn_output"};

std::vector<size_t> input_elems(int64_t b, int64_t s) {
  return {size_t(b * s * 5120), size_t(b * s * 5120), size_t(b * s * 128), size_t(b * s * 128), 4096u * 5120u,
          1024u * 5120u,        1024u * 5120u,        5120u * 4096u,       size_t(b * 32 * s * 128),
          size_t(b * 32 * s * 128), size_t(b * 32 * s * 128), size_t(b * 32 * s * s), size_t(b * s * 4096)};
}
std::vector<size_t> output_elems(int64_t b, int64_t s) {
  return {size_t(b * s * 5120), 4096u * 5120u, 1024u * 5120u, 1024u * 5120u, 5120u * 4096u};
}

Inputs make_inputs(int64_t b, int64_t s, uint32_t seed) {
  Inputs in;
  const auto elems = input_elems(b, s);
  for (size_t i = 0; i < elems.size(); ++i) {
    void* p = nullptr;
    CHECK_CUDA(cudaMalloc(&p, elems[i] * 2));
    const std::string name = kInputNames[i];
    float lo = -2.f, hi = 2.f;
    if (name.find("weight") != std::string::npos) lo = -0.03f, hi = 0.03f;
    if (name == "attn_weights") lo = 0.f, hi = 2.f / float(s);  // softmax-like rows
    if (name == "cos" || name == "sin") lo = -1.f, hi = 1.f;
    fill_kernel<<<1024, 256>>>(static_cast<uint16_t*>(p), elems[i], seed * 977u + uint32_t(i), lo, hi);
    CHECK_CUDA(cudaGetLastError());
    in.ptrs.push_back(p);
  }
  return in;
}

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * double(v.size() - 1);
  const size_t lo = size_t(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - double(lo));
}

struct Timing {
  double median_ms, min_ms, p05_ms, p95_ms;
};

}  // namespace

int main(int argc, char** argv) {
  std::string out_path = "bench_backward.json", cases;
  int iters = 50, warmup = 10;
  bool attention_only = false;
  kb::RunOptions primary;
  std::string variant_list;
  auto schedule_name = [](kb::AttentionSchedule s) {
    return s == kb::AttentionSchedule::store_dp ? "store_dp" : "recompute_dp";
  };
  auto plan_name = [](kb::StreamPlan s) {
    return s == kb::StreamPlan::v3             ? "v3"
           : s == kb::StreamPlan::value_stream ? "value_stream"
           : s == kb::StreamPlan::value_high   ? "value_high"
                                               : "rows_high";
  };
  auto parse_kernels = [](const std::string& v, std::optional<kb::AttentionKernels>& out) {
    if (v == "mma_sync") out = kb::AttentionKernels::mma_sync;
    else if (v == "wgmma") out = kb::AttentionKernels::wgmma;
    else return false;
    return true;
  };
  auto parse_plan = [](const std::string& v, kb::StreamPlan& out) {
    if (v == "v3") out = kb::StreamPlan::v3;
    else if (v == "value" || v == "value_stream") out = kb::StreamPlan::value_stream;
    else if (v == "high" || v == "value_high") out = kb::StreamPlan::value_high;
    else if (v == "rows" || v == "rows_high") out = kb::StreamPlan::rows_high;
    else return false;
    return true;
  };
  for (int i = 1; i < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--attention-only") {
      attention_only = true;
      --i;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "option %s needs a value\n", a.c_str());
      return 2;
    }
    if (a == "--out") out_path = argv[i + 1];
    else if (a == "--iters") iters = std::atoi(argv[i + 1]);
    else if (a == "--warmup") warmup = std::atoi(argv[i + 1]);
    else if (a == "--cases") cases = argv[i + 1];
    else if (a == "--schedule" && std::string(argv[i + 1]) == "store_dp")
      primary.schedule = kb::AttentionSchedule::store_dp;
    else if (a == "--schedule" && std::string(argv[i + 1]) == "recompute_dp")
      primary.schedule = kb::AttentionSchedule::recompute_dp;
    else if (a == "--tiling" && std::sscanf(argv[i + 1], "%d,%d", &primary.tiling.row_warps,
                                            &primary.tiling.col_warps) == 2) {
    } else if (a == "--plan" && parse_plan(argv[i + 1], primary.streams)) {
    } else if (a == "--kernels" && parse_kernels(argv[i + 1], primary.kernels)) {
    } else if (a == "--variants") variant_list = argv[i + 1];
    else if (a == "--max-splits") primary.max_column_splits = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  struct Variant {
    std::string name;
    kb::RunOptions options;
  };
  std::vector<Variant> variants;
  for (size_t pos = 0; !variant_list.empty() && pos <= variant_list.size();) {
    const size_t end = std::min(variant_list.find('/', pos), variant_list.size());
    const std::string spec = variant_list.substr(pos, end - pos);
    pos = end + 1;
    char sched[16] = {}, plan[16] = {}, kernels[16] = {};
    Variant v{spec, {}};
    const int fields = std::sscanf(spec.c_str(), "%15[a-z]:%d:%d:%15[a-z_0-9]:%d:%15[a-z_]", sched,
                                   &v.options.tiling.row_warps, &v.options.tiling.col_warps, plan,
                                   &v.options.max_column_splits, kernels);
    if (fields < 4 || !parse_plan(plan, v.options.streams) ||
        (std::string(sched) != "store" && std::string(sched) != "recompute") ||
        (fields == 6 && !parse_kernels(kernels, v.options.kernels))) {
      std::fprintf(stderr, "bad variant %s\n", spec.c_str());
      return 2;
    }
    v.options.schedule = std::string(sched) == "store" ? kb::AttentionSchedule::store_dp
                                                       : kb::AttentionSchedule::recompute_dp;
    variants.push_back(v);
  }
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  primary = kb::resolve(primary);  // the JSON names what ran
  const kb::AttentionSchedule schedule = *primary.schedule;
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const size_t flush_bytes = size_t(prop.l2CacheSize) * 2;
  void* flush = nullptr;
  CHECK_CUDA(cudaMalloc(&flush, flush_bytes));
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));

  nlohmann::json results = nlohmann::json::array();
  std::vector<double> sweep_score(variants.size()), sweep_log(variants.size());
  std::vector<int> sweep_fast(variants.size());
  double log_sum_latency = 0, score_sum = 0, score_other_sum = 0, score_best_sum = 0;
  int count = 0, faster = 0;
  std::printf("%-9s %9s %9s %9s %9s %8s %7s %7s %6s | %s\n", "B x S", "T_k ms", "gemm ms", "attn ms", "T_SOL ms",
              "T_b ms", "TFLOP/s", "x T_b", "S", "other schedule: T_k ms, attn ms, S");
  for (const Workload& w : sol_workloads()) {
    const std::string tag = std::to_string(w.b) + "x" + std::to_string(w.s);
    if (!cases.empty() && ("," + cases + ",").find("," + tag + ",") == std::string::npos) continue;
    const int64_t B = w.b, S = w.s;
    // Two input copies at different addresses, alternated per iteration.
    Inputs sets[2] = {make_inputs(B, S, 1), make_inputs(B, S, 1)};
    std::vector<void*> outs;
    for (size_t e : output_elems(B, S)) {
      void* p = nullptr;
      CHECK_CUDA(cudaMalloc(&p, e * 2));
      outs.push_back(p);
    }
    auto params_for = [&](const Inputs& in) {
      const auto& p = in.ptrs;
      return kindex_gqa_rope_backward_params{sizeof(kindex_gqa_rope_backward_params),
                                             int32_t(B), int32_t(S), p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7],
                                             p[8], p[9], p[10], p[11], p[12], 0.08838834764831845f,
                                             outs[0], outs[1], outs[2], outs[3], outs[4]};
    };
    size_t ws_bytes = 0;
    auto p0 = params_for(sets[0]);
    if (kindex_gqa_rope_backward_workspace_size(&p0, &ws_bytes) != KINDEX_STATUS_OK) {
      std::fprintf(stderr, "%s\n", kindex_last_error());
      return 1;
    }
    void* ws = nullptr;
    CHECK_CUDA(cudaMalloc(&ws, ws_bytes));
    CHECK_CUDA(cudaDeviceSynchronize());

    auto time_parts = [&](kb::Parts parts, const kb::RunOptions& opt) {
      std::vector<double> ms;
      for (int it = 0; it < warmup + iters; ++it) {
        const auto p = params_for(sets[it & 1]);
        CHECK_CUDA(cudaMemsetAsync(flush, 0, flush_bytes, stream));
        CHECK_CUDA(cudaEventRecord(start, stream));
        try {
          kb::run(p, ws, ws_bytes, stream, parts, opt);
        } catch (const std::exception& e) {
          std::fprintf(stderr, "%s\n", e.what());
          std::exit(1);
        }
        CHECK_CUDA(cudaEventRecord(stop, stream));
        CHECK_CUDA(cudaEventSynchronize(stop));
        float e = 0;
        CHECK_CUDA(cudaEventElapsedTime(&e, start, stop));
        if (it >= warmup) ms.push_back(e);
      }
      return Timing{percentile(ms, 0.5), *std::min_element(ms.begin(), ms.end()), percentile(ms, 0.05),
                    percentile(ms, 0.95)};
    };
    if (attention_only) {
      const Timing t = time_parts(kb::Parts::attention, primary);
      CHECK_CUDA(cudaDeviceSynchronize());
      std::printf("%-9s attention only %.4f ms\n", tag.c_str(), t.median_ms);
      for (auto& set : sets)
        for (void* p : set.ptrs) cudaFree(p);
      for (void* p : outs) cudaFree(p);
      cudaFree(ws);
      continue;
    }
    // The public entry point once (validation included), then the timed variants.
    if (kindex_gqa_rope_backward(&p0, ws, ws_bytes, stream) != KINDEX_STATUS_OK) {
      std::fprintf(stderr, "%s\n", kindex_last_error());
      return 1;
    }
    CHECK_CUDA(cudaStreamSynchronize(stream));
    // T_SOL and the score as the runner computes them (src/runner/record/floors.hpp).
    const double macs = kindex::runner::l2_003_macs(B, S);
    double bytes = 0;
    for (size_t e : input_elems(B, S)) bytes += 2.0 * double(e);
    for (size_t e : output_elems(B, S)) bytes += 2.0 * double(e);
    const double t_sol = kindex::runner::sol_t_sol_seconds(macs, bytes) * 1e3;
    auto sol_score = [&](double t_k_ms) { return kindex::runner::sol_score(t_k_ms, t_sol, w.t_b_ms); };
    if (!variants.empty()) {
      nlohmann::json per = nlohmann::json::array();
      for (size_t vi = 0; vi < variants.size(); ++vi) {
        const Timing all = time_parts(kb::Parts::all, variants[vi].options);
        const Timing attention = time_parts(kb::Parts::attention, variants[vi].options);
        const double score = sol_score(all.median_ms);
        std::printf("%-9s %-22s T_k %8.4f ms  attn %8.4f ms  S %6.3f  x T_b %5.2f\n", tag.c_str(),
                    variants[vi].name.c_str(), all.median_ms, attention.median_ms, score, w.t_b_ms / all.median_ms);
        sweep_score[vi] += score;
        sweep_log[vi] += std::log(all.median_ms);
        sweep_fast[vi] += all.median_ms < w.t_b_ms;
        per.push_back({{"variant", variants[vi].name}, {"latency_ms_median", all.median_ms},
                       {"latency_ms_p05", all.p05_ms}, {"latency_ms_p95", all.p95_ms},
                       {"attention_only_ms", attention.median_ms}, {"sol_score", score}});
      }
      std::fflush(stdout);
      results.push_back({{"batch_size", B}, {"seq_len", S}, {"t_sol_ms", t_sol}, {"t_b_ms", w.t_b_ms},
                         {"variants", per}});
      ++count;
      for (auto& set : sets)
        for (void* p : set.ptrs) cudaFree(p);
      for (void* p : outs) cudaFree(p);
      cudaFree(ws);
      continue;
    }
    const Timing all = time_parts(kb::Parts::all, primary);
    const Timing gemms = time_parts(kb::Parts::gemms, primary);
    const Timing attention = time_parts(kb::Parts::attention, primary);
    kb::RunOptions other_options = primary;
    const auto other = schedule == kb::AttentionSchedule::store_dp ? kb::AttentionSchedule::recompute_dp
                                                                   : kb::AttentionSchedule::store_dp;
    other_options.schedule = other;
    const Timing all_other = time_parts(kb::Parts::all, other_options);
    const Timing attention_other = time_parts(kb::Parts::attention, other_options);

    const double t_k = all.median_ms;
    const double score = sol_score(t_k);
    const double tflops = 2 * macs / (t_k * 1e-3) / 1e12;
    const double score_other = sol_score(all_other.median_ms);
    log_sum_latency += std::log(t_k);
    score_sum += score;
    score_other_sum += score_other;
    score_best_sum += std::max(score, score_other);
    faster += t_k < w.t_b_ms;
    ++count;
    std::printf("%-9s %9.4f %9.4f %9.4f %9.4f %8.3f %7.1f %7.2f %6.3f | %s %9.4f %9.4f %6.3f\n", tag.c_str(), t_k,
                gemms.median_ms, attention.median_ms, t_sol, w.t_b_ms, tflops, w.t_b_ms / t_k, score,
                schedule_name(other), all_other.median_ms, attention_other.median_ms, score_other);
    results.push_back({{"batch_size", B}, {"seq_len", S}, {"macs", macs}, {"compulsory_bytes", bytes},
                       {"latency_ms", {{"median", t_k}, {"min", all.min_ms}, {"p05", all.p05_ms}, {"p95", all.p95_ms}}},
                       {"column_splits", std::max(1, std::min(primary.max_column_splits, kb::column_splits(B, S)))},
                       {"gemms_only_ms", gemms.median_ms}, {"attention_only_ms", attention.median_ms},
                       {"gemm_share", gemms.median_ms / (gemms.median_ms + attention.median_ms)},
                       {"achieved_tflops", tflops}, {"t_sol_ms", t_sol}, {"t_b_ms", w.t_b_ms},
                       {"speedup_vs_t_b", w.t_b_ms / t_k}, {"sol_score", score},
                       {"other_schedule", {{"name", schedule_name(other)}, {"latency_ms_median", all_other.median_ms},
                                           {"attention_only_ms", attention_other.median_ms},
                                           {"sol_score", score_other}}},
                       {"b200_published", {{"sol_ms", w.b200_sol_ms}, {"baseline_ms", w.b200_base_ms}}}});
    for (auto& set : sets)
      for (void* p : set.ptrs) cudaFree(p);
    for (void* p : outs) cudaFree(p);
    cudaFree(ws);
  }
  if (attention_only) return 0;
  if (count == 0) {
    std::fprintf(stderr, "no workload selected\n");
    return 2;
  }
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  std::string cmd;
  for (int i = 0; i < argc; ++i) cmd += (i ? " " : "") + std::string(argv[i]);
  if (!variants.empty()) {
    nlohmann::json summary = nlohmann::json::array();
    for (size_t vi = 0; vi < variants.size(); ++vi) {
      std::printf("variant %-22s mean S %.4f  fast_1 %d/%d  geomean %.4f ms\n", variants[vi].name.c_str(),
                  sweep_score[vi] / count, sweep_fast[vi], count, std::exp(sweep_log[vi] / count));
      summary.push_back({{"variant", variants[vi].name}, {"mean_sol_score", sweep_score[vi] / count},
                         {"fast_1", sweep_fast[vi]}, {"count", count},
                         {"geomean_latency_ms", std::exp(sweep_log[vi] / count)}});
    }
    const nlohmann::json doc = {{"problem", "sol-execbench L2/003 backward: variant sweep"}, {"command", cmd},
                                {"date", date}, {"device", prop.name}, {"warmup", warmup}, {"iterations", iters},
                                {"workloads", results}, {"summary", summary}};
    std::ofstream(out_path) << doc.dump(1) << "\n";
    std::printf("wrote %s\n", out_path.c_str());
    return 0;
  }
  const double geomean = std::exp(log_sum_latency / count);
  std::printf("geomean latency %.4f ms, mean SOL score %.3f, fast_1 %d/%d (other schedule: mean %.3f; best of the two "
              "per workload: mean %.3f)\n",
              geomean, score_sum / count, faster, count, score_other_sum / count, score_best_sum / count);
  const nlohmann::json doc = {
      {"problem", "sol-execbench L2/003_grouped_query_attention_with_rope_backward"},
      {"implementation", "kindex layer_backward v5 (tuned cuBLASLt GEMMs + attention kernels on attention_kernels' "
                         "instructions, schedule attention_schedule, dK/dV sums split over CTAs on small grids)"},
      {"attention_schedule", schedule_name(schedule)},
      {"attention_tiling",
       std::to_string(primary.tiling.row_warps) + "," + std::to_string(primary.tiling.col_warps)},
      {"stream_plan", plan_name(primary.streams)},
      {"attention_kernels", primary.kernels == kb::AttentionKernels::wgmma ? "wgmma" : "mma_sync"},
      {"column_splits", "column_splits(B, S) (attention.hpp), capped at " + std::to_string(primary.max_column_splits)},
      {"command", cmd},
      {"date", date},
      {"device", {{"name", prop.name}, {"sm_count", prop.multiProcessorCount}, {"l2_bytes", prop.l2CacheSize},
                  {"cc", std::to_string(prop.major) + "." + std::to_string(prop.minor)},
                  {"driver", driver}, {"runtime", runtime}}},
      {"protocol", {{"timer", "cuda_events (start/stop around the call on the caller stream)"},
                    {"cold_l2", "cudaMemsetAsync of 2 x L2 bytes before every iteration"},
                    {"inputs", "two copies at different addresses, alternated per iteration"},
                    {"warmup", warmup}, {"iterations", iters}, {"statistic", "median"}}},
      {"floors", {{"peak_flops", kindex::runner::kSolPeakFlopsPerS}, {"peak_bytes_per_s", kindex::runner::kSolPeakBytesPerS}}},
      {"t_b_source", "protocols.md section 4: H200 torch.compile, cold L2, median of 50 (not re-measured here)"},
      {"b200_context", "published-b200.json: NVIDIA SOL-ExecBench leaderboard per-workload SOL bound and baseline"},
      {"workloads", results},
      {"summary", {{"geomean_latency_ms", geomean}, {"mean_sol_score", score_sum / count}, {"fast_1", faster},
                   {"count", count}, {"mean_sol_score_other_schedule", score_other_sum / count},
                   {"mean_sol_score_best_schedule_per_workload", score_best_sum / count}}}};
  std::ofstream(out_path) << doc.dump(1) << "\n";
  std::printf("wrote %s\n", out_path.c_str());
  return 0;
}
