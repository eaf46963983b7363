#include "runner/record/run_result.hpp"

#include <algorithm>

#include "runner/record/json_number.hpp"

namespace kindex::runner {

using nlohmann::json;

namespace {

// Each status in KernelIndex's spelling and in the harnesses' trace lines (resource_exceeded is a RUNTIME_ERROR
// there, its log says why).
struct StatusNames {
  RunStatus status;
  std::string_view name, trace_name;
};
constexpr StatusNames kStatusNames[] = {
    {RunStatus::passed, "passed", "PASSED"},
    {RunStatus::incorrect_numerical, "incorrect_numerical", "INCORRECT_NUMERICAL"},
    {RunStatus::runtime_error, "runtime_error", "RUNTIME_ERROR"},
    {RunStatus::timeout, "timeout", "TIMEOUT"},
    {RunStatus::resource_exceeded, "resource_exceeded", "RUNTIME_ERROR"},
};

const StatusNames& names_of(RunStatus s) {
  for (const auto& n : kStatusNames)
    if (n.status == s) return n;
  return kStatusNames[2];  // runtime_error
}

}  // namespace

std::string_view status_name(RunStatus s) { return names_of(s).name; }
std::string_view trace_status_name(RunStatus s) { return names_of(s).trace_name; }

json ImplementationInfo::to_json() const {
  json j = {{"name", name}, {"language", language},       {"version", version},    {"path", path},
            {"symbol", symbol}, {"description", description}, {"on_device", on_device}};
  if (!interface.empty()) j["interface"] = interface;
  if (!not_installed.empty()) j["not_installed"] = not_installed;
  if (compile_cache_empty) j["compile_cache_empty"] = true;
  return j;
}

ImplementationInfo ImplementationInfo::from_json(const json& j) {
  ImplementationInfo i;
  i.name = j.value("name", "");
  i.language = j.value("language", "");
  i.version = j.value("version", "");
  i.path = j.value("path", "");
  i.symbol = j.value("symbol", "");
  i.description = j.value("description", "");
  i.on_device = j.value("on_device", true);
  i.interface = j.value("interface", "");
  i.not_installed = j.value("not_installed", "");
  i.compile_cache_empty = j.value("compile_cache_empty", false);
  return i;
}

namespace {

json floor_json(const Floor& f) {
  return {{"method", f.method},       {"bytes", f.bytes},     {"flops", f.flops}, {"memory_s", f.memory_s},
          {"compute_s", f.compute_s}, {"floor_s", f.floor_s}, {"bound", f.bound}, {"basis", f.basis}};
}

json summary_json(const TrialSummary& t) {
  const Summary& s = t.pooled;
  return {{"latency_ns", t.latency},
          {"trial_medians_ns", t.trial_medians},
          {"count", s.count},
          {"median_ns", s.median},
          {"mean_ns", s.mean},
          {"minimum_ns", s.minimum},
          {"maximum_ns", s.maximum},
          {"p05_ns", s.p05},
          {"p95_ns", s.p95},
          {"mad_ns", s.mad},
          {"ci95_ns", {s.ci95_low, s.ci95_high}}};
}


template <class T>
void put_optional(json& j, const char* key, const std::optional<T>& v) {
  if (v) j[key] = json_number(*v);
}

}  // namespace

json TimingResult::to_json(bool with_samples) const {
  json j = {{"timer", timer}, {"note", note}};
  if (with_samples) j["trials_ns"] = trials_ns;
  if (summary) j["summary"] = summary_json(*summary);
  return j;
}

TimingResult TimingResult::from_json(const json& j) {
  TimingResult t;
  t.timer = j.value("timer", "");
  t.note = j.value("note", "");
  if (j.contains("trials_ns")) t.trials_ns = j["trials_ns"].get<std::vector<std::vector<double>>>();
  return t;
}

json RunResult::to_json() const {
  json j = {{"definition", definition},
            {"source", source},
            {"workload_uuid", workload_uuid},
            {"axes", axes},
            {"implementation", implementation},
            {"reference_implementation", reference_implementation},
            {"timing_reference", timing_reference},
            {"status", std::string(status_name(status))},
            {"message", message},
            {"correctness",
             {{"comparator", comparator},
              {"check", check},
              {"rounds_requested", rounds_requested},
              {"rounds_run", rounds_run},
              {"max_absolute_error", json_number(max_abs_error)},
              {"max_relative_error", json_number(max_rel_error)},
              {"matched_ratio", json_number(matched_ratio)},
              {"reports", reports}}},
            {"protocol",
             {{"untimed", protocol.untimed},
              {"warmup", protocol.warmup},
              {"iterations", protocol.iterations},
              {"cold_l2", protocol.cold_l2},
              {"on_device", timed_on_device}}},
            {"timing", timing.to_json(true)},
            {"reference_timing", reference_timing.to_json(true)},
            {"work",
             {{"declared_input_bytes", work.declared_input_bytes},
              {"compulsory_bytes", work.compulsory_bytes},
              {"referenced_bytes", work.referenced_bytes},
              {"flops", work.flops}}},
            {"seed", seed},
            {"observed_at", observed_at},
            {"wall_s", wall_s}};
  if (headroom) j["floors"]["headroom_v1"] = floor_json(*headroom);
  if (kindex_floor) j["floors"]["kindex"] = floor_json(*kindex_floor);
  put_optional(j, "speedup_factor", speedup);
  put_optional(j, "headroom_ratio", headroom_ratio);
  put_optional(j, "kindex_floor_ratio", kindex_ratio);
  put_optional(j, "sol_score", sol_score);
  put_optional(j, "t_sol_s", t_sol_s);
  put_optional(j, "t_baseline_s", t_baseline_s);
  if (!t_baseline_source.empty()) j["t_baseline_source"] = t_baseline_source;
  put_optional(j, "plan_host_s", plan_host_s);
  j["phases_s"] = {{"setup", phases.setup},
                   {"inputs", phases.inputs},
                   {"reference", phases.reference},
                   {"implementation", phases.implementation},
                   {"compare", phases.compare},
                   {"timing", phases.timing},
                   {"reference_timing", phases.reference_timing},
                   {"record", phases.record}};
  if (!phases.compared_on.empty()) j["compared_on"] = phases.compared_on;
  if (!labels.empty()) j["labels"] = labels;
  return j;
}

RunResult RunResult::from_json(const json& j) {
  RunResult r;
  r.definition = j.value("definition", "");
  r.source = j.value("source", "");
  r.workload_uuid = j.value("workload_uuid", "");
  r.axes = j.value("axes", std::map<std::string, int64_t>{});
  r.implementation = j.value("implementation", "");
  r.reference_implementation = j.value("reference_implementation", "");
  r.timing_reference = j.value("timing_reference", "");
  const std::string status = j.value("status", "runtime_error");
  for (RunStatus s : {RunStatus::passed, RunStatus::incorrect_numerical, RunStatus::runtime_error, RunStatus::timeout,
                      RunStatus::resource_exceeded})
    if (status_name(s) == status) r.status = s;
  r.message = j.value("message", "");
  const json& c = j.at("correctness");
  r.comparator = c.value("comparator", "");
  r.check = c.value("check", "");
  r.rounds_requested = c.value("rounds_requested", 0);
  r.rounds_run = c.value("rounds_run", 0);
  r.max_abs_error = number_from_json(c.at("max_absolute_error"));
  r.max_rel_error = number_from_json(c.at("max_relative_error"));
  r.matched_ratio = number_from_json(c.at("matched_ratio"), 1);
  r.reports = c.value("reports", json::array());
  const json& p = j.at("protocol");
  r.protocol = {p.value("untimed", 0), p.value("warmup", 0), p.value("iterations", 0), p.value("cold_l2", false)};
  r.timed_on_device = p.value("on_device", false);
  r.timing = TimingResult::from_json(j.at("timing"));
  r.reference_timing = TimingResult::from_json(j.at("reference_timing"));
  const json& w = j.at("work");
  r.work.declared_input_bytes = w.value("declared_input_bytes", 0.0);
  r.work.compulsory_bytes = w.value("compulsory_bytes", 0.0);
  r.work.referenced_bytes = w.value("referenced_bytes", 0.0);
  r.work.flops = w.value("flops", 0.0);
  r.seed = j.value("seed", uint64_t(0));
  r.observed_at = j.value("observed_at", "");
  r.wall_s = j.value("wall_s", 0.0);
  if (j.contains("plan_host_s") && j["plan_host_s"].is_number()) r.plan_host_s = j["plan_host_s"].get<double>();
  if (const auto p = j.find("phases_s"); p != j.end() && p->is_object()) {
    r.phases.setup = p->value("setup", 0.0);
    r.phases.inputs = p->value("inputs", 0.0);
    r.phases.reference = p->value("reference", 0.0);
    r.phases.implementation = p->value("implementation", 0.0);
    r.phases.compare = p->value("compare", 0.0);
    r.phases.timing = p->value("timing", 0.0);
    r.phases.reference_timing = p->value("reference_timing", 0.0);
    r.phases.record = p->value("record", 0.0);
  }
  r.phases.compared_on = j.value("compared_on", "");
  r.labels = j.value("labels", std::map<std::string, std::string>{});
  return r;
}

json BenchReport::to_json() const {
  json j = {{"environment", environment.to_json()}, {"start_s", start_s}, {"results", json::array()}};
  if (measured_rates)
    j["measured_rates"] = {{"copy_bytes_per_s", measured_rates->copy_bytes_per_s},
                           {"tensor_flops_per_s", measured_rates->tensor_flops_per_s},
                           {"provenance", measured_rates->provenance}};
  for (const auto& r : results) j["results"].push_back(r.to_json());
  for (const auto& g : gpus) j["gpus"].push_back(g.to_json());
  if (!not_available.empty()) j["not_available"] = not_available;
  for (const auto& [spec, s] : set_up) j["set_up"][spec] = s.to_json();
  return j;
}

json SetUpRecord::to_json() const {
  return {{"status", status},
          {"wall_s", wall_s},
          {"workloads", workloads},
          {"planned", planned},
          {"compile_cache_hits", compile_cache_hits},
          {"compile_cache_misses", compile_cache_misses},
          {"warm_up_processes", warm_up_processes},
          {"message", message}};
}

SetUpRecord SetUpRecord::from_json(const json& j) {
  SetUpRecord s;
  s.status = j.value("status", "");
  s.wall_s = j.value("wall_s", 0.0);
  s.workloads = j.value("workloads", 0);
  s.planned = j.value("planned", 0);
  s.compile_cache_hits = j.value("compile_cache_hits", 0);
  s.compile_cache_misses = j.value("compile_cache_misses", 0);
  s.warm_up_processes = j.value("warm_up_processes", 0);
  s.message = j.value("message", "");
  return s;
}

bool BenchReport::any_correctness_failure() const {
  return std::any_of(results.begin(), results.end(), [](const RunResult& r) { return r.status != RunStatus::passed; });
}

}  // namespace kindex::runner
