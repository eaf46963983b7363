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

namespace {

void print_leaderboard(const json& r) {
  std::cout << r["operation"]["name"].get<std::string>() << ": "
            << (r["baseline"].is_null()
                    ? std::string("no speedup: no implementation has the baseline role (--baseline picks one)")
                    : "speedup over " + r["baseline"]["title"].get<std::string>() + " (" +
                          r["baseline"]["chosenBy"].get<std::string>() + ")")
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
}

}  // namespace

void add_leaderboard_command(CLI::App& app, Registry& registry) {
  auto q = std::make_shared<store::LeaderboardQuery>();
  CLI::App* cmd = add_query_command(
      app, registry, "leaderboard",
      "Per implementation across an operation's workloads: average speedup over the baseline, pass rate, latency spread",
      [q](store::Store& s) { return store::leaderboard(s, *q); }, print_leaderboard);
  cmd->add_option("operation", q->operation, "Operation (name, slug or alias)")->required();
  cmd->add_option("--device", q->device, "Only runs on a GPU whose name contains this (e.g. H200)");
  cmd->add_option("--author", q->author, "Only implementations with an author (or project) containing this");
  cmd->add_option("--baseline", q->baseline, "Implementation (slug or id) the speedups are measured against");
}

}  // namespace kindex::cli
