// The runner: one job per (work item, implementation), each run in a worker process (pipeline.cpp), its result
// completed with the implementation's description and the floors (derive) and handed to the caller.
#include "runner/runner.hpp"

#include <algorithm>
#include <chrono>
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

}  // namespace

BenchReport run_bench(const std::vector<WorkItem>& items, const BenchOptions& options,
                      const std::function<void(const RunResult&, const Environment&)>& on_result) {
  if (options.implementations.empty()) throw Error("kindex bench", "--impl", "", "no implementation given");
  if (options.reference != "auto" && options.reference != "cpu-reference" && options.reference != "gpu-reference")
    throw Error("kindex bench", "--reference", options.reference, "must be auto, cpu-reference or gpu-reference");
  struct Job {
    size_t item;
    std::string impl;
  };
  std::vector<Job> jobs;
  std::vector<std::string> specs = options.implementations;
  for (const auto& peer : options.peers) {
    if (!is_peer(peer)) throw Error("kindex bench", "--peer", peer, "not a peer (" + peer_names_text() + ")");
    if (std::find(specs.begin(), specs.end(), peer) == specs.end()) specs.push_back(peer);
  }
  for (size_t i = 0; i < items.size(); ++i) {
    for (const auto& impl : options.implementations) jobs.push_back({i, impl});
    for (const auto& peer : options.peers)
      if (std::find(options.implementations.begin(), options.implementations.end(), peer) ==
              options.implementations.end() &&
          peer_is_baseline_for(peer, *items[i].definition))
        jobs.push_back({i, peer});
  }

  BenchReport report;
  SigpipeIgnored sigpipe;
  ScratchFolder scratch;  // the solutions' Python processes' files, removed when the bench ends
  // Serves, in the current process (the body of a worker): "hello" (the environment and the in-process
  // implementations' descriptions), "describe <spec>" (one solution's description, in its own worker), "prepare
  // <spec> <item>..." (its set-up), "warm <spec> <threads> <item>..." (the same in a warm-up helper, with that many
  // compile workers) and "run <item> <spec> <gpu>". Items and specs are indices into `items` and
  // `specs`, not jobs: the job list changes after the first worker has been forked with its copy.
  auto serve = [&](const std::string& request, bool* exit_after) -> std::string {
    std::istringstream in(request);
    std::string op;
    in >> op;
    size_t item = 0, spec = 0;
    if (op == "hello") {
      std::vector<std::string> here;  // the solutions are described in their own workers
      for (const auto& s : specs)
        if (!is_solution_spec(s)) here.push_back(s);
      return capture_hello(here).dump();
    }
    if (op == "describe") {
      in >> spec;
      return capture_hello({specs.at(spec)}, false).dump();
    }
    if (op == "prepare" || op == "warm") {
      in >> spec;
      if (op == "warm") {  // a warm-up helper: its share of the cores for Inductor's compile workers
        int threads = 1;
        in >> threads;
        ::setenv("TORCHINDUCTOR_COMPILE_THREADS", std::to_string(threads).c_str(), 1);
      }
      std::vector<const WorkItem*> mine;
      while (in >> item) mine.push_back(&items.at(item));
      return prepare_runs(specs.at(spec), mine, options).to_json().dump(-1, ' ', false,
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
    RunResult r = execute_run(items.at(item), specs.at(spec), options, has_gpu != 0, &sticky,
                              shared ? &*shared : nullptr);
    nlohmann::json j = r.to_json();
    if (sticky) j["worker_unusable"] = true, *exit_after = true;
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  auto spec_index = [&](const std::string& spec) {
    return std::to_string(std::find(specs.begin(), specs.end(), spec) - specs.begin());
  };

  // The workers, one per lane: "" for the implementations that run in the worker process itself (kindex, the
  // references, external libraries), and one per solution or peer, which describes it, prepares its runs while
  // the other lanes' runs are measured, then runs them. Runs happen one at a time whatever their lane.
  struct Lane {
    std::unique_ptr<Worker> worker;
    bool preparing = false;
    Clock::time_point since;
    std::vector<size_t> rest;  // the set-up's second request: every workload after the first
    SetUpRecord set_up;        // so far
    std::vector<std::unique_ptr<Worker>> warm_up;  // helpers filling the compiler's on-disk cache
  };
  std::map<std::string, Lane> lanes;
  auto lane_of = [&](const std::string& spec) { return options.isolate && is_solution_spec(spec) ? spec : ""; };
  auto start_worker = [&](const std::string& lane) { lanes[lane].worker = std::make_unique<Worker>(serve); };

  // The environment and the implementations' descriptions: from the first worker (or this process), the
  // solutions' from their own, at the same time.
  std::map<std::string, ImplementationInfo> infos;
  const auto started = Clock::now();
  {
    nlohmann::json hello;  // the first worker's: with the environment
    std::vector<nlohmann::json> hellos;
    if (options.isolate) {
      std::vector<std::string> described;
      for (const auto& spec : specs)
        if (!lane_of(spec).empty() &&
            std::any_of(jobs.begin(), jobs.end(), [&](const Job& j) { return j.impl == spec; })) {
          start_worker(spec);
          if (lanes[spec].worker->send("describe " + spec_index(spec))) described.push_back(spec);
        }
      start_worker("");
      std::string line;
      if (lanes[""].worker->request("hello", 300, &line) == Worker::Reply::line)
        hellos.push_back(hello = nlohmann::json::parse(line));
      else
        lanes.erase("");
      for (const auto& spec : described) {
        if (lanes[spec].worker->receive(300, &line) == Worker::Reply::line)
          hellos.push_back(nlohmann::json::parse(line));
        else
          lanes.erase(spec);  // its runs start a fresh worker, and say what went wrong
      }
    } else {
      hellos.push_back(hello = capture_hello(specs));
    }
    for (const auto& reply : hellos) {
      const nlohmann::json described = reply.is_object() ? reply.value("implementations", nlohmann::json::object())
                                                          : nlohmann::json::object();
      for (const auto& [spec, info] : described.items()) {
        if (info.contains("error")) {
          const auto& e = info["error"];
          throw Error(e.value("where", ""), e.value("field", ""), e.value("value", ""), e.value("problem", ""));
        }
        infos[spec] = ImplementationInfo::from_json(info);
      }
    }
    if (hello.is_object() && hello.contains("environment"))
      report.environment = Environment::from_json(hello["environment"]);
    else
      report.environment = capture_environment();  // capture failed in the worker: host facts only
    if (hello.is_object() && hello.contains("measured"))
      report.measured_rates = MeasuredRates{hello["measured"]["copy_bytes_per_s"].get<double>(),
                                            hello["measured"]["tensor_flops_per_s"].get<double>(),
                                            "measured by kindex bench at the start of this run: 1 GiB device copy "
                                            "and a 8192^3 bf16 cuBLASLt GEMM, median of 10"};
  }
  report.start_s = seconds_since(started);
  // A peer this machine does not have is reported, not run.
  for (const auto& [spec, info] : infos)
    if (!info.not_installed.empty()) report.not_available[spec] = info.not_installed;
  jobs.erase(std::remove_if(jobs.begin(), jobs.end(),
                            [&](const Job& j) { return is_peer(j.impl) && report.not_available.count(j.impl); }),
             jobs.end());
  std::set<std::string> dropped;  // implementations whose remaining jobs are not run (a set-up that timed out)
  const bool gpu = report.environment.has_gpu;
  if (options.baseline && options.baseline->device != report.environment.gpu_name)
    throw Error("--baseline", options.baseline->path + ": device.name", options.baseline->device,
                "was measured on another GPU than this run's (" +
                    (gpu ? report.environment.gpu_name : std::string("no GPU")) + ")");

  // Each solution's set-up starts now, in its own worker, beside the runs of the other lanes: first its first
  // workload alone, then the rest. Where the compiler's on-disk cache is cold, warm-up helpers (one per 2 cores, the
  // lane included) compile later workloads into that cache meanwhile, so the lane finds them there; they are ended
  // when the lane is done. Cold: the peer found the cache empty when described (helpers start with the set-up), or
  // the first workload missed it (they start then). Where it hit, the cache is warm: no helpers.
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  auto prepare_request = [&](const std::string& op, const std::string& spec, const std::vector<size_t>& its,
                             const std::string& extra = "") {
    std::string request = op + " " + spec_index(spec) + extra;
    for (size_t i : its) request += " " + std::to_string(i);
    return request;
  };
  auto start_warm_up = [&](const std::string& lane, Lane& l) {
    const size_t processes = std::min<size_t>(
        l.rest.size(), options.set_up_processes > 0 ? unsigned(options.set_up_processes) : std::max(1u, cores / 2));
    for (size_t h = 1; h < processes; ++h) {
      const std::vector<size_t> share(l.rest.begin() + ptrdiff_t(h * l.rest.size() / processes),
                                      l.rest.begin() + ptrdiff_t((h + 1) * l.rest.size() / processes));
      const size_t threads = std::max<size_t>(1, cores / processes);
      auto helper = std::make_unique<Worker>(serve);
      if (helper->send(prepare_request("warm", lane, share, " " + std::to_string(threads))))
        l.warm_up.push_back(std::move(helper));
    }
    l.set_up.warm_up_processes = int(l.warm_up.size());
  };
  for (auto& [lane, l] : lanes) {
    if (lane.empty() || !l.worker) continue;
    std::vector<size_t> mine;
    for (const auto& job : jobs)
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
    else if (infos[lane].compile_cache_empty && l.rest.size() >= 2)
      start_warm_up(lane, l);
  }
  auto worker_died = [](SetUpRecord& s, Lane& l) {
    s.status = "failed";
    s.message = "the worker process died during the set-up (" + l.worker->stop() + ")";
    l.worker.reset();
  };
  // Takes the set-ups' replies; ends those past the per-workload timeout (their runs are not run).
  auto collect_set_ups = [&] {
    for (auto& [lane, l] : lanes) {
      if (!l.preparing) continue;
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
          if (l.worker->send(prepare_request("prepare", lane, rest))) continue;
          worker_died(s, l);
        }
      } else if (reply == Worker::Reply::died) {
        worker_died(s, l);
      } else if (seconds_since(l.since) > options.timeout_s) {
        l.worker->stop(true);
        l.worker.reset();
        s.status = "timeout";
        s.message = "exceeded the per-workload timeout of " + std::to_string(int(options.timeout_s)) + " s";
        report.not_available[lane] = "its set-up " + s.message + "; its runs were not run";
        dropped.insert(lane);
      } else {
        continue;
      }
      for (auto& helper : l.warm_up) helper->stop(true);
      l.warm_up.clear();
      l.preparing = false;
      s.wall_s = seconds_since(l.since);
      report.set_up[lane] = s;
    }
  };
  auto preparing_text = [&] {
    std::string text;
    for (const auto& [lane, l] : lanes)
      if (l.preparing)
        text += (text.empty() ? "set-up: " : ", ") + lane + " " + std::to_string(int(seconds_since(l.since))) + " s";
    return text;
  };

  // The jobs in order, except that a job whose lane is still preparing waits (the next ready one goes first);
  // the report lists the results in the jobs' order. Which run of a workload times its timing reference is part of
  // that contract too (users diff these outputs): the first in the jobs' order that times one. So a job that times a
  // reference waits while an earlier job of its workload that also times one has not run (and no samples are shared
  // yet); a job that is its own timing reference (the references on their own memory) never waits for that.
  std::vector<std::pair<size_t, RunResult>> done;  // job index (in the order at the start), result
  std::vector<size_t> order;                       // job indices not yet run
  for (size_t j = 0; j < jobs.size(); ++j) order.push_back(j);
  std::map<size_t, SharedReferenceTiming> shared_references;  // per work item
  // Whether a job of `spec` times a timing reference other than itself (as execute_run chooses it: the GPU reference
  // for device implementations, the CPU reference on the host). Not described: assumed to.
  auto times_a_reference = [&](const std::string& spec) {
    const auto it = infos.find(spec);
    if (it == infos.end()) return true;
    return (it->second.on_device ? "gpu-reference" : "cpu-reference") != spec;
  };
  Progress progress(options.progress, jobs.size());
  while (true) {
    collect_set_ups();
    order.erase(std::remove_if(order.begin(), order.end(), [&](size_t j) { return dropped.count(jobs[j].impl); }),
                order.end());
    if (order.empty()) break;
    auto next = std::find_if(order.begin(), order.end(), [&](size_t j) {
      auto l = lanes.find(lane_of(jobs[j].impl));
      if (l != lanes.end() && l->second.preparing) return false;
      if (!times_a_reference(jobs[j].impl) || shared_references.count(jobs[j].item)) return true;
      return std::none_of(order.begin(), order.end(), [&](size_t k) {
        return k < j && jobs[k].item == jobs[j].item && times_a_reference(jobs[k].impl);
      });
    });
    const std::string preparing = preparing_text();
    if (next == order.end()) {  // only jobs whose set-up goes on
      progress.update(done.size(), "waiting for the " + preparing);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    const size_t j = *next;
    order.erase(next);
    const Job& job = jobs[j];
    const auto& item = items[job.item];
    progress.update(done.size(), item.definition->name + " " + item.workload->uuid.substr(0, 8) + " " + job.impl +
                                     (preparing.empty() ? "" : " | " + preparing));
    RunResult r;
    const auto shared = shared_references.find(job.item);
    const SharedReferenceTiming* shared_reference = shared == shared_references.end() ? nullptr : &shared->second;
    if (!options.isolate) {
      r = execute_run(item, job.impl, options, gpu, nullptr, shared_reference);
    } else {
      const std::string lane = lane_of(job.impl);
      if (!lanes[lane].worker) start_worker(lane);
      Worker& worker = *lanes[lane].worker;
      std::string line;
      auto t0 = Clock::now();
      std::string request = "run " + std::to_string(job.item) + " " + spec_index(job.impl) + " " + (gpu ? "1" : "0");
      if (shared_reference)
        request += " " + shared_reference->to_json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      auto reply = worker.request(request, options.timeout_s, &line);
      if (reply == Worker::Reply::line) {
        auto parsed = nlohmann::json::parse(line);
        r = RunResult::from_json(parsed);
        if (parsed.value("worker_unusable", false)) worker.stop(), lanes[lane].worker.reset();
      } else {
        // The worker is gone or stuck: the run ends with that status, the next run gets a fresh worker.
        r = new_run_result(item, job.impl);
        if (reply == Worker::Reply::timeout) {
          worker.stop(true);
          r.status = RunStatus::timeout;
          r.message = "exceeded the per-workload timeout of " + std::to_string(int(options.timeout_s)) + " s";
        } else {
          std::string how = worker.stop();
          r.status = RunStatus::runtime_error;
          r.message = "the implementation crashed the worker process (" + how + ")";
        }
        lanes[lane].worker.reset();
        r.wall_s = seconds_since(t0);
      }
    }
    // A worker that died before describing the implementation leaves only its name.
    if (auto it = infos.find(job.impl); it != infos.end())
      r.implementation_info = it->second;
    else
      r.implementation_info.name = job.impl;
    // The workload's first timing-reference samples serve its later runs (the reference is timed once per workload).
    if (!shared_reference && r.status == RunStatus::passed && !r.reference_timing.trials_ns.empty() &&
        r.timing_reference != r.implementation)
      shared_references[job.item] = {r.timing_reference, r.implementation, r.reference_timing};
    const auto recording = Clock::now();
    derive(r, item, report.environment, report.measured_rates, options.baseline);
    if (on_result) on_result(r, report.environment);
    r.phases.record = seconds_since(recording);
    done.emplace_back(j, std::move(r));
  }
  progress.finish();
  for (auto& [lane, l] : lanes)  // all end at once, then each is waited for
    if (l.worker) l.worker->close_input();
  for (auto& [lane, l] : lanes)
    if (l.worker) l.worker->stop();
  std::stable_sort(done.begin(), done.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [j, r] : done) report.results.push_back(std::move(r));
  return report;
}

}  // namespace kindex::runner
