// `kindex compare`: two runs side by side (store::compare).
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "cli/index_common.hpp"
#include "store/query.hpp"
#include "store/store.hpp"

namespace kindex::cli {

using nlohmann::json;

void add_compare_command(CLI::App& app, Registry& registry) {
  auto c = std::make_shared<Common>();
  auto a = std::make_shared<std::string>(), b = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("compare", "Two runs side by side");
  add_common(cmd, *c);
  cmd->add_option("a", *a, "Run id, id prefix or digest")->required();
  cmd->add_option("b", *b, "Run id, id prefix or digest")->required();
  cmd->callback([&registry, c, a, b] {
    registry.selected = [c, a, b] {
      auto s = open_store(c->store, false);
      json r = store::compare(*s, *a, *b);
      if (c->json_output) {
        std::cout << r.dump(2) << "\n";
        return 0;
      }
      std::cout << "A " << r["a"]["title"].get<std::string>() << ": " << ns(r["a"]["run"]["latencyNs"]) << "\n"
                << "B " << r["b"]["title"].get<std::string>() << ": " << ns(r["b"]["run"]["latencyNs"]) << "\n"
                << (r["sameCohort"].get<bool>() ? "same comparison group" : "different comparison groups (not directly comparable)");
      if (r["ratioBOverA"].is_number()) std::cout << "; B/A = " << r["ratioBOverA"].get<double>();
      std::cout << "\n";
      for (const auto& d : r["differs"]) std::cout << "  differs: " << d["facet"].get<std::string>() << "\n";
      return 0;
    };
  });
}

}  // namespace kindex::cli
