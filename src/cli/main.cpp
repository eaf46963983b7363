// kindex: the command-line door to the library. Each subcommand lives in its own file and registers itself
// here through one add_*_command function; this file only wires them together.
#include <CLI/CLI.hpp>

#include <exception>
#include <iostream>

#include "cli/commands.hpp"
#include "core/error.hpp"

int main(int argc, char** argv) {
  CLI::App app{"kindex: GPU kernels, benchmarks and a kernel evidence index"};
  app.require_subcommand(0, 1);
  kindex::cli::Registry registry;
  kindex::cli::add_all_commands(app, registry);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    if (registry.selected) return registry.selected();
    return kindex::cli::run_default(registry);
  } catch (const kindex::Error& e) {
    std::cerr << "kindex: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "kindex: error: " << e.what() << "\n";
    return 2;
  }
}
