#include "runner/queue.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <ostream>
#include <thread>

#include "runner/execute/implementation.hpp"
#include "runner/record/records.hpp"
#include "core/error.hpp"

namespace kindex::runner {

namespace {

// The bench options a queued run carries (every one that shapes a run; the implementation is the row's own).
nlohmann::json options_json(const BenchOptions& o) {
  nlohmann::json j = {{"reference", o.reference}, {"timeout_s", o.timeout_s}, {"prefer_cupti", o.prefer_cupti}};
  if (o.trials) j["trials"] = *o.trials;
  if (o.timing_trials) j["timing_trials"] = *o.timing_trials;
  if (o.iterations) j["iterations"] = *o.iterations;
  if (o.warmup) j["warmup"] = *o.warmup;
  if (o.seed) j["seed"] = *o.seed;
  return j;
}

BenchOptions options_from_json(const nlohmann::json& j, const std::string& implementation) {
  BenchOptions o;
  o.implementations = {implementation};
  o.reference = j.at("reference").get<std::string>();
  o.timeout_s = j.at("timeout_s").get<double>();
  o.prefer_cupti = j.at("prefer_cupti").get<bool>();
  if (j.contains("trials")) o.trials = j["trials"].get<int>();
  if (j.contains("timing_trials")) o.timing_trials = j["timing_trials"].get<int>();
  if (j.contains("iterations")) o.iterations = j["iterations"].get<int>();
  if (j.contains("warmup")) o.warmup = j["warmup"].get<int>();
  if (j.contains("seed")) o.seed = j["seed"].get<uint64_t>();
  return o;
}

std::string this_host() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || !*name) return "unknown-host";
  return name;
}

// Renews the lease of the run being measured, every lease / 3, on a connection of its own (the worker's is idle
// while the run lasts, and a libpq connection serves one caller at a time). A renewal that fails (the server out of
// reach) is tried again at once on a fresh connection, then at the next tick; a lease found lost stays lost: the
// worker's result will be refused.
class LeaseKeeper {
 public:
  LeaseKeeper(std::string uri, double lease_s) : uri_(std::move(uri)), lease_s_(lease_s) {
    thread_ = std::thread([this] { loop(); });
  }
  ~LeaseKeeper() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  void hold(int64_t id, const std::string& token) {
    std::lock_guard lock(mutex_);
    id_ = id, token_ = token, lost_ = false;
  }
  void release() {
    std::lock_guard lock(mutex_);
    id_ = 0;
  }
  bool lost() {
    std::lock_guard lock(mutex_);
    return lost_;
  }

 private:
  void loop() {
    std::unique_lock lock(mutex_);
    while (!stop_) {
      wake_.wait_for(lock, std::chrono::duration<double>(lease_s_ / 3));
      if (stop_ || id_ == 0 || lost_) continue;
      const int64_t id = id_;
      const std::string token = token_;
      lock.unlock();
      bool held = true, reached = false;
      // A renewal on a connection found lost (the server restarted, or the connection was cut) is tried at once on
      // a fresh one, so that a cut connection does not cost the lease; a server out of reach, again next tick.
      for (int attempt = 0; attempt < 2 && !reached; ++attempt) {
        try {
          if (!queue_) store_ = store::Store::open(uri_), queue_ = std::make_unique<store::RunQueue>(*store_);
          held = queue_->renew(id, token, lease_s_);
          reached = true;
        } catch (const std::exception&) {
          queue_.reset();
          store_.reset();
        }
      }
      lock.lock();
      if (reached && !held && id_ == id) lost_ = true;
    }
  }
  std::string uri_;
  double lease_s_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false, lost_ = false;
  int64_t id_ = 0;
  std::string token_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<store::RunQueue> queue_;
  std::thread thread_;
};

// The problems the worker has resolved so far, by --problem argument (a dataset is read once).
class Problems {
 public:
  WorkItem find(const store::QueuedRun& run) {
    auto it = problems_.find(run.problem);
    if (it == problems_.end()) it = problems_.emplace(run.problem, resolve_problems(run.problem)).first;
    for (const auto& p : it->second) {
      if (p.definition.name != run.definition) continue;
      for (const auto& w : p.workloads)
        if (w.uuid == run.workload) return {&p.definition, &w};
      throw Error("kindex worker", "workload", run.workload, "not a workload of " + run.definition + " here");
    }
    throw Error("kindex worker", "definition", run.definition, "not found in " + run.problem + " here");
  }

 private:
  std::map<std::string, std::vector<catalog::Problem>> problems_;
};

}  // namespace

std::vector<store::QueuedRun> queued_runs(const SessionOptions& options) {
  if (options.bench.baseline)
    throw Error("kindex queue add", "--baseline", options.bench.baseline->path,
                "a queued run cannot carry a file of this host; queue L2/003 runs without it (the published T_b)");
  if (!options.bench.isolate)
    throw Error("kindex queue add", "--in-process", "", "queued runs always run in worker processes");
  std::vector<catalog::Problem> problems;
  std::vector<std::string> specs;
  const std::vector<WorkItem> items = select_items(options, problems, &specs);
  if (items.empty())
    throw Error("kindex queue add", "--workloads", options.workloads, "selects no workload: nothing to queue");
  for (const auto& impl : options.bench.implementations) check_implementation_spec(impl);
  const std::string bench_options = options_json(options.bench).dump();
  std::vector<store::QueuedRun> runs;
  for (const Job& job : plan_jobs(items, options.bench)) {
    const WorkItem& item = items[job.item];
    runs.push_back({specs[job.item], item.definition->name, item.workload->uuid, job.impl, bench_options});
  }
  return runs;
}

int run_worker(const WorkerOptions& options, std::ostream& log) {
  std::unique_ptr<store::Store> store = store::open_queue_store(options.store_uri);  // a bad --store fails here
  auto queue = std::make_unique<store::RunQueue>(*store);
  const std::string host = options.host.empty() ? this_host() : options.host;
  const int64_t pid = ::getpid();
  LeaseKeeper keeper(options.store_uri, options.lease_s);
  Problems problems;
  int runs = 0;
  while (options.max_runs == 0 || runs < options.max_runs) {
    std::optional<store::ClaimedRun> claimed;
    try {
      if (!queue) store = store::open_queue_store(options.store_uri), queue = std::make_unique<store::RunQueue>(*store);
      claimed = queue->claim(options.queue, host, pid, options.lease_s);
      if (!claimed && options.exit_when_drained && queue->pending(options.queue) == 0) break;
    } catch (const std::exception& e) {  // the server out of reach: try again on a fresh connection
      log << "kindex worker: " << e.what() << "; retrying in " << options.poll_s << " s" << std::endl;
      queue.reset();
      store.reset();
    }
    if (!claimed) {
      std::this_thread::sleep_for(std::chrono::duration<double>(options.poll_s));
      continue;
    }
    ++runs;
    const store::QueuedRun& run = claimed->run;
    keeper.hold(claimed->id, claimed->token);
    log << "run " << claimed->id << " (" << run.definition << " " << run.workload.substr(0, 8) << " "
        << run.implementation << ", claim " << claimed->attempts << "): " << std::flush;
    // The run (its failure is the run's: it is failed in the queue) apart from closing it in the store (a failure
    // there is the store's: nothing is closed, the lease expires and the run is queued again).
    std::optional<WorkItem> item;
    std::optional<std::pair<RunResult, Environment>> result;
    std::string failure;
    double bench_s = 0;
    try {
      item = problems.find(run);
      const BenchOptions bench = options_from_json(nlohmann::json::parse(run.options), run.implementation);
      const auto t0 = std::chrono::steady_clock::now();
      const BenchReport report = run_bench({*item}, bench, [&](const RunResult& r, const Environment& env) {
        result.emplace(r, env);
      });
      bench_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (!result) {
        const auto why = report.not_available.find(run.implementation);
        failure = why != report.not_available.end() ? run.implementation + ": " + why->second : "the bench gave no result";
      }
    } catch (const std::exception& e) {
      failure = e.what();
    }
    // Closing it: when the worker's connection was lost while the run was measured (the server restarted, or the
    // connection was cut; it sat idle meanwhile), once more on a fresh connection. complete and fail check the
    // lease in their own transaction, so a retry after a commit whose answer was lost is refused: never recorded
    // twice.
    auto on_a_live_connection = [&](const std::function<bool()>& close) {
      try {
        return close();
      } catch (const std::exception& e) {
        log << "(the store's connection was lost: " << e.what() << "; reconnecting) " << std::flush;
        queue.reset();
        store.reset();
        store = store::open_queue_store(options.store_uri);
        queue = std::make_unique<store::RunQueue>(*store);
        return close();
      }
    };
    std::string outcome;
    try {
      if (!failure.empty()) {
        outcome = on_a_live_connection([&] { return queue->fail(claimed->id, claimed->token, failure); })
                      ? "failed: " + failure
                      : "failed: " + failure + " (its lease was lost meanwhile)";
      } else {
        const RunResult& r = result->first;
        const std::string status(status_name(r.status));
        std::string run_id;
        const auto t0 = std::chrono::steady_clock::now();
        const bool recorded = on_a_live_connection([&] {
          return queue->complete(
              claimed->id, claimed->token,
              [&] {
                const store::RecordResult rec = store->record_run(own_run(r, *item, result->second, false));
                run_id = rec.run_id;
                return rec;
              },
              status);
        });
        const double record_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const PhaseTimes& p = r.phases;
        const double measured_s = p.setup + p.inputs + p.reference + p.implementation + p.compare + p.timing + p.reference_timing;
        char cost[160];
        std::snprintf(cost, sizeof cost, " (bench %.1f ms: the run's phases %.1f ms, starting and ending the runner %.1f ms; closing %.1f ms)",
                      bench_s * 1e3, measured_s * 1e3, (bench_s - measured_s) * 1e3, record_s * 1e3);
        outcome = recorded ? status + ", recorded as run " + run_id + cost
                           : status + ", refused: its lease was lost (expired, or the run was taken by another "
                                      "worker); nothing recorded";
      }
    } catch (const std::exception& e) {
      outcome = "not closed: the store is out of reach (" + std::string(e.what()) +
                "); its lease expires and the run is queued again";
      queue.reset();  // a fresh connection for the next claim
      store.reset();
    }
    keeper.release();
    log << outcome << std::endl;
  }
  return 0;
}

}  // namespace kindex::runner
