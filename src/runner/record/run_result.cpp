#include "runner/record/run_result.hpp"

#include <algorithm>

#include "runner/record/json_fields.hpp"
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

namespace {

// Each record's plain members under their own names (json_fields.hpp); what is not plain is coded by hand below.
constexpr auto kImplementationInfoFields = std::tuple_cat(
    KINDEX_JSON_FIELDS(ImplementationInfo, name, language, version, path, symbol, description, on_device),
    KINDEX_JSON_OPTIONAL_FIELDS(ImplementationInfo, interface, not_installed, compile_cache_empty));
constexpr auto kRunResultFields = std::tuple_cat(
    KINDEX_JSON_FIELDS(RunResult, definition, source, workload_uuid, axes, implementation, reference_implementation,
                       timing_reference, message, seed, observed_at, wall_s),
    KINDEX_JSON_OPTIONAL_FIELDS(RunResult, labels));
constexpr auto kWorkCountFields =
    KINDEX_JSON_FIELDS(WorkCount, declared_input_bytes, compulsory_bytes, referenced_bytes, flops);
// All but compared_on, which the record carries beside "phases_s".
constexpr auto kPhaseFields = KINDEX_JSON_FIELDS(PhaseTimes, setup, inputs, reference, implementation, compare, timing,
                                                 reference_timing, record);
constexpr auto kSetUpFields = KINDEX_JSON_FIELDS(SetUpRecord, status, wall_s, workloads, planned, compile_cache_hits,
                                                 compile_cache_misses, warm_up_processes, message);

}  // namespace

json ImplementationInfo::to_json() const { return fields_to_json(*this, kImplementationInfoFields); }
ImplementationInfo ImplementationInfo::from_json(const json& j) {
  return fields_from_json<ImplementationInfo>(j, kImplementationInfoFields);
}

json protocol_json(const TimingProtocol& p) {
  return {{"untimed", p.untimed}, {"warmup", p.warmup}, {"iterations", p.iterations}, {"cold_l2", p.cold_l2}};
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
  json j = {{"status", std::string(status_name(status))},
            {"correctness",
             {{"comparator", comparator},
              {"check", check},
              {"rounds_requested", rounds_requested},
              {"rounds_run", rounds_run},
              {"max_absolute_error", json_number(max_abs_error)},
              {"max_relative_error", json_number(max_rel_error)},
              {"matched_ratio", json_number(matched_ratio)},
              {"reports", reports}}},
            {"protocol", protocol_json(protocol)},
            {"timing", timing.to_json(true)},
            {"reference_timing", reference_timing.to_json(true)}};
  write_fields(j, *this, kRunResultFields);
  j["protocol"]["on_device"] = timed_on_device;
  write_fields(j["work"], work, kWorkCountFields);
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
  write_fields(j["phases_s"], phases, kPhaseFields);
  if (!phases.compared_on.empty()) j["compared_on"] = phases.compared_on;
  return j;
}

RunResult RunResult::from_json(const json& j) {
  RunResult r;
  read_fields(j, r, kRunResultFields);
  const std::string status = j.value("status", "runtime_error");
  for (RunStatus s : {RunStatus::passed, RunStatus::incorrect_numerical, RunStatus::runtime_error, RunStatus::timeout,
                      RunStatus::resource_exceeded})
    if (status_name(s) == status) r.status = s;
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
  read_fields(j.at("work"), r.work, kWorkCountFields);
  if (j.contains("plan_host_s") && j["plan_host_s"].is_number()) r.plan_host_s = j["plan_host_s"].get<double>();
  if (const auto p = j.find("phases_s"); p != j.end() && p->is_object()) read_fields(*p, r.phases, kPhaseFields);
  r.phases.compared_on = j.value("compared_on", "");
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

json SetUpRecord::to_json() const { return fields_to_json(*this, kSetUpFields); }
SetUpRecord SetUpRecord::from_json(const json& j) { return fields_from_json<SetUpRecord>(j, kSetUpFields); }

bool BenchReport::any_correctness_failure() const {
  return std::any_of(results.begin(), results.end(), [](const RunResult& r) { return r.status != RunStatus::passed; });
}

}  // namespace kindex::runner
