// `kindex leaderboard`: per implementation across an operation's workloads (store::leaderboard).
#include <CLI/CLI.hpp>

#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>

#include "cli/commands.hpp"
#include "cli/index_common.hpp"
#include "store/query.hpp"
#include "store/store.hpp"

namespace kindex::cli {

using nlohmann::json;

void add_leaderboard_command(CLI::App& app, Registry& registry) {
  auto c = std::make_shared<Common>();
  auto q = std::make_shared<store::LeaderboardQuery>();
  CLI::App* cmd = app.add_subcommand(
      "leaderboard",
      "Per implementation across an operation's workloads: average speedup over the baseline, pass rate, latency spread");
  add_common(cmd, *c);
  cmd->add_option("operation", q->operation, "Operation (name, slug or alias)")->required();
  cmd->add_option("--device", q->device, "Only runs on a GPU whose name contains this (e.g. H200)");
  cmd->add_option("--author", q->author, "Only implementations with an author (or project) containing this");
  cmd->add_option("--baseline", q->baseline, "Implementation (slug or id) the speedups are measured against");
  cmd->callback([&registry, c, q] {
    registry.selected = [c, q] {
      auto s = open_store(c->store, false);
      json r = store::leaderboard(*s, *q);
      if (c->json_output) {
        std::cout << r.dump(2) << "\n";
        return 0;
      }
      std::cout << r["operation"]["name"].get<std::string>() << ": speedup over "
                << (r["baseline"].is_null() ? std::string("(no baseline)") : r["baseline"]["title"].get<std::string>())
                << "\n";
      for (const auto& en : r["entries"]) {
        std::ostringstream speedup;
        if (en["avgSpeedup"].is_number())
          speedup << std::fixed << std::setprecision(2) << en["avgSpeedup"].get<double>() << "x";
        std::cout << "  " << std::setw(3) << en["position"].get<int64_t>() << "  " << std::left << std::setw(9)
                  << (speedup.str().empty() ? "-" : speedup.str()) << std::setw(14)
                  << (std::to_string(en["passed"].get<int64_t>()) + "/" + std::to_string(en["runs"].get<int64_t>()) +
                      " passed")
                  << std::setw(12) << ns(en["latency"].value("medianNs", json())) << en["title"].get<std::string>()
                  << std::right << "\n";
      }
      return 0;
    };
  });
}

}  // namespace kindex::cli
