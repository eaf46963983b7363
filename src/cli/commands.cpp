#include "cli/commands.hpp"

#include <CLI/CLI.hpp>

#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "core/error.hpp"
#include "store/store.hpp"

namespace kindex::cli {

void add_all_commands(CLI::App& app, Registry& registry) {
  app.add_option("--workloads", registry.main_job_workloads,
                 "Main job only: which workloads of each seed problem (all | small | index ranges like 0-3,7; "
                 "default: all with a GPU, small without)");
  app.add_option("--store", registry.main_job_store,
                 std::string("Main job only: store to record into (default $KINDEX_STORE or ") + kDefaultStore + ")");
  add_catalog_command(app, registry);
  add_digest_command(app, registry);
  add_validate_command(app, registry);
  add_verify_export_command(app, registry);
  add_import_command(app, registry);
  add_search_command(app, registry);
  add_resolve_command(app, registry);
  add_show_command(app, registry);
  add_records_command(app, registry);
  add_leaderboard_command(app, registry);
  add_serving_command(app, registry);
  add_compare_command(app, registry);
  add_export_command(app, registry);
  add_serve_command(app, registry);
  add_mcp_command(app, registry);
  add_bench_command(app, registry);
  add_rerun_command(app, registry);
  add_queue_command(app, registry);
  add_worker_command(app, registry);
  add_keygen_command(app, registry);
  add_attest_command(app, registry);
  add_follow_command(app, registry);
  add_feed_command(app, registry);
}

int run_default(const Registry& registry) { return bench_main_job(registry); }

std::string store_uri(const std::string& option) {
  if (!option.empty()) return option;
  const char* env = std::getenv("KINDEX_STORE");
  return env && *env ? env : kDefaultStore;
}

namespace {

// The SQLite file behind a URI; empty for PostgreSQL and in-memory stores.
std::string sqlite_path(const std::string& uri) {
  if (store::is_postgres_uri(uri)) return "";
  std::string path = uri.rfind("sqlite:", 0) == 0 ? uri.substr(7) : uri;
  return path == ":memory:" ? "" : path;
}

}  // namespace

std::string store_display(const std::string& uri) {
  std::string path = sqlite_path(uri);
  return path.empty() ? uri : path;
}

std::unique_ptr<store::Store> open_store(const std::string& option, bool for_writing) {
  const std::string uri = store_uri(option);
  const std::string path = sqlite_path(uri);
  if (!path.empty()) {
    std::error_code ec;
    if (for_writing) {
      auto dir = std::filesystem::path(path).parent_path();
      if (!dir.empty()) std::filesystem::create_directories(dir, ec);
    } else if (!std::filesystem::exists(path, ec)) {
      throw Error("kindex", "store", path,
                  "does not exist: fill it with `kindex` (the main job), `kindex bench` or `kindex import`, or choose "
                  "another with --store or $KINDEX_STORE");
    }
  }
  auto store = store::Store::open(uri);
  auto runs = store->db().query("SELECT COUNT(*) FROM benchmark_runs", {});
  int64_t n = runs.empty() ? 0 : runs[0].integer(0);
  std::cerr << "kindex: store " << store_display(uri) << " (" << n << " runs)";
  if (n == 0 && !for_writing) std::cerr << ": empty; fill it with `kindex`, `kindex bench` or `kindex import`";
  std::cerr << "\n";
  return store;
}

}  // namespace kindex::cli
