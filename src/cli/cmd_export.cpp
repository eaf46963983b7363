// `kindex export`: the store as a KernelIndex export (store::export_store).
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "cli/index_common.hpp"
#include "store/export.hpp"
#include "store/query.hpp"
#include "store/store.hpp"

namespace kindex::cli {

using nlohmann::json;

namespace {

void print_counts(const json& counts) {
  for (const auto& [t, n] : counts.items()) std::cout << t << " " << n << "\n";
}

}  // namespace

void add_export_command(CLI::App& app, Registry& registry) {
  add_query_command(app, registry, "export", "Write the store as a KernelIndex export (.jsonl.zst or .jsonl)",
                    "output", "Output file", store::export_store, print_counts)
      ->required();
}

}  // namespace kindex::cli
