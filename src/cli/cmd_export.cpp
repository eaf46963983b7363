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
  auto c = std::make_shared<Common>();
  auto out = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("export", "Write the store as a KernelIndex export (.jsonl.zst or .jsonl)");
  add_common(cmd, *c);
  cmd->add_option("output", *out, "Output file")->required();
  cmd->callback([&registry, c, out] {
    registry.selected = [c, out] {
      auto s = open_store(c->store, false);
      json counts = store::export_store(*s, *out);
      if (c->json_output) {
        std::cout << counts.dump(2) << "\n";
      } else {
        for (const auto& [t, n] : counts.items()) std::cout << t << " " << n << "\n";
      }
      return 0;
    };
  });
}

}  // namespace kindex::cli
