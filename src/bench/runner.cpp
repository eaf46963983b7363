// The runner: workload selection, the per-(implementation, workload) pipeline, and the worker processes that
// isolate it.
#include "bench/runner.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

#include "bench/implementation.hpp"
#include "bench/libraries.hpp"
#include "bench/input_cache.hpp"
#include "bench/json_number.hpp"
#include "bench/problem.hpp"
#include "catalog/builtin.hpp"
#include "catalog/inputs.hpp"
#include "compare/compare.hpp"
#include "core/error.hpp"
#include "evidence/manifest.hpp"

namespace kindex::bench {

// ---------------------------------------------------------------------------------------------------------------
// Selection

std::vector<catalog::Problem> resolve_problems(const std::string& spec) {
  if (spec.empty()) throw Error("kindex bench", "--problem", spec, "give a bundled problem name or a definition path");
  if (auto def = catalog::find_builtin(spec)) return {catalog::builtin_problem(spec)};
  std::error_code ec;
  std::filesystem::path path(spec);
  if (std::filesystem::is_directory(path, ec)) {
    auto problems = catalog::load_dataset(path);
    if (problems.empty()) throw Error("kindex bench", "--problem", spec, "the directory holds no definitions");
    return problems;
  }
  if (std::filesystem::is_regular_file(path, ec)) return {catalog::load_problem(path)};
  throw Error("kindex bench", "--problem", spec,
              "neither a bundled problem (see `kindex bench --list`) nor a definition file or dataset directory");
}

std::vector<const catalog::Workload*> select_workloads(const catalog::Problem& problem, const std::string& spec) {
  const auto& all = problem.workloads;
  std::vector<const catalog::Workload*> out;
  auto fail = [&](const std::string& part, const std::string& why) -> void {
    throw Error("kindex bench", "--workloads", part,
                why + " (problem " + problem.definition.name + " has " + std::to_string(all.size()) + " workloads)");
  };
  if (spec == "all") {
    for (const auto& w : all) out.push_back(&w);
    return out;
  }
  if (spec == "small") {
    for (const auto& w : all)
      if (catalog::is_small(problem.definition, w)) out.push_back(&w);
    return out;
  }
  std::stringstream ss(spec);
  std::string part;
  std::vector<bool> taken(all.size(), false);
  auto take = [&](size_t i) {
    if (!taken[i]) taken[i] = true, out.push_back(&all[i]);
  };
  while (std::getline(ss, part, ',')) {
    part.erase(0, part.find_first_not_of(' '));
    part.erase(part.find_last_not_of(' ') + 1);
    if (part.empty()) fail(spec, "empty item in the list");
    bool numeric = part.find_first_not_of("0123456789-") == std::string::npos;
    if (numeric) {
      auto dash = part.find('-');
      try {
        size_t lo = std::stoul(part.substr(0, dash));
        size_t hi = dash == std::string::npos ? lo : std::stoul(part.substr(dash + 1));
        if (lo > hi) fail(part, "range runs backwards");
        if (hi >= all.size()) fail(part, "index out of range");
        for (size_t i = lo; i <= hi; ++i) take(i);
      } catch (const std::logic_error&) {
        fail(part, "not an index or range like 0-3");
      }
      continue;
    }
    size_t match = all.size(), matches = 0;
    for (size_t i = 0; i < all.size(); ++i)
      if (all[i].uuid.rfind(part, 0) == 0) match = i, ++matches;
    if (matches == 0) fail(part, "no workload uuid starts with this");
    if (matches > 1) fail(part, "ambiguous: " + std::to_string(matches) + " workload uuids start with this");
    take(match);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// The pipeline of one (implementation, workload), in the calling process.

namespace {

// Host tensors of a call's outputs, shaped from the definition.
std::map<std::string, Tensor> allocate_outputs(const catalog::Definition& def, const catalog::Workload& w) {
  auto axes = catalog::resolve_axes(def, w);
  std::map<std::string, Tensor> out;
  for (const auto& spec : def.outputs) out.emplace(spec.name, Tensor(spec.dtype, catalog::concrete_shape(spec, axes)));
  return out;
}

// The inputs of one round on the device, copied once and shared by the implementations that run there.
struct DeviceInputs {
  std::vector<device::DeviceTensor> owned;
  TensorMap views;
  DeviceInputs(const TensorMap& host, bool needed, void* stream) {
    if (!needed) return;
    owned.reserve(host.size());
    for (const auto& [name, view] : host) {
      auto& d = owned.emplace_back(device::allocate_like(view));
      device::copy_to_device(view, d.view, stream);
      views[name] = d.view;
    }
    device::synchronize(stream);
  }
};

// An implementation's view of one call: device copies when it runs on the device, its own outputs (poisoned, so
// an output it never writes cannot pass) and its workspace.
class PreparedCall {
 public:
  // `device_inputs`: the round's inputs already on the device, shared by every device implementation (read only).
  PreparedCall(Implementation& impl, ProblemKind kind, const CallArgs& host, const TensorMap& device_inputs,
               const catalog::Definition& def, const catalog::Workload& w, void* stream)
      : impl_(impl), kind_(kind), stream_(stream) {
    host_outputs_ = allocate_outputs(def, w);
    args_.scalars = host.scalars;
    if (impl.memory() == Where::host) {
      args_.inputs = host.inputs;
      for (auto& [name, t] : host_outputs_) {
        std::memset(t.data(), 0xFF, t.nbytes());
        args_.outputs[name] = t.view();
      }
    } else {
      args_.inputs = device_inputs;
      for (auto& [name, t] : host_outputs_) {
        auto& d = owned_.emplace_back(device::allocate_like(t.view()));
        device::poison(d.view, stream);
        args_.outputs[name] = d.view;
      }
      device::synchronize(stream);
    }
    workspace_bytes_ = impl.workspace_bytes(kind, args_);
    if (impl.memory() == Where::device)
      workspace_ = device::Buffer(workspace_bytes_);
    else if (workspace_bytes_)
      host_workspace_.resize(workspace_bytes_);
  }

  const CallArgs& args() const { return args_; }
  void* workspace() { return impl_.memory() == Where::device ? workspace_.get() : host_workspace_.data(); }
  size_t workspace_bytes() const { return workspace_bytes_; }

  void run(const CallArgs& args) { impl_.run(kind_, args, workspace(), workspace_bytes_, stream_); }
  void run_and_wait() {
    run(args_);
    if (impl_.memory() == Where::device) device::synchronize(stream_);
  }
  // The outputs on the host (copied back from the device when needed).
  std::map<std::string, Tensor>& outputs() {
    if (impl_.memory() == Where::device)
      for (auto& [name, t] : host_outputs_) device::copy_to_host(args_.outputs.at(name), t.view(), stream_);
    return host_outputs_;
  }

 private:
  Implementation& impl_;
  ProblemKind kind_;
  void* stream_;
  CallArgs args_;
  std::vector<device::DeviceTensor> owned_;
  std::map<std::string, Tensor> host_outputs_;
  device::Buffer workspace_;
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

std::string choose_reference(const std::string& requested, const std::string& impl, bool gpu) {
  if (requested != "auto") return requested;
  if (impl == "gpu-reference") return "cpu-reference";  // the GPU reference is checked against the CPU one
  return gpu ? "gpu-reference" : "cpu-reference";
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

}  // namespace

// Runs the whole pipeline in this process. Sets *sticky when the CUDA context is no longer usable.
RunResult execute_run(const WorkItem& item, const std::string& impl_spec, const BenchOptions& o, bool gpu,
                      bool* sticky) {
  const auto& def = *item.definition;
  const auto& w = *item.workload;
  const bool fib = def.source == catalog::Source::flashinfer_bench;
  RunResult r;
  r.definition = def.name;
  r.source = std::string(catalog::source_name(def.source));
  r.workload_uuid = w.uuid;
  r.axes = w.axes;
  r.implementation = impl_spec;
  r.comparator = fib ? "flashinfer_bench_eval" : "sol_execbench_eval";
  r.observed_at = evidence::utc_timestamp_now();
  const auto started = std::chrono::steady_clock::now();
  try {
    auto kind = problem_kind(def);
    if (!kind)
      throw RunFailure(RunStatus::runtime_error, "definition " + def.name + " is not a problem kindex can run");
    auto impl = make_implementation(impl_spec);
    if (auto why = impl->unsupported_reason(def); !why.empty()) throw RunFailure(RunStatus::runtime_error, why);
    r.reference_implementation = choose_reference(o.reference, impl_spec, gpu);
    std::unique_ptr<Implementation> ref_owned;
    Implementation* ref = impl.get();
    if (r.reference_implementation != impl_spec)
      ref = (ref_owned = make_implementation(r.reference_implementation)).get();
    r.check = ref == impl.get() ? "determinism" : "reference";
    if (r.check == "determinism")
      add_note(r.message,
               "the implementation is its own reference here: each round compares two independent calls "
               "on fresh inputs (a determinism check)");
    // The speedup's denominator: the GPU reference for device implementations, the CPU reference on the host.
    r.timing_reference = impl->memory() == Where::device ? "gpu-reference" : "cpu-reference";
    std::unique_ptr<Implementation> timing_ref_owned;
    Implementation* timing_ref = nullptr;
    if (r.timing_reference == impl_spec)
      timing_ref = impl.get();
    else if (r.timing_reference == r.reference_implementation)
      timing_ref = ref;
    else
      timing_ref = (timing_ref_owned = make_implementation(r.timing_reference)).get();

    const int default_rounds = fib ? 3 : 10;
    r.rounds_requested = o.trials.value_or(default_rounds);
    if (r.rounds_requested < default_rounds)
      add_note(r.message, "correctness rounds reduced to " + std::to_string(r.rounds_requested) + " (the source uses " +
                              std::to_string(default_rounds) + ")");
    const int timing_trials = std::min(r.rounds_requested, o.timing_trials.value_or(fib ? 3 : 1));
    r.timed_on_device = impl->memory() == Where::device;
    r.protocol = r.timed_on_device ? TimingProtocol{6, o.warmup.value_or(10), o.iterations.value_or(50), true}
                                   : TimingProtocol{1, o.warmup.value_or(1), o.iterations.value_or(5), false};
    r.seed = o.seed.value_or(catalog::default_seed(def));
    const bool any_device =
        impl->memory() == Where::device || ref->memory() == Where::device || timing_ref->memory() == Where::device;
    StreamGuard stream(any_device);

    compare::FibTolerance fib_tol;
    compare::SolTolerance sol_tol;
    if (w.tolerance) {
      fib_tol.atol = sol_tol.atol = w.tolerance->max_atol;
      fib_tol.rtol = sol_tol.rtol = w.tolerance->max_rtol;
    }
    std::vector<compare::Report> all_reports;
    for (int round = 0; round < r.rounds_requested; ++round) {
      // A device implementation never sees the host inputs (only their device copies), so its rounds' inputs can
      // be shared with the next implementation on this workload; a host implementation gets them to itself.
      const uint64_t seed = r.seed + uint64_t(round);
      const std::shared_ptr<const catalog::Inputs> inputs =
          impl->memory() == Where::device
              ? worker_input_cache().get(def, w, seed)
              : std::make_shared<const catalog::Inputs>(catalog::generate_inputs(def, w, seed));
      CallArgs host;
      for (const auto& [name, t] : inputs->tensors) host.inputs[name] = t.view();
      host.scalars = inputs->scalars;
      auto host_outputs = allocate_outputs(def, w);
      for (auto& [name, t] : host_outputs) host.outputs[name] = t.view();
      if (round == 0) r.work = count_work(*kind, host);

      DeviceInputs on_device(host.inputs, any_device, stream.stream);
      PreparedCall ref_call(*ref, *kind, host, on_device.views, def, w, stream.stream);
      ref_call.run_and_wait();
      auto& expected = ref_call.outputs();
      PreparedCall impl_call(*impl, *kind, host, on_device.views, def, w, stream.stream);
      impl_call.run_and_wait();
      auto& actual = impl_call.outputs();

      std::vector<compare::Report> reports;
      for (const auto& spec : def.outputs) {
        const auto a = actual.at(spec.name).view(), e = expected.at(spec.name).view();
        reports.push_back(fib ? compare::compare_fib(spec.name, a, e, fib_tol)
                              : compare::compare_sol(spec.name, a, e, sol_tol));
        r.reports.push_back(report_json(round, reports.back()));
      }
      all_reports.insert(all_reports.end(), reports.begin(), reports.end());
      r.rounds_run = round + 1;
      auto summary = compare::combine(all_reports);
      r.max_abs_error = summary.max_abs_error;
      r.max_rel_error = summary.max_rel_error;
      r.matched_ratio = summary.min_matched_ratio;
      if (!summary.passed) {
        r.status = RunStatus::incorrect_numerical;
        add_note(r.message, "round " + std::to_string(round) + " (seed " + std::to_string(r.seed + round) +
                                "): " + summary.reason);
        break;
      }
      if (round < timing_trials) {
        const bool fresh = !fib && r.timed_on_device;
        auto t = time_call(impl_call, impl->memory(), fresh, r.protocol, o.prefer_cupti, stream.stream);
        r.timing.timer = t.timer;
        r.timing.note = t.note;
        r.timing.trials_ns.push_back(std::move(t.ns));
        if (timing_ref == impl.get()) {
          r.reference_timing.timer = r.timing.timer;
          r.reference_timing.trials_ns.push_back(r.timing.trials_ns.back());
        } else {
          // The correctness reference's call is reused when it is also the timing reference.
          std::optional<PreparedCall> tref_owned;
          PreparedCall* tref_call = &ref_call;
          if (timing_ref != ref)
            tref_call = &tref_owned.emplace(*timing_ref, *kind, host, on_device.views, def, w, stream.stream);
          auto rt = time_call(*tref_call, timing_ref->memory(), fresh, r.protocol, o.prefer_cupti, stream.stream);
          r.reference_timing.timer = rt.timer;
          r.reference_timing.note = rt.note;
          r.reference_timing.trials_ns.push_back(std::move(rt.ns));
        }
      }
    }
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

// ---------------------------------------------------------------------------------------------------------------
// Worker processes

namespace {

struct WorkerHello {
  Environment environment;
  std::optional<MeasuredRates> measured;
};

nlohmann::json capture_hello() {
  Environment env = capture_environment();
  nlohmann::json j = {{"environment", env.to_json()}};
  const Calibration* calibrate = calibration();
  if (env.has_gpu && calibrate) {
    double copy = 0, flops = 0;
    if (calibrate->measure_rates(&copy, &flops) == KINDEX_STATUS_OK)
      j["measured"] = {{"copy_bytes_per_s", copy}, {"tensor_flops_per_s", flops}};
  }
  return j;
}

bool write_all(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += size_t(n);
  }
  return true;
}

class Worker {
 public:
  // Forks a worker running `serve(request) -> (reply, exit_after)` for each request line.
  explicit Worker(const std::function<std::string(const std::string&, bool*)>& serve) {
    int down[2], up[2];
    if (pipe(down) != 0 || pipe(up) != 0) throw std::runtime_error("pipe failed: " + std::string(strerror(errno)));
    std::cout.flush();
    std::cerr.flush();
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error("fork failed: " + std::string(strerror(errno)));
    if (pid_ == 0) {
      ::close(down[1]);
      ::close(up[0]);
      signal(SIGPIPE, SIG_DFL);
      std::string buffer, line;
      char chunk[256];
      while (true) {
        auto nl = buffer.find('\n');
        if (nl == std::string::npos) {
          ssize_t n = ::read(down[0], chunk, sizeof chunk);
          if (n < 0 && errno == EINTR) continue;
          if (n <= 0) break;
          buffer.append(chunk, size_t(n));
          continue;
        }
        line = buffer.substr(0, nl);
        buffer.erase(0, nl + 1);
        bool exit_after = false;
        std::string reply = serve(line, &exit_after) + "\n";
        if (!write_all(up[1], reply) || exit_after) break;
      }
      _exit(0);  // no atexit handlers or destructors of the parent's state
    }
    ::close(down[0]);
    ::close(up[1]);
    to_ = down[1];
    from_ = up[0];
  }
  ~Worker() { stop(); }

  enum class Reply { line, died, timeout };
  Reply request(const std::string& line, double timeout_s, std::string* reply) {
    if (!write_all(to_, line + "\n")) return Reply::died;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (true) {
      auto nl = buffer_.find('\n');
      if (nl != std::string::npos) {
        *reply = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return Reply::line;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return Reply::timeout;
      pollfd p{from_, POLLIN, 0};
      int ready = poll(&p, 1, int(std::min<int64_t>(left.count(), 1000)));
      if (ready < 0 && errno == EINTR) continue;
      if (ready <= 0) continue;
      char chunk[65536];
      ssize_t n = ::read(from_, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return Reply::died;
      buffer_.append(chunk, size_t(n));
    }
  }

  // Ends the worker: closes its input (it exits), or kills it; returns how it ended, for the log.
  std::string stop(bool kill_it = false) {
    if (pid_ <= 0) return "";
    if (to_ >= 0) ::close(to_), to_ = -1;
    if (kill_it) ::kill(pid_, SIGKILL);
    int status = 0;
    // A worker that does not exit on EOF within 10 s is killed.
    for (int i = 0; i < 1000 && waitpid(pid_, &status, WNOHANG) == 0; ++i) usleep(10000);
    if (waitpid(pid_, &status, WNOHANG) == 0) {
      ::kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
    }
    pid_ = -1;
    if (from_ >= 0) ::close(from_), from_ = -1;
    if (WIFSIGNALED(status))
      return "signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
    return "exit code " + std::to_string(WEXITSTATUS(status));
  }

 private:
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
  std::string buffer_;
};

struct SigpipeIgnored {
  struct sigaction old {};
  SigpipeIgnored() {
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &ignore, &old);
  }
  ~SigpipeIgnored() { sigaction(SIGPIPE, &old, nullptr); }
};

// Floors, ratios, speedup and SOL score of a finished run.
void derive(RunResult& r, const Environment& env, const std::optional<MeasuredRates>& measured) {
  if (!r.timing.trials_ns.empty()) r.timing.summary = summarize_trials(r.timing.trials_ns);
  if (!r.reference_timing.trials_ns.empty())
    r.reference_timing.summary = summarize_trials(r.reference_timing.trials_ns);
  if (r.timing.summary && r.reference_timing.summary && r.timing.summary->latency > 0)
    r.speedup = r.reference_timing.summary->latency / r.timing.summary->latency;
  if (r.work.compulsory_bytes <= 0) return;
  const std::string target = env.floor_target();
  if (auto sheet = datasheet_for(target)) r.headroom = headroom_v1_floor(r.work, *sheet);
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
    if (env.has_gpu) r.t_baseline_s = l2_003_baseline_seconds(env.gpu_name, b, s);
    if (r.t_baseline_s && latency_s > 0 && r.timed_on_device)
      r.sol_score = sol_score(latency_s, *r.t_sol_s, *r.t_baseline_s);
  }
}

class Progress {
 public:
  Progress(bool enabled, size_t total) : enabled_(enabled), total_(total) {}
  void update(size_t done, const std::string& what) {
    if (!enabled_) return;
    const int width = 30;
    int filled = total_ ? int(double(done) / double(total_) * width) : width;
    std::string label = what.size() > 60 ? what.substr(0, 57) + "..." : what;
    std::cerr << "\r[" << std::string(size_t(filled), '#') << std::string(size_t(width - filled), '.') << "] " << done
              << "/" << total_ << " " << label << "\033[K" << std::flush;
  }
  void finish() {
    if (enabled_) std::cerr << "\r\033[K" << std::flush;
  }

 private:
  bool enabled_;
  size_t total_;
};

}  // namespace

BenchReport run_bench(const std::vector<WorkItem>& items, const BenchOptions& options,
                      const std::function<void(const RunResult&, const Environment&)>& on_result) {
  if (options.implementations.empty()) throw Error("kindex bench", "--impl", "", "no implementation given");
  for (const auto& spec : options.implementations) check_implementation_spec(spec);
  if (options.reference != "auto" && options.reference != "cpu-reference" && options.reference != "gpu-reference")
    throw Error("kindex bench", "--reference", options.reference, "must be auto, cpu-reference or gpu-reference");
  struct Job {
    size_t item;
    std::string impl;
  };
  std::vector<Job> jobs;
  for (size_t i = 0; i < items.size(); ++i)
    for (const auto& impl : options.implementations) jobs.push_back({i, impl});

  BenchReport report;
  SigpipeIgnored sigpipe;
  bool gpu = false;
  // Serves "hello" (environment) and "run <job>" in the current process: the body of a worker.
  auto serve = [&](const std::string& request, bool* exit_after) -> std::string {
    if (request == "hello") return capture_hello().dump();
    // "run <job> <gpu>": the parent says whether the machine has a GPU (it learnt so from "hello").
    std::istringstream in(request.substr(4));
    size_t index = 0;
    int has_gpu = 0;
    in >> index >> has_gpu;
    bool sticky = false;
    RunResult r = execute_run(items[jobs[index].item], jobs[index].impl, options, has_gpu != 0, &sticky);
    nlohmann::json j = r.to_json();
    if (sticky) j["worker_unusable"] = true, *exit_after = true;
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };

  std::unique_ptr<Worker> worker;
  auto start_worker = [&] { worker = std::make_unique<Worker>(serve); };

  // The environment, from a worker (or this process).
  {
    nlohmann::json hello;
    if (options.isolate) {
      start_worker();
      std::string line;
      if (worker->request("hello", 300, &line) == Worker::Reply::line)
        hello = nlohmann::json::parse(line);
      else
        worker.reset();
    } else {
      hello = capture_hello();
    }
    if (hello.contains("environment"))
      report.environment = Environment::from_json(hello["environment"]);
    else
      report.environment = capture_environment();  // capture failed in the worker: host facts only
    if (hello.contains("measured"))
      report.measured_rates = MeasuredRates{hello["measured"]["copy_bytes_per_s"].get<double>(),
                                            hello["measured"]["tensor_flops_per_s"].get<double>(),
                                            "measured by kindex bench at the start of this run: 1 GiB device copy "
                                            "and a 8192^3 bf16 cuBLASLt GEMM, median of 10"};
    gpu = report.environment.has_gpu;
  }

  Progress progress(options.progress, jobs.size());
  for (size_t j = 0; j < jobs.size(); ++j) {
    const auto& item = items[jobs[j].item];
    progress.update(j, item.definition->name + " " + item.workload->uuid.substr(0, 8) + " " + jobs[j].impl);
    RunResult r;
    if (!options.isolate) {
      r = execute_run(item, jobs[j].impl, options, gpu, nullptr);
    } else {
      if (!worker) start_worker();
      std::string line;
      auto t0 = std::chrono::steady_clock::now();
      auto reply = worker->request("run " + std::to_string(j) + " " + (gpu ? "1" : "0"), options.timeout_s, &line);
      if (reply == Worker::Reply::line) {
        auto parsed = nlohmann::json::parse(line);
        r = RunResult::from_json(parsed);
        if (parsed.value("worker_unusable", false)) worker->stop(), worker.reset();
      } else {
        // The worker is gone or stuck: the run ends with that status, the next run gets a fresh worker.
        r.definition = item.definition->name;
        r.source = std::string(catalog::source_name(item.definition->source));
        r.workload_uuid = item.workload->uuid;
        r.axes = item.workload->axes;
        r.implementation = jobs[j].impl;
        r.comparator = item.definition->source == catalog::Source::flashinfer_bench ? "flashinfer_bench_eval"
                                                                                    : "sol_execbench_eval";
        r.observed_at = evidence::utc_timestamp_now();
        if (reply == Worker::Reply::timeout) {
          worker->stop(true);
          r.status = RunStatus::timeout;
          r.message = "exceeded the per-workload timeout of " + std::to_string(int(options.timeout_s)) + " s";
        } else {
          std::string how = worker->stop();
          r.status = RunStatus::runtime_error;
          r.message = "the implementation crashed the worker process (" + how + ")";
        }
        worker.reset();
        r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      }
    }
    derive(r, report.environment, report.measured_rates);
    if (on_result) on_result(r, report.environment);
    report.results.push_back(std::move(r));
  }
  progress.finish();
  if (worker) worker->stop();
  return report;
}

bool BenchReport::any_correctness_failure() const {
  return std::any_of(results.begin(), results.end(), [](const RunResult& r) { return r.status != RunStatus::passed; });
}

}  // namespace kindex::bench
