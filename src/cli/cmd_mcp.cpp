// `kindex mcp`: the MCP server over stdio (src/mcp) on the store, for coding agents. stdout carries only the
// protocol; what the store says about itself goes to stderr.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>

#include "cli/commands.hpp"
#include "cli/index_common.hpp"
#include "mcp/server.hpp"

namespace kindex::cli {

void add_mcp_command(CLI::App& app, Registry& registry) {
  auto c = std::make_shared<Common>();
  CLI::App* cmd = app.add_subcommand("mcp", "Serve the index to coding agents: an MCP server over stdio (JSON-RPC 2.0)");
  add_common(cmd, *c, /*with_json=*/false);
  cmd->callback([&registry, c] {
    registry.selected = [c] {
      auto s = open_store(c->store, false);
      mcp::Server(*s).serve(stdin, stdout);
      return 0;
    };
  });
}

}  // namespace kindex::cli
