// The runner: one job per (work item, implementation), each run in a worker process (pipeline.cpp), its result
// completed with the implementation's description and the floors (derive) and handed to the caller.
#include "runner/runner.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <sstream>

#include "runner/implementation.hpp"
#include "runner/libraries.hpp"
#include "runner/pipeline.hpp"
#include "runner/progress.hpp"
#include "runner/solution.hpp"
#include "runner/worker.hpp"
#include "core/error.hpp"

namespace kindex::runner {

namespace {

// A worker's first reply: the environment, the measured rates, and each implementation's description (loading an
// implementation happens here, in the worker, never in the runner). A spec that cannot be loaded is a bad
// argument: its error is sent back for the runner to throw.
nlohmann::json capture_hello(const std::vector<std::string>& impl_specs) {
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
  // Serves "hello" and "run <item> <spec> <gpu>" in the current process: the body of a worker. A run names its
  // item and implementation (an index into `specs`), not its job: the job list is pruned after the first worker
  // has been forked with its copy.
  auto serve = [&](const std::string& request, bool* exit_after) -> std::string {
    if (request == "hello") return capture_hello(specs).dump();
    // The parent says whether the machine has a GPU (it learnt so from "hello").
    std::istringstream in(request.substr(4));
    size_t item = 0, spec = 0;
    int has_gpu = 0;
    in >> item >> spec >> has_gpu;
    bool sticky = false;
    RunResult r = execute_run(items.at(item), specs.at(spec), options, has_gpu != 0, &sticky);
    nlohmann::json j = r.to_json();
    if (sticky) j["worker_unusable"] = true, *exit_after = true;
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };

  std::unique_ptr<Worker> worker;
  auto start_worker = [&] { worker = std::make_unique<Worker>(serve); };

  // The environment and the implementations' descriptions, from a worker (or this process).
  std::map<std::string, ImplementationInfo> infos;
  const auto started = std::chrono::steady_clock::now();
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
      hello = capture_hello(specs);
    }
    const nlohmann::json described = hello.is_object() ? hello.value("implementations", nlohmann::json::object())
                                                        : nlohmann::json::object();
    for (const auto& [spec, info] : described.items()) {
      if (info.contains("error")) {
        const auto& e = info["error"];
        throw Error(e.value("where", ""), e.value("field", ""), e.value("value", ""), e.value("problem", ""));
      }
      infos[spec] = ImplementationInfo::from_json(info);
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
  report.start_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  // A peer this machine does not have is reported, not run.
  for (const auto& [spec, info] : infos)
    if (!info.not_installed.empty()) report.not_available[spec] = info.not_installed;
  jobs.erase(std::remove_if(jobs.begin(), jobs.end(),
                            [&](const Job& j) { return is_peer(j.impl) && report.not_available.count(j.impl); }),
             jobs.end());
  const bool gpu = report.environment.has_gpu;
  if (options.baseline && options.baseline->device != report.environment.gpu_name)
    throw Error("--baseline", options.baseline->path + ": device.name", options.baseline->device,
                "was measured on another GPU than this run's (" +
                    (gpu ? report.environment.gpu_name : std::string("no GPU")) + ")");

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
      const size_t spec = size_t(std::find(specs.begin(), specs.end(), jobs[j].impl) - specs.begin());
      auto reply = worker->request("run " + std::to_string(jobs[j].item) + " " + std::to_string(spec) + " " +
                                       (gpu ? "1" : "0"),
                                   options.timeout_s, &line);
      if (reply == Worker::Reply::line) {
        auto parsed = nlohmann::json::parse(line);
        r = RunResult::from_json(parsed);
        if (parsed.value("worker_unusable", false)) worker->stop(), worker.reset();
      } else {
        // The worker is gone or stuck: the run ends with that status, the next run gets a fresh worker.
        r = new_run_result(item, jobs[j].impl);
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
    // A worker that died before describing the implementation leaves only its name.
    if (auto it = infos.find(jobs[j].impl); it != infos.end())
      r.implementation_info = it->second;
    else
      r.implementation_info.name = jobs[j].impl;
    const auto recording = std::chrono::steady_clock::now();
    derive(r, item, report.environment, report.measured_rates, options.baseline);
    if (on_result) on_result(r, report.environment);
    r.phases.record = std::chrono::duration<double>(std::chrono::steady_clock::now() - recording).count();
    report.results.push_back(std::move(r));
  }
  progress.finish();
  if (worker) worker->stop();
  return report;
}

}  // namespace kindex::runner
