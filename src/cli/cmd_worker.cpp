// `kindex worker --store postgresql://...`: claims the queue's runs one at a time and records each in that store
// (src/runner/queue.hpp; docs/fleet.md). Start one per GPU host.
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "runner/queue.hpp"

namespace kindex::cli {

void add_worker_command(CLI::App& app, Registry& registry) {
  auto o = std::make_shared<runner::WorkerOptions>();
  auto store = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "worker", "Claim runs from a PostgreSQL store's queue, run them here and record them there");
  cmd->add_option("--store", *store, "The PostgreSQL store (postgresql://...; default $KINDEX_STORE)");
  cmd->add_option("--queue", o->queue, "The queue to drain")->default_val("default");
  cmd->add_option("--lease", o->lease_s,
                  "Seconds a claim is held without renewal; renewed every third of it while the run lasts, and given "
                  "to another worker once expired")
      ->check(CLI::Range(0.5, 86400.0))
      ->default_val(60);
  cmd->add_option("--poll", o->poll_s, "Seconds between claims while the queue has nothing to claim")
      ->check(CLI::Range(0.01, 3600.0))
      ->default_val(5);
  cmd->add_option("--host", o->host, "The name `kindex queue status` shows for this worker (default: host name)");
  cmd->add_flag("--drain", o->exit_when_drained, "End once nothing of the queue is queued or running");
  cmd->add_option("--max-runs", o->max_runs, "End after this many runs (0: no limit)")->check(CLI::NonNegativeNumber);
  cmd->callback([&registry, o, store] {
    registry.selected = [o, store] {
      o->store_uri = store_uri(*store);
      return runner::run_worker(*o, std::cout);
    };
  });
}

}  // namespace kindex::cli
