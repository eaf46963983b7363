#include "cli/commands.hpp"

#include <CLI/CLI.hpp>

namespace kindex::cli {

void add_all_commands(CLI::App& app, Registry& registry) {
  add_catalog_command(app, registry);
  add_digest_command(app, registry);
  add_validate_command(app, registry);
  add_verify_export_command(app, registry);
  add_index_commands(app, registry);
  add_bench_command(app, registry);
}

int run_default() { return bench_main_job(); }

}  // namespace kindex::cli
