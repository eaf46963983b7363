// `kindex digest FILE...`: the KernelIndex canonical digest of each manifest (YAML or JSON), after strict reading
// and schema validation, printed as "<digest>  <file>" like sha256sum.
#include <CLI/CLI.hpp>

#include <iostream>

#include "cli/commands.hpp"
#include "cli/manifest_files.hpp"
#include "evidence/digest.hpp"
#include "evidence/schema.hpp"

namespace kindex::cli {

void add_digest_command(CLI::App& app, Registry& registry) {
  add_manifest_files_command(app, registry, "digest", "Print the KernelIndex digest of each manifest (YAML or JSON)",
                             "kindex digest: ", [](const std::string& file, const nlohmann::json& manifest) {
                               evidence::validate_manifest(manifest, file);
                               std::cout << evidence::manifest_digest(manifest, file) << "  " << file << "\n";
                               return true;
                             });
}

}  // namespace kindex::cli
