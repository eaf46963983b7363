// The pipeline of one (implementation, workload) in the calling process (a worker, or the runner with
// --in-process): inputs, the reference and the implementation over the source's rounds, the comparator, timing.
#include "runner/execute/pipeline.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>

#include "runner/measurement.hpp"
#include "runner/execute/implementation.hpp"
#include "runner/execute/input_cache.hpp"
#include "runner/execute/libraries.hpp"
#include "runner/record/json_number.hpp"
#include "runner/execute/problem.hpp"
#include "catalog/inputs.hpp"
#include "compare/compare.hpp"
#include "evidence/manifest.hpp"

namespace kindex::runner {

namespace {

// Host tensors of a call's outputs, shaped from the definition.
std::map<std::string, Tensor> allocate_outputs(const catalog::Definition& def, const catalog::Workload& w) {
  auto axes = catalog::resolve_axes(def, w);
  std::map<std::string, Tensor> out;
  for (const auto& spec : def.outputs) out.emplace(spec.name, Tensor(spec.dtype, catalog::concrete_shape(spec, axes)));
  return out;
}

// Device memory a run keeps across its rounds, by role and name: each round overwrites the buffers of the last one
// (same sizes: the rounds of a workload differ only in their values) rather than paying a cudaMalloc and a cudaFree,
// which waits for the whole device, per tensor and round.
class RunBuffers {
 public:
  // A device tensor shaped like `like` (dtype and shape; contiguous), in the buffer kept under `key`.
  TensorView tensor(const std::string& key, const TensorView& like) {
    TensorView v = like;
    v.strides = contiguous_strides(like.shape);
    v.data = bytes(key, like.nbytes());
    v.where = Where::device;
    return v;
  }
  void* bytes(const std::string& key, size_t size) {
    auto it = buffers_.find(key);
    if (it == buffers_.end() || it->second.bytes() != size)
      it = buffers_.insert_or_assign(key, device::Buffer(size)).first;
    return it->second.get();
  }

 private:
  std::map<std::string, device::Buffer> buffers_;
};

// The inputs of one round on the device, shared by the implementations that run there: the host tensors copied,
// the random float tensors `random` describes drawn there directly (device_generator()).
struct DeviceInputs {
  TensorMap views;
  DeviceInputs(const catalog::Inputs& host, uint64_t seed, RunBuffers& buffers, void* stream) {
    for (const auto& [name, t] : host.tensors) {
      views[name] = buffers.tensor("input/" + name, t.view());
      device::copy_to_device(t.view(), views[name], stream);
    }
    for (const auto& [name, fill] : host.random) {
      views[name] = buffers.tensor("input/" + name, shape_only(fill));
      draw_on_device(fill, seed, views[name].data, stream);
    }
    device::synchronize(stream);
  }
  // A host view with the tensor's dtype and shape and no data (the tensor exists only on the device).
  static TensorView shape_only(const catalog::RandomFill& fill) {
    TensorView v;
    v.dtype = fill.dtype;
    v.shape = fill.shape;
    v.strides = contiguous_strides(fill.shape);
    return v;
  }
  static void draw_on_device(const catalog::RandomFill& f, uint64_t seed, void* out, void* stream) {
    const DeviceGenerator* gen = device_generator();
    if (!gen) throw RunFailure(RunStatus::runtime_error, "no device generator (libkindex_gpu_reference.so)");
    const kindex_random_fill abi = random_fill_abi(f, seed);
    if (kindex_status s = gen->fill_random(&abi, out, stream); s != KINDEX_STATUS_OK) {
      device::device_synchronize();  // a sticky error surfaces as such
      throw RunFailure(RunStatus::runtime_error, std::string("kindex_gpu_reference_fill_random: ") + gen->last_error());
    }
  }
};

// An implementation's view of one call: device copies when it runs on the device, its own outputs (poisoned, so
// an output it never writes cannot pass) and its workspace.
class PreparedCall {
 public:
  // `device_inputs`: the round's inputs already on the device, shared by every device implementation (read only).
  // A device implementation's outputs and workspace live in `buffers` under `role` (one role per call of a round).
  PreparedCall(Implementation& impl, ProblemKind kind, const CallArgs& host, const TensorMap& device_inputs,
               const catalog::Definition& def, const catalog::Workload& w, RunBuffers& buffers,
               const std::string& role, void* stream)
      : impl_(impl), kind_(kind), stream_(stream) {
    args_.scalars = host.scalars;
    args_.kv_layout = host.kv_layout;
    if (impl.memory() == Where::host) {
      args_.inputs = host.inputs;
      host_outputs_ = allocate_outputs(def, w);
      for (auto& [name, t] : host_outputs_) {
        std::memset(t.data(), 0xFF, t.nbytes());
        args_.outputs[name] = t.view();
      }
    } else {
      args_.inputs = device_inputs;
      for (const auto& [name, shape] : host.outputs) {
        args_.outputs[name] = buffers.tensor(role + "/" + name, shape);
        device::poison(args_.outputs[name], stream);
      }
      device::synchronize(stream);
    }
    workspace_bytes_ = impl.workspace_bytes(kind, args_);
    if (impl.memory() == Where::device)
      workspace_ = buffers.bytes(role + "/workspace", workspace_bytes_);
    else if (workspace_bytes_)
      host_workspace_.resize(workspace_bytes_);
  }

  const CallArgs& args() const { return args_; }
  void* workspace() { return impl_.memory() == Where::device ? workspace_ : host_workspace_.data(); }
  size_t workspace_bytes() const { return workspace_bytes_; }

  void run(const CallArgs& args) { impl_.run(kind_, args, workspace(), workspace_bytes_, stream_); }
  void run_and_wait() {
    run(args_);
    if (impl_.memory() == Where::device) device::synchronize(stream_);
  }
  // Output `name` where the implementation wrote it.
  const TensorView& output(const std::string& name) const { return args_.outputs.at(name); }
  // Output `name` on the host (copied back from the device on first use).
  const Tensor& host_output(const std::string& name) {
    auto it = host_outputs_.find(name);
    if (it != host_outputs_.end()) return it->second;
    const TensorView& d = output(name);
    Tensor t(d.dtype, d.shape);
    device::copy_to_host(d, t.view(), stream_);
    return host_outputs_.emplace(name, std::move(t)).first->second;
  }

 private:
  Implementation& impl_;
  ProblemKind kind_;
  void* stream_;
  CallArgs args_;
  std::map<std::string, Tensor> host_outputs_;
  void* workspace_ = nullptr;  // in the run's buffers
  std::vector<unsigned char> host_workspace_;
  size_t workspace_bytes_ = 0;
};

// SOL-ExecBench copies the inputs to fresh addresses before every timed call (untimed): each call gets a slot
// 256 bytes further into a pool per input, so no two calls see the same pointers.
class FreshAddresses {
 public:
  FreshAddresses(const CallArgs& base, int calls, void* stream) : base_(base), stream_(stream) {
    for (const auto& [name, view] : base.inputs)
      pools_.emplace(name, device::Buffer(view.nbytes() + 256 * size_t(calls)));
  }
  const CallArgs& next() {
    current_ = base_;
    for (auto& [name, view] : current_.inputs) {
      view.data = static_cast<char*>(pools_.at(name).get()) + 256 * size_t(call_);
      device::copy_device_to_device(base_.inputs.at(name), view, stream_);
    }
    ++call_;
    return current_;
  }

 private:
  const CallArgs& base_;
  void* stream_;
  std::map<std::string, device::Buffer> pools_;
  CallArgs current_;
  int call_ = 0;
};

TimingSamples time_call(PreparedCall& call, Where where, bool fresh_addresses, const TimingProtocol& protocol,
                        bool prefer_cupti, void* stream) {
  if (where == Where::host)
    return time_host(
        protocol, [] {}, [&] { call.run(call.args()); });
  if (!fresh_addresses)
    return time_device(
        protocol, [] {}, [&] { call.run(call.args()); }, stream, prefer_cupti);
  FreshAddresses fresh(call.args(), protocol.untimed + protocol.warmup + protocol.iterations, stream);
  const CallArgs* current = &call.args();
  return time_device(
      protocol, [&] { current = &fresh.next(); }, [&] { call.run(*current); }, stream, prefer_cupti);
}

// `gpu_computes`: the GPU reference computes the definition (gpu_reference_computes); a decode variant's truth is
// the CPU reference's.
std::string choose_reference(const std::string& requested, const std::string& impl, bool gpu, bool gpu_computes) {
  if (requested != "auto") return requested;
  if (impl == "gpu-reference") return "cpu-reference";  // the GPU reference is checked against the CPU one
  return gpu && gpu_computes ? "gpu-reference" : "cpu-reference";
}

struct StreamGuard {
  void* stream = nullptr;
  explicit StreamGuard(bool device) {
    if (device) stream = device::create_stream();
  }
  ~StreamGuard() { device::destroy_stream(stream); }
};

nlohmann::json report_json(int round, const compare::Report& r) {
  return {{"round", round},
          {"output", r.output},
          {"passed", r.passed},
          {"max_absolute_error", json_number(r.max_abs_error)},
          {"max_relative_error", json_number(r.max_rel_error)},
          {"matched_ratio", json_number(r.matched_ratio)},
          {"mismatches", r.mismatches},
          {"nonfinite", r.nonfinite},
          {"reason", r.reason}};
}

void add_note(std::string& log, const std::string& note) { log += (log.empty() ? "" : "; ") + note; }

// This process's cache of generated inputs (a worker's, or the runner's own with --in-process).
InputCache& worker_input_cache() {
  static InputCache cache(default_input_cache_budget());
  return cache;
}

// Seconds since the last lap (or since construction): the pipeline's phases, one after the other.
class PhaseClock {
 public:
  double lap() {
    const auto now = std::chrono::steady_clock::now();
    const double s = std::chrono::duration<double>(now - last_).count();
    last_ = now;
    return s;
  }

 private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

struct Tolerances {
  bool fib;
  compare::FibTolerance fib_tol;
  compare::SolTolerance sol_tol;
};

// One output of one round on the device, by libkindex_gpu_reference.so's comparator (the host comparator's
// per-element code and verdict, compare/element_rule.hpp): nothing is copied back to the host.
compare::Report compare_on_device(const std::string& output, const TensorView& actual, const TensorView& expected,
                                  const Tolerances& t, const DeviceComparator& comparator, void* stream) {
  compare::check_views(output, actual, expected, Where::device);
  const double atol = t.fib ? t.fib_tol.atol : t.sol_tol.atol, rtol = t.fib ? t.fib_tol.rtol : t.sol_tol.rtol;
  kindex_compare_tally tally{};
  if (kindex_status s = comparator.compare(t.fib ? KINDEX_COMPARE_FLASHINFER_BENCH : KINDEX_COMPARE_SOL_EXECBENCH,
                                           abi_dtype(actual.dtype, output), actual.data, expected.data,
                                           actual.numel(), float(atol), float(rtol), &tally, stream);
      s != KINDEX_STATUS_OK) {
    device::device_synchronize();  // a sticky error surfaces as such
    throw RunFailure(RunStatus::runtime_error, std::string("kindex_gpu_reference_compare: ") + comparator.last_error());
  }
  return t.fib ? compare::fib_report(output, actual.numel(), tally, t.fib_tol)
               : compare::sol_report(output, actual.numel(), tally, t.sol_tol);
}

// The device comparator can judge this output: both sides on the device in a dtype it reads.
bool device_comparable(DType dtype) { return dtype == DType::bf16 || dtype == DType::f16 || dtype == DType::f32; }

}  // namespace

nlohmann::json SharedReferenceTiming::to_json() const {
  return {{"reference", reference}, {"implementation", implementation}, {"timing", timing.to_json(true)}};
}

SharedReferenceTiming SharedReferenceTiming::from_json(const nlohmann::json& j) {
  return {j.at("reference"), j.at("implementation"), TimingResult::from_json(j.at("timing"))};
}

RunResult new_run_result(const WorkItem& item, const std::string& impl_spec) {
  const catalog::Definition& def = *item.definition;
  RunResult r;
  r.definition = def.name;
  r.source = std::string(catalog::source_name(def.source));
  r.workload_uuid = item.workload->uuid;
  r.axes = item.workload->axes;
  r.implementation = impl_spec;
  r.comparator = def.source == catalog::Source::flashinfer_bench ? "flashinfer_bench_eval" : "sol_execbench_eval";
  r.observed_at = evidence::utc_timestamp_now();
  return r;
}

namespace {

// The implementations one run calls and how it is measured: chosen once, before its rounds.
struct RunPlan {
  ProblemKind kind{};
  kindex_kv_layout kv_layout = KINDEX_KV_LAYOUT_NHD;  // decode: the definition's cache layout (CallArgs)
  std::unique_ptr<Implementation> impl, ref_owned, timing_ref_owned;
  Implementation* ref = nullptr;         // the correctness reference (impl itself: a determinism check)
  Implementation* timing_ref = nullptr;  // the speedup's denominator (none: no speedup)
  RoundRunner* remote_impl = nullptr;    // an out-of-process implementation (a solution or a peer)
  int timing_trials = 0;
  bool any_device = false;
  bool draw_on_device = false;  // the random inputs drawn on the device
  Tolerances tol{};
  const DeviceComparator* comparator = nullptr;  // the outputs compared on the device
};

// Chooses the references, the rounds and the protocol of `r`'s run, noting on `r` what its reader must know.
// Throws RunFailure when the implementation cannot run the definition.
RunPlan plan_run(RunResult& r, const WorkItem& item, const std::string& impl_spec, const BenchOptions& o, bool gpu) {
  const auto& def = *item.definition;
  const bool fib = def.source == catalog::Source::flashinfer_bench;
  RunPlan p;
  const auto kind = problem_kind(def);
  if (!kind) throw RunFailure(RunStatus::runtime_error, "definition " + def.name + " is not a problem kindex can run");
  p.kind = *kind;
  p.kv_layout = decode_kv_layout(def);
  p.impl = make_implementation(impl_spec);
  Implementation* const impl = p.impl.get();
  if (auto why = impl->unsupported_reason(def); !why.empty()) throw RunFailure(RunStatus::runtime_error, why);
  p.remote_impl = impl->round_runner();
  const bool gpu_computes = gpu_reference_computes(def);
  r.reference_implementation = choose_reference(o.reference, impl_spec, gpu, gpu_computes);
  p.ref = impl;
  if (r.reference_implementation != impl_spec)
    p.ref = (p.ref_owned = make_implementation(r.reference_implementation)).get();
  r.check = p.ref == impl ? "determinism" : "reference";
  if (r.check == "determinism")
    add_note(r.message,
             "the implementation is its own reference here: each round compares two independent calls "
             "on fresh inputs (a determinism check)");
  // The speedup's denominator: the GPU reference for device implementations, the CPU reference on the host. A
  // decode variant on the device has none (the GPU reference computes the plain decode only, and the CPU one timed
  // under the device protocol would be no yardstick): its run records latency without a speedup.
  r.timing_reference = impl->memory() == Where::device ? (gpu_computes ? "gpu-reference" : "") : "cpu-reference";
  if (r.timing_reference.empty())
    add_note(r.message, "no timing reference (no speedup): the GPU reference computes the plain decode only");
  else if (r.timing_reference == impl_spec)
    p.timing_ref = impl;
  else if (r.timing_reference == r.reference_implementation)
    p.timing_ref = p.ref;
  else
    p.timing_ref = (p.timing_ref_owned = make_implementation(r.timing_reference)).get();

  const int default_rounds = catalog::correctness_rounds(def.source);
  r.rounds_requested = o.trials.value_or(default_rounds);
  if (r.rounds_requested < default_rounds)
    add_note(r.message, "correctness rounds reduced to " + std::to_string(r.rounds_requested) + " (the source uses " +
                            std::to_string(default_rounds) + ")");
  p.timing_trials = std::min(r.rounds_requested, o.timing_trials.value_or(fib ? 3 : 1));
  r.timed_on_device = impl->memory() == Where::device;
  r.protocol = r.timed_on_device ? TimingProtocol{6, o.warmup.value_or(10), o.iterations.value_or(50), true}
                                 : TimingProtocol{1, o.warmup.value_or(1), o.iterations.value_or(5), false};
  r.seed = o.seed.value_or(catalog::default_seed(def));
  p.any_device = impl->memory() == Where::device || p.ref->memory() == Where::device ||
                 (p.timing_ref && p.timing_ref->memory() == Where::device);
  if (p.any_device) device::sleep_while_waiting();
  // With no host implementation in the run, the random inputs are drawn on the device (the same bits as the host
  // generator's): only the page tables and other small inputs are made on the host and copied.
  p.draw_on_device = gpu && impl->memory() == Where::device && p.ref->memory() == Where::device &&
                     (!p.timing_ref || p.timing_ref->memory() == Where::device) && device_generator() != nullptr;
  p.tol = Tolerances{fib, {}, {}};
  if (item.workload->tolerance) {
    p.tol.fib_tol.atol = p.tol.sol_tol.atol = item.workload->tolerance->max_atol;
    p.tol.fib_tol.rtol = p.tol.sol_tol.rtol = item.workload->tolerance->max_rtol;
  }
  // With the reference's outputs on the device, the outputs are compared there (the same per-element code as the
  // host comparator): a device implementation's where it wrote them, an out-of-process one's where its worker
  // copied them (this process's buffers, mapped there by CUDA IPC: no trip through the host).
  if (gpu && p.ref->memory() == Where::device && (p.remote_impl || impl->memory() == Where::device))
    p.comparator = device_comparator();
  return p;
}

// The rounds of one run, in order: each draws its inputs, calls the reference and the implementation, compares,
// and (in the first `timing_trials` rounds) times.
class RunRounds {
 public:
  RunRounds(RunResult& r, const RunPlan& p, const WorkItem& item, const BenchOptions& o,
            const SharedReferenceTiming* shared_reference, void* stream, PhaseClock& clock)
      : r_(r), p_(p), def_(*item.definition), w_(*item.workload), o_(o), shared_reference_(shared_reference),
        stream_(stream), clock_(clock) {}
  // One round; false when its outputs did not pass (the run's status and message say why).
  bool run(int round);

 private:
  std::shared_ptr<const catalog::Inputs> inputs(uint64_t seed) const;
  CallArgs host_args(const catalog::Inputs& inputs) const;
  RoundRunner::Outputs run_remote(const catalog::Inputs& inputs, uint64_t seed, int round, const CallArgs& host);
  std::vector<compare::Report> compare(int round, const CallArgs& host, PreparedCall& ref_call,
                                       PreparedCall* impl_call, const RoundRunner::Outputs& remote);
  void time(int round, const CallArgs& host, const TensorMap& device_inputs, PreparedCall& ref_call,
            PreparedCall* impl_call);

  RunResult& r_;
  const RunPlan& p_;
  const catalog::Definition& def_;
  const catalog::Workload& w_;
  const BenchOptions& o_;
  const SharedReferenceTiming* shared_reference_;
  void* stream_;
  PhaseClock& clock_;
  RunBuffers buffers_;
  std::vector<compare::Report> all_reports_;
};

// A device implementation never sees the host inputs (only their device copies), so its rounds' inputs can be
// shared with the next implementation on this workload; a host implementation gets them to itself.
std::shared_ptr<const catalog::Inputs> RunRounds::inputs(uint64_t seed) const {
  if (p_.draw_on_device)
    return std::make_shared<const catalog::Inputs>(
        catalog::generate_inputs(def_, w_, seed, catalog::GenerateOptions{.plan_random_floats = true}));
  if (p_.impl->memory() == Where::device) return worker_input_cache().get(def_, w_, seed);
  return std::make_shared<const catalog::Inputs>(catalog::generate_inputs(def_, w_, seed));
}

// The round's host arguments. Outputs are shapes only: every implementation gets outputs of its own
// (PreparedCall); count_work reads their sizes.
CallArgs RunRounds::host_args(const catalog::Inputs& inputs) const {
  CallArgs host;
  for (const auto& [name, t] : inputs.tensors) host.inputs[name] = t.view();
  for (const auto& [name, fill] : inputs.random) host.inputs[name] = DeviceInputs::shape_only(fill);
  host.scalars = inputs.scalars;
  host.kv_layout = p_.kv_layout;
  const auto axes = catalog::resolve_axes(def_, w_);
  for (const auto& spec : def_.outputs) {
    TensorView v;
    v.dtype = spec.dtype;
    v.shape = catalog::concrete_shape(spec, axes);
    v.strides = contiguous_strides(v.shape);
    host.outputs[spec.name] = v;
  }
  return host;
}

// An out-of-process implementation rebuilds the round's inputs from the same recipe and hands back outputs;
// compared on the device, it writes them straight into this process's buffers (CUDA IPC).
RoundRunner::Outputs RunRounds::run_remote(const catalog::Inputs& inputs, uint64_t seed, int round,
                                           const CallArgs& host) {
  std::optional<TensorMap> handed;
  if (p_.comparator) {
    handed.emplace();
    for (const auto& spec : def_.outputs) {
      const TensorView v = buffers_.tensor("remote/" + spec.name, host.outputs.at(spec.name));
      device::poison(v, stream_);
      handed->emplace(spec.name, v);
    }
    device::synchronize(stream_);
  }
  RoundRunner::Outputs remote = p_.remote_impl->run_round(def_, w_, inputs, seed, handed ? &*handed : nullptr);
  if (remote.plan_s && round == 0) {
    r_.plan_host_s = remote.plan_s;
    char text[96];
    std::snprintf(text, sizeof text, "plan step %.3f ms host time in round 0, outside the timed calls",
                  *remote.plan_s * 1e3);
    add_note(r_.message, text);
  }
  return remote;
}

// Each output of the round against the reference's, on the device where it can be, else on the host.
std::vector<compare::Report> RunRounds::compare(int round, const CallArgs& host, PreparedCall& ref_call,
                                                PreparedCall* impl_call, const RoundRunner::Outputs& remote) {
  std::vector<compare::Report> reports;
  for (const auto& spec : def_.outputs) {
    // Where the implementation's outputs are: an out-of-process one's in its "remote/" buffers when compared on
    // the device (handed over there), else on the host.
    const auto actual_on_device = [&] {
      return p_.remote_impl ? buffers_.tensor("remote/" + spec.name, host.outputs.at(spec.name))
                            : impl_call->output(spec.name);
    };
    if (p_.comparator && device_comparable(spec.dtype)) {
      reports.push_back(compare_on_device(spec.name, actual_on_device(), ref_call.output(spec.name), p_.tol,
                                          *p_.comparator, stream_));
      if (r_.phases.compared_on.empty()) r_.phases.compared_on = "device";
    } else {
      Tensor copied;
      if (p_.remote_impl && p_.comparator) {
        copied = Tensor(spec.dtype, host.outputs.at(spec.name).shape);
        device::copy_to_host(actual_on_device(), copied.view(), stream_);
      }
      const TensorView a = p_.remote_impl ? (p_.comparator ? copied.view() : remote.tensors.at(spec.name).view())
                                          : impl_call->host_output(spec.name).view();
      const TensorView e = ref_call.host_output(spec.name).view();
      reports.push_back(p_.tol.fib ? compare::compare_fib(spec.name, a, e, p_.tol.fib_tol)
                                   : compare::compare_sol(spec.name, a, e, p_.tol.sol_tol));
      r_.phases.compared_on = "host";
    }
    r_.reports.push_back(report_json(round, reports.back()));
  }
  return reports;
}

// One timed trial of the implementation and, in the first round, of the timing reference (or its samples from the
// workload's earlier run).
void RunRounds::time(int round, const CallArgs& host, const TensorMap& device_inputs, PreparedCall& ref_call,
                     PreparedCall* impl_call) {
  const bool fresh = !p_.tol.fib && r_.timed_on_device;
  auto t = p_.remote_impl ? p_.remote_impl->time_round(r_.protocol, fresh, o_.prefer_cupti)
                          : time_call(*impl_call, p_.impl->memory(), fresh, r_.protocol, o_.prefer_cupti, stream_);
  r_.timing.timer = t.timer;
  r_.timing.note = t.note;
  r_.timing.trials_ns.push_back(std::move(t.ns));
  r_.phases.timing += clock_.lap();
  if (!p_.timing_ref) {
    // no speedup's denominator (plan_run says why)
  } else if (p_.timing_ref == p_.impl.get()) {
    r_.reference_timing.timer = r_.timing.timer;
    r_.reference_timing.trials_ns.push_back(r_.timing.trials_ns.back());
  } else if (round == 0 && shared_reference_ && shared_reference_->reference == r_.timing_reference &&
             !shared_reference_->timing.trials_ns.empty()) {
    r_.reference_timing = shared_reference_->timing;  // derive() summarises its samples
    add_note(r_.message, "the timing reference's samples are those " + shared_reference_->implementation +
                             "'s run of this workload measured (timed once per workload)");
  } else if (round == 0) {
    // The speedup's denominator is timed in the first trial only, and once per workload in a bench (the
    // runner hands these samples to the workload's next runs): it is informational (the implementation's
    // own trials are the result), and the simple GPU reference is 10-90x slower than kindex on the long
    // ps64 sequences (3 trials of it were 18.9 s of the H200 main job's 41 s).
    // The correctness reference's call is reused when it is also the timing reference.
    std::optional<PreparedCall> tref_owned;
    PreparedCall* tref_call = &ref_call;
    if (p_.timing_ref != p_.ref)
      tref_call = &tref_owned.emplace(*p_.timing_ref, p_.kind, host, device_inputs, def_, w_, buffers_,
                                      "timing-reference", stream_);
    auto rt = time_call(*tref_call, p_.timing_ref->memory(), fresh, r_.protocol, o_.prefer_cupti, stream_);
    r_.reference_timing.timer = rt.timer;
    r_.reference_timing.note = rt.note;
    r_.reference_timing.trials_ns.push_back(std::move(rt.ns));
  }
  r_.phases.reference_timing += clock_.lap();
}

bool RunRounds::run(int round) {
  const uint64_t seed = r_.seed + uint64_t(round);
  const std::shared_ptr<const catalog::Inputs> in = inputs(seed);
  const CallArgs host = host_args(*in);
  if (round == 0) r_.work = count_work(p_.kind, host);

  std::optional<DeviceInputs> on_device;
  if (p_.any_device) on_device.emplace(*in, seed, buffers_, stream_);
  const TensorMap& device_inputs = on_device ? on_device->views : host.inputs;  // unused by host calls
  r_.phases.inputs += clock_.lap();
  PreparedCall ref_call(*p_.ref, p_.kind, host, device_inputs, def_, w_, buffers_, "reference", stream_);
  ref_call.run_and_wait();
  r_.phases.reference += clock_.lap();
  std::optional<PreparedCall> impl_call;
  RoundRunner::Outputs remote;
  if (p_.remote_impl) {
    remote = run_remote(*in, seed, round, host);
  } else {
    impl_call.emplace(*p_.impl, p_.kind, host, device_inputs, def_, w_, buffers_, "implementation", stream_);
    impl_call->run_and_wait();
  }
  r_.phases.implementation += clock_.lap();

  PreparedCall* const impl = impl_call ? &*impl_call : nullptr;
  const std::vector<compare::Report> reports = compare(round, host, ref_call, impl, remote);
  r_.phases.compare += clock_.lap();
  all_reports_.insert(all_reports_.end(), reports.begin(), reports.end());
  r_.rounds_run = round + 1;
  auto summary = compare::combine(all_reports_);
  r_.max_abs_error = summary.max_abs_error;
  r_.max_rel_error = summary.max_rel_error;
  r_.matched_ratio = summary.min_matched_ratio;
  if (!summary.passed) {
    r_.status = RunStatus::incorrect_numerical;
    add_note(r_.message, "round " + std::to_string(round) + " (seed " + std::to_string(r_.seed + round) +
                             "): " + summary.reason);
    return false;
  }
  if (round < p_.timing_trials) time(round, host, device_inputs, ref_call, impl);
  return true;
}

}  // namespace

RunResult execute_run(const WorkItem& item, const std::string& impl_spec, const BenchOptions& o, bool gpu,
                      bool* sticky, const SharedReferenceTiming* shared_reference) {
  RunResult r = new_run_result(item, impl_spec);
  const auto started = std::chrono::steady_clock::now();
  PhaseClock clock;
  try {
    const RunPlan plan = plan_run(r, item, impl_spec, o, gpu);
    StreamGuard stream(plan.any_device);
    RunRounds rounds(r, plan, item, o, shared_reference, stream.stream, clock);
    r.phases.setup = clock.lap();
    for (int round = 0; round < r.rounds_requested; ++round)
      if (!rounds.run(round)) break;
    if (!r.timing.note.empty()) add_note(r.message, r.timing.note);
  } catch (const RunFailure& e) {
    r.status = e.status;
    add_note(r.message, e.what());
    if (e.sticky && sticky) *sticky = true;
  } catch (const std::bad_alloc&) {
    r.status = RunStatus::resource_exceeded;
    add_note(r.message, "out of host memory");
  } catch (const std::exception& e) {
    r.status = RunStatus::runtime_error;
    add_note(r.message, e.what());
  }
  if (r.status != RunStatus::passed) {
    // Timing of a run that did not pass is not a result.
    r.timing.trials_ns.clear();
    r.reference_timing.trials_ns.clear();
  }
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return r;
}

}  // namespace kindex::runner
