// `kindex queue add <bench arguments>` and `kindex queue status`: the run queue of a shared PostgreSQL store
// (src/store/queue.hpp, src/runner/queue.hpp; docs/fleet.md). `kindex worker` (cmd_worker.cpp) drains it.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "core/error.hpp"
#include "runner/queue.hpp"
#include "store/queue.hpp"

namespace kindex::cli {

namespace {

void print_status(const std::string& queue, const std::vector<store::QueueCount>& hosts) {
  store::QueueCount total;
  for (const auto& h : hosts) {
    total.queued += h.queued, total.running += h.running, total.done += h.done, total.failed += h.failed;
  }
  std::printf("queue %s: %lld runs: %lld queued, %lld running, %lld done, %lld failed\n", queue.c_str(),
              static_cast<long long>(total.queued + total.running + total.done + total.failed),
              static_cast<long long>(total.queued), static_cast<long long>(total.running),
              static_cast<long long>(total.done), static_cast<long long>(total.failed));
  bool header = false;
  for (const auto& h : hosts) {
    if (h.host.empty()) continue;  // the queued runs, held by no host
    if (!header) std::printf("  %-32s %8s %8s %8s\n", "host", "running", "done", "failed"), header = true;
    std::printf("  %-32s %8lld %8lld %8lld\n", h.host.c_str(), static_cast<long long>(h.running),
                static_cast<long long>(h.done), static_cast<long long>(h.failed));
  }
}

}  // namespace

void add_queue_command(CLI::App& app, Registry& registry) {
  CLI::App* queue = app.add_subcommand("queue", "The run queue of a shared PostgreSQL store: add runs, show progress");
  queue->require_subcommand(1);

  auto s = std::make_shared<runner::SessionOptions>();
  auto events = std::make_shared<bool>(false);
  auto store = std::make_shared<std::string>();
  auto name = std::make_shared<std::string>("default");
  auto max_attempts = std::make_shared<int>(3);
  CLI::App* add = queue->add_subcommand(
      "add", "Queue the runs `kindex bench` would make with these arguments, for `kindex worker`s to claim");
  add_run_options(add, *s, *events);
  add->add_option("--store", *store, "The PostgreSQL store (postgresql://...; default $KINDEX_STORE)");
  add->add_option("--queue", *name, "Queue name (workers name the queue they drain)")->default_val("default");
  add->add_option("--max-attempts", *max_attempts,
                  "Claims per run: a run whose lease expires this many times (its worker killed or cut off each "
                  "time) is failed instead of queued again")
      ->check(CLI::Range(1, 100))
      ->default_val(3);
  add->callback([&registry, s, events, store, name, max_attempts] {
    registry.selected = [s, events, store, name, max_attempts] {
      s->bench.prefer_cupti = !*events;
      if (name->empty()) throw Error("kindex queue add", "--queue", "", "give a queue name");
      // Everything is checked before the store is touched: a bad argument queues nothing.
      const std::vector<store::QueuedRun> runs = runner::queued_runs(*s);
      auto db = store::open_queue_store(store_uri(*store));
      store::RunQueue q(*db);
      const std::string batch = q.add(*name, runs, *max_attempts);
      std::cout << "queued " << runs.size() << " runs on queue " << *name << " (batch " << batch
                << "); drain it with `kindex worker --store URI --queue " << *name << "` on each GPU host\n";
      return 0;
    };
  });

  auto status_store = std::make_shared<std::string>();
  auto status_name = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  CLI::App* status = queue->add_subcommand("status", "Queued, running, done and failed runs per host");
  status->add_option("--store", *status_store, "The PostgreSQL store (postgresql://...; default $KINDEX_STORE)");
  status->add_option("--queue", *status_name, "One queue (default: every queue)");
  status->add_flag("--json", *json, "Machine-readable");
  status->callback([&registry, status_store, status_name, json] {
    registry.selected = [status_store, status_name, json] {
      auto db = store::open_queue_store(store_uri(*status_store));
      store::RunQueue q(*db);
      const std::vector<std::string> names = status_name->empty() ? q.queues() : std::vector{*status_name};
      nlohmann::json out = nlohmann::json::array();
      for (const auto& n : names) {
        const auto hosts = q.status(n);
        if (*json) {
          nlohmann::json j = {{"queue", n}, {"hosts", nlohmann::json::array()}};
          for (const auto& h : hosts)
            j["hosts"].push_back({{"host", h.host}, {"queued", h.queued}, {"running", h.running},
                                  {"done", h.done}, {"failed", h.failed}});
          out.push_back(j);
        } else {
          print_status(n, hosts);
        }
      }
      if (*json) std::cout << out.dump(2) << "\n";
      if (names.empty() && !*json) std::cout << "no queue in this store\n";
      return 0;
    };
  });
}

}  // namespace kindex::cli
