#include "cli/commands.hpp"

#include <CLI/CLI.hpp>
#include <iostream>

namespace kindex::cli {

void add_all_commands(CLI::App& app, Registry& registry) {
  (void)app;
  (void)registry;
}

int run_default() {
  std::cout << "kindex: nothing to do yet\n";
  return 0;
}

}  // namespace kindex::cli
