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

void add_export_command(CLI::App& app, Registry& registry) {
  auto out = std::make_shared<std::string>();
  CLI::App* cmd = add_query_command(
      app, registry, "export", "Write the store as a KernelIndex export (.jsonl.zst or .jsonl)",
      [out](store::Store& s) { return store::export_store(s, *out); },
      [](const json& counts) {
        for (const auto& [t, n] : counts.items()) std::cout << t << " " << n << "\n";
      });
  cmd->add_option("output", *out, "Output file")->required();
}

}  // namespace kindex::cli
