// `kindex validate FILE...`: strict reading and schema validation of KernelIndex manifests; lists every problem
// of each file (JSON pointer, value, rule).
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "core/error.hpp"
#include "evidence/reader.hpp"
#include "evidence/schema.hpp"

namespace kindex::cli {

void add_validate_command(CLI::App& app, Registry& registry) {
  auto files = std::make_shared<std::vector<std::string>>();
  CLI::App* cmd = app.add_subcommand("validate", "Validate KernelIndex manifests (YAML or JSON) against the schemas");
  cmd->add_option("files", *files, "Manifest files")->required();
  cmd->callback([&registry, files] {
    registry.selected = [files] {
      int failures = 0;
      for (const auto& file : *files) {
        try {
          const nlohmann::json manifest = evidence::read_manifest_file(file);
          const auto problems = evidence::check_manifest_schema(manifest);
          for (const auto& p : problems)
            std::cerr << format_error(file, p.pointer.empty() ? "/" : p.pointer, p.value, p.rule) << "\n";
          if (!problems.empty()) {
            ++failures;
            continue;
          }
          evidence::validate_manifest(manifest, file);  // the normalisations (durations) too
          std::cout << "valid  " << manifest["kind"].get<std::string>() << "  " << file << "\n";
        } catch (const Error& e) {
          std::cerr << e.what() << "\n";
          ++failures;
        }
      }
      return failures == 0 ? 0 : 1;
    };
  });
}

}  // namespace kindex::cli
