// The runner: one job per (work item, implementation), each run in a worker process (execute/pipeline.cpp), its
// result completed with the implementation's description and the floors (record/derive.cpp) and handed to the
// caller. run_bench is a scheduler over named steps (class Bench).
#include "runner/runner.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include "runner/execute/implementation.hpp"
#include "runner/execute/libraries.hpp"
#include "runner/execute/pipeline.hpp"
#include "runner/record/derive.hpp"
#include "runner/progress.hpp"
#include "runner/execute/solution.hpp"
#include "runner/execute/worker.hpp"
#include "core/error.hpp"

namespace kindex::runner {

namespace {

using Clock = std::chrono::steady_clock;

// A run's manifest labels (outside its digest) naming the GPU it ran on: its UUID, and with --gpus its ordinal.
constexpr const char* kGpuUuidLabel = "gpu_uuid";
constexpr const char* kGpuIndexLabel = "gpu_index";

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// A worker's first reply: the environment, the measured rates, and each implementation's description (loading an
// implementation happens here, in the worker, never in the runner). A spec that cannot be loaded is a bad
// argument: its error is sent back for the runner to throw. `with_environment` false: the descriptions only (a
// solution's own worker describes it while the first worker captures the environment).
nlohmann::json capture_hello(const std::vector<std::string>& impl_specs, bool with_environment = true) {
  nlohmann::json j = {{"implementations", nlohmann::json::object()}};
  for (const auto& spec : impl_specs) {
    try {
      j["implementations"][spec] = make_implementation(spec)->info().to_json();
    } catch (const Error& e) {
      j["implementations"][spec] = {
          {"error", {{"where", e.where()}, {"field", e.field()}, {"value", e.value()}, {"problem", e.problem()}}}};
      return j;  // the bench stops here: no need for the environment
    }
  }
  if (!with_environment) return j;
  Environment env = capture_environment();
  j["environment"] = env.to_json();
  const Calibration* calibrate = calibration();
  if (env.has_gpu && calibrate) {
    double copy = 0, flops = 0;
    if (calibrate->measure_rates(&copy, &flops) == KINDEX_STATUS_OK)
      j["measured"] = {{"copy_bytes_per_s", copy}, {"tensor_flops_per_s", flops}};
  }
  return j;
}

// The one-time set-up of `spec`'s runs of `items` (RoundRunner::prepare), in the worker that will run them: per
// definition, the first round's inputs of each workload it supports (random float tensors as shapes only).
SetUpRecord prepare_runs(const std::string& spec, const std::vector<const WorkItem*>& items, const BenchOptions& o) {
  SetUpRecord s;
  const auto t0 = Clock::now();
  try {
    auto impl = make_implementation(spec);
    RoundRunner* runner = impl->round_runner();
    if (!runner) throw std::logic_error(spec + " runs in this process: nothing to prepare");
    std::vector<const catalog::Definition*> defs;  // in the items' order
    for (const auto* item : items)
      if (std::find(defs.begin(), defs.end(), item->definition) == defs.end()) defs.push_back(item->definition);
    for (const auto* def : defs) {
      if (!impl->unsupported_reason(*def).empty()) continue;  // its runs say why
      std::vector<RoundRunner::PrepareCall> calls;
      const uint64_t seed = o.seed.value_or(catalog::default_seed(*def));
      const catalog::GenerateOptions shapes_only{.plan_random_floats = true};
      for (const auto* item : items)
        if (item->definition == def)
          calls.push_back({item->workload, catalog::generate_inputs(*def, *item->workload, seed, shapes_only)});
      const RoundRunner::Prepared p = runner->prepare(*def, calls);
      s.workloads += int(calls.size());
      s.planned += p.planned;
      s.compile_cache_hits += p.compile_cache_hits;
      s.compile_cache_misses += p.compile_cache_misses;
    }
    s.status = "prepared";
  } catch (const std::exception& e) {
    s.status = "failed";
    s.message = e.what();
  }
  s.wall_s = seconds_since(t0);
  return s;
}

// One bench: the jobs, the workers (one per lane), the set-ups and the results so far. run_bench is its steps in
// order; each step below is one method.
class Bench {
 public:
  Bench(const std::vector<WorkItem>& items, const BenchOptions& options, const OnResult& on_result)
      : items_(items), options_(options), on_result_(on_result) {}

  void plan_jobs();
  void describe_implementations();
  void drop_unavailable();
  void start_set_ups();
  void run_jobs();
  BenchReport finish();
  const BenchReport& report() const { return report_; }

 private:
  // A lane's worker: "" for the implementations that run in the worker process itself (kindex, the references,
  // external libraries), and one per solution or peer, which describes it, prepares its runs while the other
  // lanes' runs are measured, then runs them. Runs happen one at a time whatever their lane.
  struct Lane {
    std::unique_ptr<Worker> worker;
    bool preparing = false;
    Clock::time_point since;
    std::vector<size_t> rest;  // the set-up's second request: every workload after the first
    SetUpRecord set_up;        // so far
    std::vector<std::unique_ptr<Worker>> warm_up;  // helpers filling the compiler's on-disk cache
  };

  std::string serve(const std::string& request, bool* exit_after);
  std::string spec_index(const std::string& spec) const {
    return std::to_string(std::find(specs_.begin(), specs_.end(), spec) - specs_.begin());
  }
  std::string lane_of(const std::string& spec) const {
    return options_.isolate && is_solution_spec(spec) ? spec : "";
  }
  void start_worker(const std::string& lane) {
    lanes_[lane].worker = std::make_unique<Worker>([this](const std::string& r, bool* e) { return serve(r, e); });
  }
  std::string prepare_request(const std::string& op, const std::string& spec, const std::vector<size_t>& its,
                              const std::string& extra = "") const;
  void start_warm_up(const std::string& lane, Lane& l);
  void collect_set_ups();
  bool collect_set_up(const std::string& lane, Lane& l);
  std::string preparing_text() const;
  bool times_a_reference(const std::string& spec) const;
  std::optional<size_t> next_ready_job() const;
  RunResult run_in_worker(const Job& job, const SharedReferenceTiming* shared_reference);
  void run_job(size_t j);

  const std::vector<WorkItem>& items_;
  const BenchOptions& options_;
  const OnResult& on_result_;
  std::vector<Job> jobs_;
  std::vector<std::string> specs_;  // the implementations and the peers; a worker's requests name them by index
  BenchReport report_;
  SigpipeIgnored sigpipe_;
  ScratchFolder scratch_;  // the solutions' Python processes' files, removed when the bench ends
  std::map<std::string, Lane> lanes_;
  std::map<std::string, ImplementationInfo> infos_;
  std::set<std::string> dropped_;  // implementations whose remaining jobs are not run (a set-up that timed out)
  bool gpu_ = false;
  const unsigned cores_ = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::pair<size_t, RunResult>> done_;  // job index (in the order at the start), result
  std::vector<size_t> order_;                        // job indices not yet run
  std::map<size_t, SharedReferenceTiming> shared_references_;  // per work item
};

// The jobs: per work item, the implementations in the order given, then each peer that is the item's harness
// baseline (and not also named as an implementation). Also the list of specs the workers' requests index.
void Bench::plan_jobs() {
  jobs_ = runner::plan_jobs(items_, options_);
  specs_ = options_.implementations;
  for (const auto& peer : options_.peers)
    if (std::find(specs_.begin(), specs_.end(), peer) == specs_.end()) specs_.push_back(peer);
}

// Serves, in the current process (the body of a worker): "hello" (the environment and the in-process
// implementations' descriptions), "describe <spec>" (one solution's description, in its own worker), "prepare
// <spec> <item>..." (its set-up), "warm <spec> <threads> <item>..." (the same in a warm-up helper, with that many
// compile workers) and "run <item> <spec> <gpu>". Items and specs are indices into `items` and
// `specs`, not jobs: the job list changes after the first worker has been forked with its copy.
std::string Bench::serve(const std::string& request, bool* exit_after) {
  std::istringstream in(request);
  std::string op;
  in >> op;
  size_t item = 0, spec = 0;
  if (op == "hello") {
    std::vector<std::string> here;  // the solutions are described in their own workers
    for (const auto& s : specs_)
      if (!is_solution_spec(s)) here.push_back(s);
    return capture_hello(here).dump();
  }
  if (op == "describe") {
    in >> spec;
    return capture_hello({specs_.at(spec)}, false).dump();
  }
  if (op == "prepare" || op == "warm") {
    in >> spec;
    if (op == "warm") {  // a warm-up helper: its share of the cores for Inductor's compile workers
      int threads = 1;
      in >> threads;
      ::setenv("TORCHINDUCTOR_COMPILE_THREADS", std::to_string(threads).c_str(), 1);
    }
    std::vector<const WorkItem*> mine;
    while (in >> item) mine.push_back(&items_.at(item));
    return prepare_runs(specs_.at(spec), mine, options_).to_json().dump(-1, ' ', false,
                                                                      nlohmann::json::error_handler_t::replace);
  }
  // "run": the parent says whether the machine has a GPU (it learnt so from "hello").
  int has_gpu = 0;
  in >> item >> spec >> has_gpu;
  // Then, optionally, the workload's timing-reference samples from an earlier run (SharedReferenceTiming).
  std::string rest;
  std::getline(in, rest);
  std::optional<SharedReferenceTiming> shared;
  if (rest.find('{') != std::string::npos) shared = SharedReferenceTiming::from_json(nlohmann::json::parse(rest));
  bool sticky = false;
  RunResult r = execute_run(items_.at(item), specs_.at(spec), options_, has_gpu != 0, &sticky,
                            shared ? &*shared : nullptr);
  nlohmann::json j = r.to_json();
  if (sticky) j["worker_unusable"] = true, *exit_after = true;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// The environment and the implementations' descriptions: from the first worker (or this process), the
// solutions' from their own, at the same time.
void Bench::describe_implementations() {
  const auto started = Clock::now();
  nlohmann::json hello;  // the first worker's: with the environment
  std::vector<nlohmann::json> hellos;
  if (options_.isolate) {
    std::vector<std::string> described;
    for (const auto& spec : specs_)
      if (!lane_of(spec).empty() &&
          std::any_of(jobs_.begin(), jobs_.end(), [&](const Job& j) { return j.impl == spec; })) {
        start_worker(spec);
        if (lanes_[spec].worker->send("describe " + spec_index(spec))) described.push_back(spec);
      }
    start_worker("");
    std::string line;
    if (lanes_[""].worker->request("hello", 300, &line) == Worker::Reply::line)
      hellos.push_back(hello = nlohmann::json::parse(line));
    else
      lanes_.erase("");
    for (const auto& spec : described) {
      if (lanes_[spec].worker->receive(300, &line) == Worker::Reply::line)
        hellos.push_back(nlohmann::json::parse(line));
      else
        lanes_.erase(spec);  // its runs start a fresh worker, and say what went wrong
    }
  } else {
    hellos.push_back(hello = capture_hello(specs_));
  }
  for (const auto& reply : hellos) {
    const nlohmann::json described = reply.is_object() ? reply.value("implementations", nlohmann::json::object())
                                                        : nlohmann::json::object();
    for (const auto& [spec, info] : described.items()) {
      if (info.contains("error")) {
        const auto& e = info["error"];
        throw Error(e.value("where", ""), e.value("field", ""), e.value("value", ""), e.value("problem", ""));
      }
      infos_[spec] = ImplementationInfo::from_json(info);
    }
  }
  if (hello.is_object() && hello.contains("environment"))
    report_.environment = Environment::from_json(hello["environment"]);
  else
    report_.environment = capture_environment();  // capture failed in the worker: host facts only
  if (hello.is_object() && hello.contains("measured"))
    report_.measured_rates = MeasuredRates{hello["measured"]["copy_bytes_per_s"].get<double>(),
                                           hello["measured"]["tensor_flops_per_s"].get<double>(),
                                           "measured by kindex bench at the start of this run: 1 GiB device copy "
                                           "and a 8192^3 bf16 cuBLASLt GEMM, median of 10"};
  report_.start_s = seconds_since(started);
  gpu_ = report_.environment.has_gpu;
}

// A peer this machine does not have is reported, not run; a --baseline of another GPU is refused.
void Bench::drop_unavailable() {
  for (const auto& [spec, info] : infos_)
    if (!info.not_installed.empty()) report_.not_available[spec] = info.not_installed;
  jobs_.erase(std::remove_if(jobs_.begin(), jobs_.end(),
                             [&](const Job& j) { return is_peer(j.impl) && report_.not_available.count(j.impl); }),
              jobs_.end());
  if (options_.baseline && options_.baseline->device != report_.environment.gpu_name)
    throw Error("--baseline", options_.baseline->path + ": device.name", options_.baseline->device,
                "was measured on another GPU than this run's (" +
                    (gpu_ ? report_.environment.gpu_name : std::string("no GPU")) + ")");
}

std::string Bench::prepare_request(const std::string& op, const std::string& spec, const std::vector<size_t>& its,
                                   const std::string& extra) const {
  std::string request = op + " " + spec_index(spec) + extra;
  for (size_t i : its) request += " " + std::to_string(i);
  return request;
}

void Bench::start_warm_up(const std::string& lane, Lane& l) {
  const size_t processes = std::min<size_t>(
      l.rest.size(), options_.set_up_processes > 0 ? unsigned(options_.set_up_processes) : std::max(1u, cores_ / 2));
  for (size_t h = 1; h < processes; ++h) {
    const std::vector<size_t> share(l.rest.begin() + ptrdiff_t(h * l.rest.size() / processes),
                                    l.rest.begin() + ptrdiff_t((h + 1) * l.rest.size() / processes));
    const size_t threads = std::max<size_t>(1, cores_ / processes);
    auto helper = std::make_unique<Worker>([this](const std::string& r, bool* e) { return serve(r, e); });
    if (helper->send(prepare_request("warm", lane, share, " " + std::to_string(threads))))
      l.warm_up.push_back(std::move(helper));
  }
  l.set_up.warm_up_processes = int(l.warm_up.size());
}

// Each solution's set-up starts now, in its own worker, beside the runs of the other lanes: first its first
// workload alone, then the rest. Where the compiler's on-disk cache is cold, warm-up helpers (one per 2 cores, the
// lane included) compile later workloads into that cache meanwhile, so the lane finds them there; they are ended
// when the lane is done. Cold: the peer found the cache empty when described (helpers start with the set-up), or
// the first workload missed it (they start then). Where it hit, the cache is warm: no helpers.
void Bench::start_set_ups() {
  for (auto& [lane, l] : lanes_) {
    if (lane.empty() || !l.worker) continue;
    std::vector<size_t> mine;
    for (const auto& job : jobs_)
      if (job.impl == lane) mine.push_back(job.item);
    if (mine.empty()) {  // nothing to run (a peer not installed, a solution of no selected definition)
      l.worker.reset();
      continue;
    }
    l.since = Clock::now();
    l.rest.assign(mine.begin() + 1, mine.end());
    l.preparing = l.worker->send(prepare_request("prepare", lane, {mine.front()}));
    if (!l.preparing)
      l.worker.reset();
    else if (infos_[lane].compile_cache_empty && l.rest.size() >= 2)
      start_warm_up(lane, l);
  }
}

// Takes the set-ups' replies; ends those past the per-workload timeout (their runs are not run).
void Bench::collect_set_ups() {
  for (auto& [lane, l] : lanes_) {
    if (!l.preparing || !collect_set_up(lane, l)) continue;
    for (auto& helper : l.warm_up) helper->stop(true);
    l.warm_up.clear();
    l.preparing = false;
    l.set_up.wall_s = seconds_since(l.since);
    report_.set_up[lane] = l.set_up;
  }
}

// One lane's set-up reply, if any: true when its set-up has ended (prepared, failed or timed out).
bool Bench::collect_set_up(const std::string& lane, Lane& l) {
  auto worker_died = [&](SetUpRecord& s) {
    s.status = "failed";
    s.message = "the worker process died during the set-up (" + l.worker->stop() + ")";
    l.worker.reset();
  };
  std::string line;
  const auto reply = l.worker->receive(0, &line);
  SetUpRecord& s = l.set_up;
  const nlohmann::json parsed = reply == Worker::Reply::line ? nlohmann::json::parse(line, nullptr, false)
                                                             : nlohmann::json();
  if (reply == Worker::Reply::line && !parsed.is_object()) {
    s.status = "failed";
    s.message = "the set-up's worker sent an unreadable reply";
  } else if (reply == Worker::Reply::line) {
    SetUpRecord part;
    try {
      part = SetUpRecord::from_json(parsed);
    } catch (const nlohmann::json::exception& e) {
      part.status = "failed";
      part.message = std::string("the set-up's worker sent an unreadable reply: ") + e.what();
    }
    s.workloads += part.workloads;
    s.planned += part.planned;
    s.compile_cache_hits += part.compile_cache_hits;
    s.compile_cache_misses += part.compile_cache_misses;
    s.status = part.status;
    s.message = part.message;
    if (part.status == "prepared" && !l.rest.empty()) {
      if (part.compile_cache_misses > 0 && l.rest.size() >= 2 && l.warm_up.empty()) start_warm_up(lane, l);
      const std::vector<size_t> rest = std::exchange(l.rest, {});
      if (l.worker->send(prepare_request("prepare", lane, rest))) return false;
      worker_died(s);
    }
  } else if (reply == Worker::Reply::died) {
    worker_died(s);
  } else if (seconds_since(l.since) > options_.timeout_s) {
    l.worker->stop(true);
    l.worker.reset();
    s.status = "timeout";
    s.message = "exceeded the per-workload timeout of " + std::to_string(int(options_.timeout_s)) + " s";
    report_.not_available[lane] = "its set-up " + s.message + "; its runs were not run";
    dropped_.insert(lane);
  } else {
    return false;
  }
  return true;
}

std::string Bench::preparing_text() const {
  std::string text;
  for (const auto& [lane, l] : lanes_)
    if (l.preparing)
      text += (text.empty() ? "set-up: " : ", ") + lane + " " + std::to_string(int(seconds_since(l.since))) + " s";
  return text;
}

// Whether a job of `spec` times a timing reference other than itself (as execute_run chooses it: the GPU reference
// for device implementations, the CPU reference on the host). Not described: assumed to.
bool Bench::times_a_reference(const std::string& spec) const {
  const auto it = infos_.find(spec);
  if (it == infos_.end()) return true;
  return (it->second.on_device ? "gpu-reference" : "cpu-reference") != spec;
}

// The jobs in order, except that a job whose lane is still preparing waits (the next ready one goes first);
// the report lists the results in the jobs' order. Which run of a workload times its timing reference is part of
// that contract too (users diff these outputs): the first in the jobs' order that times one. So a job that times a
// reference waits while an earlier job of its workload that also times one has not run (and no samples are shared
// yet); a job that is its own timing reference (the references on their own memory) never waits for that.
std::optional<size_t> Bench::next_ready_job() const {
  for (const size_t j : order_) {
    auto l = lanes_.find(lane_of(jobs_[j].impl));
    if (l != lanes_.end() && l->second.preparing) continue;
    if (!times_a_reference(jobs_[j].impl) || shared_references_.count(jobs_[j].item)) return j;
    const bool earlier = std::any_of(order_.begin(), order_.end(), [&](size_t k) {
      return k < j && jobs_[k].item == jobs_[j].item && times_a_reference(jobs_[k].impl);
    });
    if (!earlier) return j;
  }
  return std::nullopt;
}

void Bench::run_jobs() {
  for (size_t j = 0; j < jobs_.size(); ++j) order_.push_back(j);
  Progress progress(options_.progress, jobs_.size());
  while (true) {
    collect_set_ups();
    order_.erase(std::remove_if(order_.begin(), order_.end(), [&](size_t j) { return dropped_.count(jobs_[j].impl); }),
                 order_.end());
    if (order_.empty()) break;
    const std::optional<size_t> next = next_ready_job();
    const std::string preparing = preparing_text();
    if (!next) {  // only jobs whose set-up goes on
      progress.update(done_.size(), "waiting for the " + preparing);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    order_.erase(std::find(order_.begin(), order_.end(), *next));
    const Job& job = jobs_[*next];
    const auto& item = items_[job.item];
    progress.update(done_.size(), item.definition->name + " " + item.workload->uuid.substr(0, 8) + " " + job.impl +
                                      (preparing.empty() ? "" : " | " + preparing));
    run_job(*next);
  }
  progress.finish();
}

// One run in its lane's worker (a fresh one where the lane has none): a worker that is gone or stuck ends the run
// with that status, and the next run gets a fresh worker.
RunResult Bench::run_in_worker(const Job& job, const SharedReferenceTiming* shared_reference) {
  const auto& item = items_[job.item];
  const std::string lane = lane_of(job.impl);
  if (!lanes_[lane].worker) start_worker(lane);
  Worker& worker = *lanes_[lane].worker;
  std::string line;
  auto t0 = Clock::now();
  std::string request = "run " + std::to_string(job.item) + " " + spec_index(job.impl) + " " + (gpu_ ? "1" : "0");
  if (shared_reference)
    request += " " + shared_reference->to_json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  auto reply = worker.request(request, options_.timeout_s, &line);
  if (reply == Worker::Reply::line) {
    auto parsed = nlohmann::json::parse(line);
    RunResult r = RunResult::from_json(parsed);
    if (parsed.value("worker_unusable", false)) worker.stop(), lanes_[lane].worker.reset();
    return r;
  }
  RunResult r = new_run_result(item, job.impl);
  if (reply == Worker::Reply::timeout) {
    worker.stop(true);
    r.status = RunStatus::timeout;
    r.message = "exceeded the per-workload timeout of " + std::to_string(int(options_.timeout_s)) + " s";
  } else {
    std::string how = worker.stop();
    r.status = RunStatus::runtime_error;
    r.message = "the implementation crashed the worker process (" + how + ")";
  }
  lanes_[lane].worker.reset();
  r.wall_s = seconds_since(t0);
  return r;
}

// Runs job `j`, completes its result (the implementation's description, the shared reference samples, what is
// derived) and hands it to the caller.
void Bench::run_job(size_t j) {
  const Job& job = jobs_[j];
  const auto& item = items_[job.item];
  const auto shared = shared_references_.find(job.item);
  const SharedReferenceTiming* shared_reference = shared == shared_references_.end() ? nullptr : &shared->second;
  RunResult r = options_.isolate ? run_in_worker(job, shared_reference)
                                 : execute_run(item, job.impl, options_, gpu_, nullptr, shared_reference);
  // A worker that died before describing the implementation leaves only its name.
  if (auto it = infos_.find(job.impl); it != infos_.end())
    r.implementation_info = it->second;
  else
    r.implementation_info.name = job.impl;
  // The workload's first timing-reference samples serve its later runs (the reference is timed once per workload).
  if (!shared_reference && r.status == RunStatus::passed && !r.reference_timing.trials_ns.empty() &&
      r.timing_reference != r.implementation)
    shared_references_[job.item] = {r.timing_reference, r.implementation, r.reference_timing};
  if (report_.environment.has_gpu && !report_.environment.gpu_uuid.empty())
    r.labels[kGpuUuidLabel] = report_.environment.gpu_uuid;  // which of the host's GPUs (outside the digests)
  const auto recording = Clock::now();
  derive(r, item, report_.environment, report_.measured_rates, options_.baseline);
  if (on_result_) on_result_(r, report_.environment);
  r.phases.record = seconds_since(recording);
  done_.emplace_back(j, std::move(r));
}

// The workers end (all at once, then each is waited for); the results in the jobs' order.
BenchReport Bench::finish() {
  for (auto& [lane, l] : lanes_)
    if (l.worker) l.worker->close_input();
  for (auto& [lane, l] : lanes_)
    if (l.worker) l.worker->stop();
  std::stable_sort(done_.begin(), done_.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [j, r] : done_) report_.results.push_back(std::move(r));
  return std::move(report_);
}

// --gpus: one runner process per GPU, forked before CUDA is touched and pinned to its GPU, runs a Bench over the
// work items dealt to it and streams what it has: a "hello" line (its GPU's environment and measured rates), a
// "result" line per run as it ends, and the reply (its report's set-ups and peers not available, or the Error
// that stopped it). This process feeds the results to on_result as they come and lists them in the jobs' order.
class Spread {
 public:
  Spread(const std::vector<WorkItem>& items, const BenchOptions& options, const OnResult& on_result)
      : items_(items), options_(options), on_result_(on_result) {}
  BenchReport run();

 private:
  struct Device {
    int gpu = 0;
    std::vector<size_t> items;  // indices into items_, in order
    std::unique_ptr<Worker> worker;
    bool active = false;
    Environment environment;
    std::optional<MeasuredRates> measured;
  };
  std::string serve(const Device& d);
  void take(Device& d, const std::string& line);
  void lost(Device& d, const std::string& how);
  void add_result(Device& d, RunResult r, const std::string& implementation_info);

  const std::vector<WorkItem>& items_;
  const BenchOptions& options_;
  const OnResult& on_result_;
  std::vector<Job> jobs_;
  std::vector<Device> devices_;
  std::vector<bool> done_jobs_;
  std::vector<std::pair<size_t, RunResult>> done_;
  BenchReport report_;
};

// CUDA_VISIBLE_DEVICES pinning a process to ordinal `gpu` of the GPUs this one sees: the gpu-th entry of this
// process's own CUDA_VISIBLE_DEVICES when it sets one (the ordinals count the GPUs it shows), else the ordinal.
std::string visible_device(int gpu) {
  const char* shown = std::getenv("CUDA_VISIBLE_DEVICES");
  if (!shown || !*shown) return std::to_string(gpu);
  std::istringstream in(shown);
  std::string part;
  for (int k = 0; std::getline(in, part, ','); ++k)
    if (k == gpu) return part;
  return std::to_string(gpu);
}

// In the device's runner process: pinned, it runs the Bench of its items.
std::string Spread::serve(const Device& d) {
  ::setenv("CUDA_VISIBLE_DEVICES", visible_device(d.gpu).c_str(), 1);
  std::vector<WorkItem> mine;
  for (size_t i : d.items) mine.push_back(items_[i]);
  BenchOptions options = options_;
  options.gpus.clear();
  options.progress = false;
  const auto dump = [](const nlohmann::json& j) {
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  try {
    const OnResult emit = [&](const RunResult& r, const Environment&) {
      Worker::emit(dump({{"result", r.to_json()}, {"implementation", r.implementation_info.to_json()}}));
    };
    Bench bench(mine, options, emit);
    bench.plan_jobs();
    bench.describe_implementations();
    nlohmann::json hello = {{"environment", bench.report().environment.to_json()}};
    if (const auto& m = bench.report().measured_rates)
      hello["measured"] = {{"copy_bytes_per_s", m->copy_bytes_per_s},
                           {"tensor_flops_per_s", m->tensor_flops_per_s},
                           {"provenance", m->provenance}};
    Worker::emit(dump({{"hello", hello}}));
    bench.drop_unavailable();
    bench.start_set_ups();
    bench.run_jobs();
    const BenchReport report = bench.finish();
    nlohmann::json end = {{"start_s", report.start_s}, {"not_available", report.not_available},
                          {"set_up", nlohmann::json::object()}};
    for (const auto& [spec, s] : report.set_up) end["set_up"][spec] = s.to_json();
    return dump({{"report", end}});
  } catch (const Error& e) {
    return dump({{"error", {{"where", e.where()}, {"field", e.field()}, {"value", e.value()}, {"problem", e.problem()}}}});
  }
}

// A result of device `d`: its job is the first of its device's not yet done with the same workload and
// implementation; labelled with the GPU and derived as Bench::run_job does, with that GPU's environment.
void Spread::add_result(Device& d, RunResult r, const std::string& implementation_info) {
  r.implementation_info = ImplementationInfo::from_json(nlohmann::json::parse(implementation_info));
  for (size_t j = 0; j < jobs_.size(); ++j) {
    const WorkItem& item = items_[jobs_[j].item];
    if (done_jobs_[j] || jobs_[j].impl != r.implementation || item.definition->name != r.definition ||
        item.workload->uuid != r.workload_uuid ||
        std::find(d.items.begin(), d.items.end(), jobs_[j].item) == d.items.end())
      continue;
    done_jobs_[j] = true;
    if (d.environment.has_gpu) r.labels[kGpuIndexLabel] = std::to_string(d.gpu);
    derive(r, item, d.environment, d.measured, options_.baseline);
    if (on_result_) on_result_(r, d.environment);
    done_.emplace_back(j, std::move(r));
    return;
  }
  throw std::runtime_error("the runner of GPU " + std::to_string(d.gpu) + " sent a result of no job of its own (" +
                           r.definition + " " + r.workload_uuid + " " + r.implementation + ")");
}

void Spread::take(Device& d, const std::string& line) {
  const nlohmann::json j = nlohmann::json::parse(line);
  if (j.contains("hello")) {
    d.environment = Environment::from_json(j["hello"]["environment"]);
    if (j["hello"].contains("measured")) {
      const auto& m = j["hello"]["measured"];
      d.measured = MeasuredRates{m["copy_bytes_per_s"].get<double>(), m["tensor_flops_per_s"].get<double>(),
                                 m["provenance"].get<std::string>()};
    }
  } else if (j.contains("result")) {
    add_result(d, RunResult::from_json(j["result"]), j["implementation"].dump());
  } else if (j.contains("error")) {
    const auto& e = j["error"];
    throw Error(e.value("where", ""), e.value("field", ""), e.value("value", ""), e.value("problem", ""));
  } else {
    d.active = false;
    const auto& end = j.at("report");
    report_.start_s = std::max(report_.start_s, end.value("start_s", 0.0));
    for (const auto& [spec, why] : end["not_available"].items()) report_.not_available[spec] = why.get<std::string>();
    for (const auto& [spec, sj] : end["set_up"].items()) {  // one implementation's set-ups on every GPU, summed
      const SetUpRecord part = SetUpRecord::from_json(sj);
      auto [it, first] = report_.set_up.emplace(spec, part);
      if (first) continue;
      SetUpRecord& s = it->second;
      s.wall_s = std::max(s.wall_s, part.wall_s);
      s.workloads += part.workloads, s.planned += part.planned, s.warm_up_processes += part.warm_up_processes;
      s.compile_cache_hits += part.compile_cache_hits, s.compile_cache_misses += part.compile_cache_misses;
      if (part.status != "prepared") s.status = part.status, s.message = part.message;
    }
  }
}

// A device's runner died: its runs not yet done end as the crash they are.
void Spread::lost(Device& d, const std::string& how) {
  d.active = false;
  for (size_t j = 0; j < jobs_.size(); ++j) {
    if (done_jobs_[j] || std::find(d.items.begin(), d.items.end(), jobs_[j].item) == d.items.end()) continue;
    done_jobs_[j] = true;
    RunResult r = new_run_result(items_[jobs_[j].item], jobs_[j].impl);
    r.implementation_info.name = jobs_[j].impl;
    r.status = RunStatus::runtime_error;
    r.message = "the runner process of GPU " + std::to_string(d.gpu) + " died (" + how + ")";
    if (on_result_) on_result_(r, d.environment);
    done_.emplace_back(j, std::move(r));
  }
}

BenchReport Spread::run() {
  jobs_ = plan_jobs(items_, options_);
  done_jobs_.assign(jobs_.size(), false);
  SigpipeIgnored sigpipe;
  devices_.resize(options_.gpus.size());
  for (size_t k = 0; k < devices_.size(); ++k) devices_[k].gpu = options_.gpus[k];
  for (size_t i = 0; i < items_.size(); ++i) devices_[i % devices_.size()].items.push_back(i);
  for (auto& d : devices_) {
    if (d.items.empty()) continue;
    d.worker = std::make_unique<Worker>([this, &d](const std::string&, bool* exit_after) {
      *exit_after = true;
      return serve(d);
    });
    d.active = d.worker->send("bench");
    if (!d.active) lost(d, d.worker->stop());
  }
  Progress progress(options_.progress, jobs_.size());
  while (std::any_of(devices_.begin(), devices_.end(), [](const Device& d) { return d.active; })) {
    for (auto& d : devices_) {
      if (!d.active) continue;
      std::string line;
      const auto reply = d.worker->receive(0.02, &line);
      if (reply == Worker::Reply::line) {
        try {
          take(d, line);
        } catch (...) {  // a bad argument (an Error), or a line that is not one: the other runners end too
          for (auto& other : devices_)
            if (other.worker) other.worker->stop(true);
          throw;
        }
        progress.update(done_.size(), std::to_string(devices_.size()) + " GPUs");
      } else if (reply == Worker::Reply::died) {
        lost(d, d.worker->stop());
      }
    }
  }
  progress.finish();
  for (auto& d : devices_) {
    if (d.worker) d.worker->stop();
    if (!d.items.empty()) report_.gpus.push_back(d.environment);
  }
  for (const auto& d : devices_)
    if (!d.items.empty()) {
      report_.environment = d.environment;
      report_.measured_rates = d.measured;
      break;
    }
  std::stable_sort(done_.begin(), done_.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [j, r] : done_) report_.results.push_back(std::move(r));
  return std::move(report_);
}

}  // namespace

std::vector<Job> plan_jobs(const std::vector<WorkItem>& items, const BenchOptions& options) {
  if (options.implementations.empty()) throw Error("kindex bench", "--impl", "", "no implementation given");
  if (options.reference != "auto" && options.reference != "cpu-reference" && options.reference != "gpu-reference")
    throw Error("kindex bench", "--reference", options.reference, "must be auto, cpu-reference or gpu-reference");
  for (const auto& peer : options.peers)
    if (!is_peer(peer)) throw Error("kindex bench", "--peer", peer, "not a peer (" + peer_names_text() + ")");
  std::vector<Job> jobs;
  const auto& impls = options.implementations;
  for (size_t i = 0; i < items.size(); ++i) {
    for (const auto& impl : impls) jobs.push_back({i, impl});
    for (const auto& peer : options.peers)
      if (std::find(impls.begin(), impls.end(), peer) == impls.end() &&
          peer_is_baseline_for(peer, *items[i].definition))
        jobs.push_back({i, peer});
  }
  return jobs;
}

// The bench as named steps: which jobs, what the implementations are (and the environment), which cannot run here,
// the solutions' and peers' set-ups started in their own workers, the runs one at a time, the report.
BenchReport run_bench(const std::vector<WorkItem>& items, const BenchOptions& options, const OnResult& on_result) {
  if (!options.gpus.empty()) return Spread(items, options, on_result).run();
  Bench bench(items, options, on_result);
  bench.plan_jobs();
  bench.describe_implementations();
  bench.drop_unavailable();
  bench.start_set_ups();
  bench.run_jobs();
  return bench.finish();
}

}  // namespace kindex::runner
