// `kindex records`: current records and their history per cohort (store::records).
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "cli/index_common.hpp"
#include "store/query.hpp"
#include "store/store.hpp"

namespace kindex::cli {

using nlohmann::json;

namespace {

void print_records(const json& r) {
  for (const auto& rec : r) {
    std::cout << rec["operationName"].get<std::string>() << " · " << rec["workload"].get<std::string>()
              << "\n  record: ";
    if (rec["record"].is_null()) {
      std::cout << "none";
    } else {
      std::cout << ns(rec["record"]["latencyNs"]) << " " << rec["record"]["implementation"].get<std::string>() << " ("
                << rec["record"]["gpu"].get<std::string>() << ")";
    }
    std::cout << "; " << rec["history"].size() << " events\n";
  }
}

}  // namespace

void add_records_command(CLI::App& app, Registry& registry) {
  add_query_command(app, registry, "records", "Current records and their history per comparison group", "operation",
                    "Only this operation", store::records, print_records);
}

}  // namespace kindex::cli
