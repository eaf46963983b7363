#pragma once
#include <functional>
#include <memory>
#include <string>

namespace CLI { class App; }
namespace kindex::store { class Store; }
namespace kindex::runner { struct SessionOptions; }

namespace kindex::cli {

// A subcommand's parse callback stores what to run here; main() runs it after parsing.
struct Registry {
  std::function<int()> selected;
  // `kindex` with no subcommand: a workload filter for the main job (empty: its default) and its store.
  std::string main_job_workloads;
  std::string main_job_store;
};

// One function per subcommand file; add_all_commands (commands.cpp) calls each.
void add_all_commands(CLI::App& app, Registry& registry);
void add_catalog_command(CLI::App& app, Registry& registry);        // cmd_catalog.cpp
void add_digest_command(CLI::App& app, Registry& registry);         // cmd_digest.cpp
void add_validate_command(CLI::App& app, Registry& registry);       // cmd_validate.cpp
void add_verify_export_command(CLI::App& app, Registry& registry);  // cmd_verify_export.cpp
// The index: one file each (cmd_<name>.cpp), sharing cli/index_common.hpp.
void add_import_command(CLI::App& app, Registry& registry);
void add_search_command(CLI::App& app, Registry& registry);
void add_resolve_command(CLI::App& app, Registry& registry);
void add_show_command(CLI::App& app, Registry& registry);
void add_records_command(CLI::App& app, Registry& registry);
void add_leaderboard_command(CLI::App& app, Registry& registry);
void add_serving_command(CLI::App& app, Registry& registry);
void add_mcp_command(CLI::App& app, Registry& registry);
void add_compare_command(CLI::App& app, Registry& registry);
void add_export_command(CLI::App& app, Registry& registry);
void add_serve_command(CLI::App& app, Registry& registry);
void add_bench_command(CLI::App& app, Registry& registry);         // cmd_bench.cpp
void add_rerun_command(CLI::App& app, Registry& registry);         // cmd_rerun.cpp
void add_queue_command(CLI::App& app, Registry& registry);         // cmd_queue.cpp: queue add, queue status
void add_worker_command(CLI::App& app, Registry& registry);        // cmd_worker.cpp
// The options that shape a bench's runs (--problem, --workloads, --impl, --peer, --reference, --trials,
// --timing-trials, --iterations, --warmup, --seed, --timeout, --events), shared by `bench` and `queue add`
// (cmd_bench.cpp).
void add_run_options(CLI::App* cmd, runner::SessionOptions& s, bool& events);
void add_keygen_command(CLI::App& app, Registry& registry);        // cmd_keygen.cpp
void add_attest_command(CLI::App& app, Registry& registry);        // cmd_attest.cpp
void add_follow_command(CLI::App& app, Registry& registry);        // cmd_follow.cpp: follow and unfollow
void add_feed_command(CLI::App& app, Registry& registry);          // cmd_follow.cpp
int bench_main_job(const Registry& registry);  // cmd_bench.cpp: run_default's work
// `kindex` with no subcommand: the main job (bench the bundled problems; CPU path without a GPU).
int run_default(const Registry& registry);

// The one store every command uses: --store if given, else $KINDEX_STORE, else kDefaultStore (beside the
// traces and manifests the main job and `kindex bench` write).
inline constexpr const char* kDefaultStore = "sqlite:kindex-results/kindex.db";
std::string store_uri(const std::string& option);
// Opens the store named by store_uri(option) and says on stderr which one it is. For reading, a SQLite file that
// does not exist is an error naming it and how to fill it (never a new empty store), and an empty store is
// pointed out; for writing, the file and its directory are created.
std::unique_ptr<store::Store> open_store(const std::string& option, bool for_writing);
// The store URI as a user would type it after --store ("kindex-results/kindex.db" for the SQLite default).
std::string store_display(const std::string& uri);

}  // namespace kindex::cli
