// `kindex import`: KernelIndex exports and manifests, FlashInfer-Bench / SOL-ExecBench traces, kindex run records (store/import.hpp).
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "cli/index_common.hpp"
#include "store/import.hpp"
#include "store/store.hpp"

namespace kindex::cli {

using nlohmann::json;

void add_import_command(CLI::App& app, Registry& registry) {
  auto c = std::make_shared<Common>();
  auto files = std::make_shared<std::vector<std::string>>();
  auto opts = std::make_shared<store::ImportOptions>();
  CLI::App* cmd = app.add_subcommand("import", "Import KernelIndex exports/manifests, FlashInfer-Bench/SOL-ExecBench traces, kindex run records");
  add_common(cmd, *c);
  cmd->add_option("files", *files, "Files or manifest directories")->required();
  cmd->add_option("--definitions", opts->definitions, "Definition JSON files or directories (for traces)");
  cmd->add_option("--solutions", opts->solutions, "FlashInfer-Bench solution JSON files or directories (for traces)");
  cmd->add_option("--source", opts->source, "Trace source: flashinfer-bench or sol-execbench (default: guess)");
  cmd->callback([&registry, c, files, opts] {
    registry.selected = [c, files, opts] {
      auto s = open_store(c->store, true);
      store::ImportReport rep = store::import_files(*s, *files, *opts);
      for (const auto& w : rep.warnings) std::cerr << "warning: " << w << "\n";
      if (c->json_output) {
        std::cout << rep.to_json().dump(2) << "\n";
      } else {
        std::cout << "inserted " << rep.total_inserted() << " rows";
        for (const auto& [t, n] : rep.inserted) if (n) std::cout << ", " << t << " " << n;
        int64_t skipped = 0;
        for (const auto& [t, n] : rep.skipped) skipped += n;
        std::cout << "; already present " << skipped << "; record events appended " << rep.record_events << "\n";
      }
      return 0;
    };
  });
}

}  // namespace kindex::cli
