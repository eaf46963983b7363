// `kindex digest FILE...`: the KernelIndex canonical digest of each manifest (YAML or JSON), after strict reading
// and schema validation, printed as "<digest>  <file>" like sha256sum.
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "core/error.hpp"
#include "evidence/digest.hpp"
#include "evidence/reader.hpp"
#include "evidence/schema.hpp"

namespace kindex::cli {

void add_digest_command(CLI::App& app, Registry& registry) {
  auto files = std::make_shared<std::vector<std::string>>();
  CLI::App* cmd = app.add_subcommand("digest", "Print the KernelIndex digest of each manifest (YAML or JSON)");
  cmd->add_option("files", *files, "Manifest files")->required();
  cmd->callback([&registry, files] {
    registry.selected = [files] {
      int failures = 0;
      for (const auto& file : *files) {
        try {
          const nlohmann::json manifest = evidence::read_manifest_file(file);
          evidence::validate_manifest(manifest, file);
          std::cout << evidence::manifest_digest(manifest, file) << "  " << file << "\n";
        } catch (const Error& e) {
          std::cerr << "kindex digest: " << e.what() << "\n";
          ++failures;
        }
      }
      return failures == 0 ? 0 : 1;
    };
  });
}

}  // namespace kindex::cli
