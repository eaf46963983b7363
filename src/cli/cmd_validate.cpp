// `kindex validate FILE...`: strict reading and schema validation of KernelIndex manifests; lists every problem
// of each file (JSON pointer, value, rule).
#include <CLI/CLI.hpp>

#include <iostream>

#include "cli/commands.hpp"
#include "cli/manifest_files.hpp"
#include "evidence/schema.hpp"

namespace kindex::cli {

void add_validate_command(CLI::App& app, Registry& registry) {
  add_manifest_files_command(
      app, registry, "validate", "Validate KernelIndex manifests (YAML or JSON) against the schemas", "",
      [](const std::string& file, const nlohmann::json& manifest) {
        const auto problems = evidence::check_manifest_schema(manifest);
        for (const auto& p : problems)
          std::cerr << format_error(file, p.pointer.empty() ? "/" : p.pointer, p.value, p.rule) << "\n";
        if (!problems.empty()) return false;
        evidence::validate_manifest(manifest, file);  // the normalisations (durations) too
        std::cout << "valid  " << manifest["kind"].get<std::string>() << "  " << file << "\n";
        return true;
      });
}

}  // namespace kindex::cli
