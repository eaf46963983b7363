// `kindex verify-export FILE.jsonl.zst`: recomputes every digest column of a KernelIndex export from its stored
// manifests and prints the match counts per column; exits non-zero on any mismatch.
#include <CLI/CLI.hpp>

#include <iomanip>
#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "evidence/export.hpp"

namespace kindex::cli {

void add_verify_export_command(CLI::App& app, Registry& registry) {
  struct Options {
    std::string path;
    std::size_t show = 20;
  };
  auto options = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("verify-export", "Recompute every digest column of a KernelIndex export (.jsonl.zst)");
  cmd->add_option("file", options->path, "Export file (.jsonl.zst or .jsonl)")->required();
  cmd->add_option("--show", options->show, "How many mismatches to list (default 20)");
  cmd->callback([&registry, options] {
    registry.selected = [options] {
      const evidence::VerifyReport report = evidence::verify_export(options->path);
      for (const auto& [table, rows] : report.skipped_tables)
        std::cerr << "warning: skipped " << rows << " rows of table '" << table
                  << "', which this version of kindex does not know\n";
      std::cout << "rows:";
      for (const auto& [table, count] : report.row_counts) std::cout << " " << table << "=" << count;
      std::cout << "\n";
      for (const auto& [column, check] : report.columns)
        std::cout << std::left << std::setw(32) << column << " matched " << std::setw(6) << check.matched
                  << " mismatched " << check.mismatched << "\n";
      for (std::size_t i = 0; i < report.mismatches.size() && i < options->show; ++i)
        std::cout << "mismatch: " << report.mismatches[i] << "\n";
      if (report.mismatches.size() > options->show)
        std::cout << "... and " << report.mismatches.size() - options->show << " more mismatches\n";
      std::cout << (report.ok() ? "all digests match" : "DIGEST MISMATCH") << "\n";
      return report.ok() ? 0 : 1;
    };
  });
}

}  // namespace kindex::cli
