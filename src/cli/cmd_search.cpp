// `kindex search`: operations by name, alias, family or description (store::search).
#include <CLI/CLI.hpp>

#include <iomanip>
#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "cli/index_common.hpp"
#include "store/query.hpp"
#include "store/store.hpp"

namespace kindex::cli {

using nlohmann::json;

void add_search_command(CLI::App& app, Registry& registry) {
  auto c = std::make_shared<Common>();
  auto text = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("search", "Find operations by name, alias, family or description");
  add_common(cmd, *c);
  cmd->add_option("text", *text, "Text to look for (empty: all)");
  cmd->callback([&registry, c, text] {
    registry.selected = [c, text] {
      auto s = open_store(c->store, false);
      json r = store::search(*s, *text);
      if (c->json_output) {
        std::cout << r.dump(2) << "\n";
      } else {
        for (const auto& o : r) {
          std::cout << std::left << std::setw(50) << o["name"].get<std::string>() << std::right << std::setw(6) << o["workloads"]
                    << " workloads " << std::setw(6) << o["runs"] << " runs\n";
        }
      }
      return 0;
    };
  });
}

}  // namespace kindex::cli
