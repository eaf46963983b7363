#include "runner/record/floors.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.hpp"

namespace kindex::runner {

namespace {
bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

struct SolRow {
  int64_t b, s;
  double h200_tb_ms;   // protocols.md section 4, torch.compile
  double b200_sol_ms;  // published-b200.json
  double b200_tb_ms;
};
// Workload order of the upstream workload.jsonl.
constexpr std::array<SolRow, 16> kSolRows = {{
    {1, 691, 0.845, 0.089, 0.675327},
    {2, 449, 0.628, 0.1117, 0.547536},
    {2, 128, 0.422, 0.0306, 0.323616},
    {16, 256, 1.679, 0.4936, 1.27304},
    {1, 1024, 0.611, 0.1379, 0.470896},
    {1, 131, 0.379, 0.0212, 0.297808},
    {1, 2048, 1.358, 0.3134, 1.0624},
    {1, 293, 0.396, 0.0359, 0.364961},
    {16, 128, 0.876, 0.2423, 0.675264},
    {4, 1024, 2.155, 0.5505, 1.5683035},
    {8, 384, 1.369, 0.3774, 1.020096},
    {1, 128, 0.394, 0.0211, 0.29152},
    {1, 512, 0.396, 0.0644, 0.385312},
    {1, 256, 0.389, 0.0312, 0.3041765},
    {2, 1024, 1.110, 0.2755, 0.8454245},
    {4, 512, 0.967, 0.2565, 0.718352},
}};
const SolRow* sol_row(int64_t b, int64_t s) {
  for (const auto& r : kSolRows)
    if (r.b == b && r.s == s) return &r;
  return nullptr;
}
}  // namespace

std::optional<MeasuredRates> published_measured_rates(const std::string& name) {
  if (contains(name, "H200"))
    return MeasuredRates{4.28e12, 784e12,
                         "protocols.md section 4: H200 device-to-device copy 4.28 TB/s, 8192^3 bf16 GEMM 784 TFLOP/s "
                         "(2026-12-02, driver 580, CUDA 13.0)"};
  return std::nullopt;
}

WorkCount paged_decode_work(const kindex_paged_decode_params& p, double element_bytes) {
  std::vector<int32_t> used(size_t(std::max<int64_t>(p.num_pages, 0)), 0);  // tokens read of each page
  double tokens_read = 0;  // with repeats: the attention arithmetic counts every (sequence, token)
  for (int32_t b = 0; b < p.batch_size; ++b) {
    const int32_t begin = p.kv_indptr[b], end = p.kv_indptr[b + 1];
    for (int32_t i = begin; i < end; ++i) {
      const int32_t page = p.kv_indices[i];
      const int32_t len = i + 1 < end ? p.page_size : (p.kv_last_page_len ? p.kv_last_page_len[b] : p.page_size);
      if (page >= 0 && page < p.num_pages) used[size_t(page)] = std::max(used[size_t(page)], len);
      tokens_read += len;
    }
  }
  double distinct_tokens = 0;
  for (int32_t n : used) distinct_tokens += n;
  const double batch = p.batch_size, heads = double(p.num_qo_heads) * p.head_dim;
  // The version-2 variants: fp8 caches hold 1-byte elements; q_len_per_req query rows per request, each reading the
  // request's tokens (the causal limit and a window are not subtracted); the sinks, one fp32 per query head.
  const double kv_element_bytes = p.kv_format == KINDEX_KV_FORMAT_SAME_AS_Q ? element_bytes : 1.0;
  const double rows = batch * std::max(p.q_len_per_req, 1);
  const double kv_bytes = 2.0 * distinct_tokens * p.num_kv_heads * p.head_dim * kv_element_bytes;
  const double q_and_output = 2.0 * rows * heads * element_bytes;
  const double lse = rows * p.num_qo_heads * 4.0;
  const double sinks = p.sinks ? 4.0 * p.num_qo_heads : 0.0;
  const double indices = 4.0 * ((batch + 1) + double(p.num_kv_indices) + (p.kv_last_page_len ? batch : 0.0));
  WorkCount w;
  w.referenced_bytes = kv_bytes + q_and_output + lse + sinks + indices;
  w.flops = 4.0 * tokens_read * heads * std::max(p.q_len_per_req, 1);
  return w;
}

static Floor make_floor(std::string method, double bytes, double flops, double bytes_per_s, double flops_per_s,
                        std::string basis) {
  Floor f;
  f.method = std::move(method);
  f.bytes = bytes;
  f.flops = flops;
  f.memory_s = bytes_per_s > 0 ? bytes / bytes_per_s : 0;
  f.compute_s = flops > 0 && flops_per_s > 0 ? flops / flops_per_s : 0;
  f.floor_s = std::max(f.memory_s, f.compute_s);
  f.bound = f.compute_s > f.memory_s ? "compute" : "bandwidth";
  f.basis = std::move(basis);
  return f;
}

std::optional<Floor> headroom_v1_floor(const nlohmann::json& operation, const nlohmann::json& workload,
                                       const std::string& gpu) {
  const auto f = store::headroom_v1(operation, workload, gpu);
  if (!f) return std::nullopt;
  std::string basis = f->gpu + " datasheet: " + std::to_string(int64_t(f->dram_gbps)) + " GB/s, " +
                      std::to_string(int64_t(f->tflops)) + " TFLOP/s";
  if (f->flops <= 0) basis += "; no arithmetic formula for this family: bandwidth floor only";
  return make_floor("headroom-v1", f->bytes, f->flops, f->dram_gbps * 1e9, f->tflops * 1e12, basis);
}

Floor kindex_floor(const WorkCount& work, const MeasuredRates& rates) {
  return make_floor("kindex-referenced-v1", work.referenced_bytes, work.flops, rates.copy_bytes_per_s,
                    rates.tensor_flops_per_s, rates.provenance);
}


double l2_003_macs(int64_t b, int64_t s) {
  return 104857600.0 * double(b) * double(s) + 16384.0 * double(b) * double(s) * double(s);
}

double sol_t_sol_seconds(double macs, double compulsory_bytes) {
  return std::max(2.0 * macs / kSolPeakFlopsPerS, compulsory_bytes / kSolPeakBytesPerS);
}

double sol_score(double t_kernel, double t_sol, double t_baseline) {
  return 1.0 / (1.0 + (t_kernel - t_sol) / (t_baseline - t_sol));
}

std::optional<double> l2_003_baseline_seconds(const std::string& name, int64_t b, int64_t s) {
  const SolRow* r = sol_row(b, s);
  if (!r) return std::nullopt;
  if (contains(name, "H200")) return r->h200_tb_ms * 1e-3;
  if (contains(name, "B200")) return r->b200_tb_ms * 1e-3;
  return std::nullopt;
}

std::optional<double> BaselineTimes::find(int64_t batch_size, int64_t seq_len) const {
  auto it = seconds.find({batch_size, seq_len});
  if (it == seconds.end()) return std::nullopt;
  return it->second;
}

BaselineTimes load_baseline_times(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("--baseline", path, "", "cannot be read");
  nlohmann::json doc = nlohmann::json::parse(in, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) throw Error("--baseline", path, "", "is not a JSON object");
  BaselineTimes b;
  b.path = path;
  const auto& device = doc.value("device", nlohmann::json());
  if (!device.is_object() || !device.contains("name") || !device["name"].is_string())
    throw Error("--baseline", path + ": device.name", device.dump().substr(0, 80),
                "must name the GPU the baselines were measured on (benchmarks/gpu/backward_vs_torch.py writes it)");
  b.device = device["name"].get<std::string>();
  const auto& workloads = doc.value("workloads", nlohmann::json());
  if (!workloads.is_array() || workloads.empty())
    throw Error("--baseline", path + ": workloads", workloads.dump().substr(0, 80), "must be a non-empty array");
  for (size_t i = 0; i < workloads.size(); ++i) {
    const auto& w = workloads[i];
    const std::string at = path + ": workloads[" + std::to_string(i) + "]";
    auto number = [&](const char* key) {
      if (!w.is_object() || !w.contains(key) || !w[key].is_number())
        throw Error("--baseline", at + "." + key, w.is_object() && w.contains(key) ? w[key].dump() : "missing",
                    "must be a number");
      return w[key].get<double>();
    };
    const double bs = number("batch_size"), sl = number("seq_len"), tb = number("t_b_ms");
    if (bs < 1 || sl < 1 || bs != std::floor(bs) || sl != std::floor(sl))
      throw Error("--baseline", at, "batch_size " + w["batch_size"].dump() + ", seq_len " + w["seq_len"].dump(),
                  "must be positive integers");
    if (!(tb > 0) || !std::isfinite(tb)) throw Error("--baseline", at + ".t_b_ms", w["t_b_ms"].dump(), "must be > 0");
    b.seconds[{int64_t(bs), int64_t(sl)}] = tb * 1e-3;
  }
  return b;
}

std::optional<double> l2_003_published_b200_sol_seconds(int64_t b, int64_t s) {
  const SolRow* r = sol_row(b, s);
  if (!r) return std::nullopt;
  return r->b200_sol_ms * 1e-3;
}

}  // namespace kindex::runner
