#include "store/ranking.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <set>

namespace kindex::store {

std::string to_string(EvidenceLevel level) {
  switch (level) {
    case EvidenceLevel::reported: return "reported";
    case EvidenceLevel::reproducible: return "reproducible";
    case EvidenceLevel::verified: return "verified";
    case EvidenceLevel::replicated: return "replicated";
  }
  return "reported";
}

EvidenceLevel evidence_level(const RunEvidence& e) {
  if (e.independent_replications >= 2) return EvidenceLevel::replicated;
  if (e.reproduced_by_kernelindex) return EvidenceLevel::verified;
  if (e.source_available && e.has_raw_evidence) return EvidenceLevel::reproducible;
  return EvidenceLevel::reported;
}

namespace {

bool tied_pair(const Ranked& a, const Ranked& b, bool source_native) {
  if (a.value == b.value) return true;
  // Source-native values carry the source's own ordering, without KernelIndex's uncertainty semantics.
  if (source_native || !a.low || !a.high || !b.low || !b.high) return false;
  return *a.high >= *b.low && *b.high >= *a.low;
}

}  // namespace

bool cohort_is_source_native(const std::vector<Ranked>& runs) {
  return std::any_of(runs.begin(), runs.end(), [](const Ranked& r) { return r.source_native; });
}

void rank_v1(std::vector<Ranked>& runs, bool source_native) {
  // Ascending value; equal values in id order so the grouping does not depend on the order rows arrived in.
  std::sort(runs.begin(), runs.end(), [](const Ranked& a, const Ranked& b) {
    return a.value != b.value ? a.value < b.value : a.id < b.id;
  });
  std::vector<Ranked> out;
  out.reserve(runs.size());
  int rank = 0;
  for (std::size_t start = 0; start < runs.size();) {
    std::size_t end = start + 1;
    while (end < runs.size() &&
           std::all_of(runs.begin() + static_cast<std::ptrdiff_t>(start), runs.begin() + static_cast<std::ptrdiff_t>(end),
                       [&](const Ranked& member) { return tied_pair(member, runs[end], source_native); }))
      ++end;
    ++rank;
    std::sort(runs.begin() + static_cast<std::ptrdiff_t>(start), runs.begin() + static_cast<std::ptrdiff_t>(end),
              [](const Ranked& a, const Ranked& b) {
                if (a.evidence != b.evidence) return a.evidence > b.evidence;
                if (a.observed_at != b.observed_at) return a.observed_at > b.observed_at;
                return a.id < b.id;
              });
    for (std::size_t i = start; i < end; ++i) {
      runs[i].rank = rank;
      runs[i].tied_with_previous = end - start > 1 && i > start;
    }
    start = end;
  }
}

std::optional<Datasheet> datasheet_for(const std::string& hardware_model) {
  std::string m;
  for (char c : hardware_model) m += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (m.find("h200") != std::string::npos) return Datasheet{"NVIDIA H200", 4800e9, 989e12};
  if (m.find("b200") != std::string::npos) return Datasheet{"NVIDIA B200", 8000e9, 2250e12};
  if (m.find("h100") != std::string::npos && m.find("pcie") == std::string::npos && m.find("nvl") == std::string::npos) {
    return Datasheet{"NVIDIA H100 SXM", 3350e9, 989e12};
  }
  return std::nullopt;
}

namespace {

double dtype_bytes(const std::string& dtype) {
  if (dtype == "bf16" || dtype == "fp16" || dtype == "int16") return 2;
  if (dtype == "fp32" || dtype == "int32" || dtype == "uint32") return 4;
  if (dtype == "fp64" || dtype == "int64" || dtype == "uint64") return 8;
  return 1;  // int8, uint8, bool, fp8 variants
}

int64_t axis(const nlohmann::json& axes, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    auto it = axes.find(n);
    if (it != axes.end() && it->is_number_integer()) return it->get<int64_t>();
  }
  return 0;
}

}  // namespace

std::optional<Floor> headroom_v1(const nlohmann::json& operation, const nlohmann::json& workload,
                                 const std::string& hardware_model) {
  auto sheet = datasheet_for(hardware_model);
  if (!sheet || workload.value("kind", "") != "WorkloadCase") return std::nullopt;
  const auto& wspec = workload.at("spec");
  std::set<std::string> inputs;
  if (auto it = operation.find("spec"); it != operation.end() && it->contains("inputs")) {
    for (const auto& in : it->at("inputs")) inputs.insert(in.value("name", ""));
  }
  Floor f;
  f.gpu = sheet->product;
  f.dram_gbps = sheet->dram_bytes_per_s / 1e9;
  f.tflops = sheet->dense_flops_per_s / 1e12;
  if (auto t = wspec.find("tensors"); t != wspec.end()) {
    for (const auto& [name, tensor] : t->items()) {
      if (!inputs.empty() && !inputs.count(name)) continue;
      double n = 1;
      for (const auto& d : tensor.at("shape")) n *= d.get<double>();
      f.bytes += n * dtype_bytes(tensor.value("dtype", ""));
    }
  }
  // Arithmetic floors only where headroom-v1 has a formula: GEMM and (non-paged) attention.
  std::string family = operation.contains("spec") ? operation["spec"].value("family", "") : "";
  const nlohmann::json axes = wspec.value("axes", nlohmann::json::object());
  if (family == "gemm" || family == "matmul") {
    f.flops = 2.0 * axis(axes, {"M", "m"}) * axis(axes, {"N", "n"}) * axis(axes, {"K", "k"});
  } else if (family.find("attention") != std::string::npos && family.find("paged") == std::string::npos) {
    int64_t lq = axis(axes, {"seq_len_q", "q_len", "seq_len"}), lk = axis(axes, {"seq_len_kv", "kv_len", "seq_len"});
    f.flops = 4.0 * axis(axes, {"batch_size"}) * axis(axes, {"num_qo_heads", "num_attention_heads", "num_heads"}) *
              lq * lk * axis(axes, {"head_dim"});
  }
  f.memory_ns = f.bytes / sheet->dram_bytes_per_s * 1e9;
  f.compute_ns = f.flops / sheet->dense_flops_per_s * 1e9;
  f.floor_ns = std::max(f.memory_ns, f.compute_ns);
  f.bound = f.compute_ns > f.memory_ns ? "compute" : "bandwidth";
  if (f.floor_ns <= 0) return std::nullopt;
  return f;
}

double sol_score(double t_kernel, double t_baseline, double t_sol) {
  return 1.0 / (1.0 + (t_kernel - t_sol) / (t_baseline - t_sol));
}

SuiteScore suite_score(const std::vector<std::array<double, 3>>& per_workload) {
  SuiteScore s;
  s.total = static_cast<int>(per_workload.size());
  if (per_workload.empty()) return s;
  double log_sum = 0;
  for (const auto& [tk, tb, tsol] : per_workload) {
    s.mean_sol_score += sol_score(tk, tb, tsol);
    s.avg_speedup += tb / tk;
    s.fast_1 += tk < tb ? 1 : 0;
    log_sum += std::log(tk);
  }
  s.mean_sol_score /= s.total;
  s.avg_speedup /= s.total;
  s.geomean_latency = std::exp(log_sum / s.total);
  return s;
}

const Ranked* record_holder(const std::vector<Ranked>& runs) {
  const Ranked* best = nullptr;
  for (const auto& r : runs) {
    if (!best || r.value < best->value ||
        (r.value == best->value && (r.observed_at != best->observed_at ? r.observed_at < best->observed_at : r.id < best->id)))
      best = &r;
  }
  return best;
}

}  // namespace kindex::store
