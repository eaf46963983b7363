#pragma once
#include <functional>

namespace CLI { class App; }

namespace kindex::cli {

// A subcommand's parse callback stores what to run here; main() runs it after parsing.
struct Registry {
  std::function<int()> selected;
};

// One function per subcommand file; add_all_commands (commands.cpp) calls each.
void add_all_commands(CLI::App& app, Registry& registry);
void add_catalog_command(CLI::App& app, Registry& registry);        // cmd_catalog.cpp
void add_digest_command(CLI::App& app, Registry& registry);         // cmd_digest.cpp
void add_validate_command(CLI::App& app, Registry& registry);       // cmd_validate.cpp
void add_verify_export_command(CLI::App& app, Registry& registry);  // cmd_verify_export.cpp
void add_index_commands(CLI::App& app, Registry& registry);  // cmd_index.cpp: import search resolve show records compare export serve
void add_bench_command(CLI::App& app, Registry& registry);         // cmd_bench.cpp
int bench_main_job();  // cmd_bench.cpp: run_default's work
// `kindex` with no subcommand: the main job (bench the bundled problems; CPU path without a GPU).
int run_default();

}  // namespace kindex::cli
