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

namespace {

void print_operations(const json& r) {
  for (const auto& o : r)
    std::cout << std::left << std::setw(50) << o["name"].get<std::string>() << std::right << std::setw(6)
              << o["workloads"] << " workloads " << std::setw(6) << o["runs"] << " runs\n";
}

}  // namespace

void add_search_command(CLI::App& app, Registry& registry) {
  add_query_command(app, registry, "search", "Find operations by name, alias, family or description", "text",
                    "Text to look for (empty: all)",
                    [](store::Store& s, const std::string& text) { return store::search(s, text); }, print_operations);
}

}  // namespace kindex::cli
