#pragma once
// What `kindex digest` and `kindex validate` share: a subcommand over manifest files, each read strictly (YAML or
// JSON) and handed to `each`, which prints its line and returns false for a file that fails; a kindex::Error is
// printed on stderr (after `error_prefix`) and counted. The exit status is 1 when any file failed.
#include <CLI/CLI.hpp>

#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "core/error.hpp"
#include "evidence/reader.hpp"

namespace kindex::cli {

inline void add_manifest_files_command(CLI::App& app, Registry& registry, const std::string& name,
                                       const std::string& description, const std::string& error_prefix,
                                       std::function<bool(const std::string&, const nlohmann::json&)> each) {
  auto files = std::make_shared<std::vector<std::string>>();
  CLI::App* cmd = app.add_subcommand(name, description);
  cmd->add_option("files", *files, "Manifest files")->required();
  cmd->callback([&registry, files, error_prefix, each] {
    registry.selected = [files, error_prefix, each] {
      int failures = 0;
      for (const auto& file : *files) {
        try {
          if (!each(file, evidence::read_manifest_file(file))) ++failures;
        } catch (const Error& e) {
          std::cerr << error_prefix << e.what() << "\n";
          ++failures;
        }
      }
      return failures == 0 ? 0 : 1;
    };
  });
}

}  // namespace kindex::cli
