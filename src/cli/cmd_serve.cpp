// `kindex serve`: the JSON API and web pages (web::IndexServer).
#include <CLI/CLI.hpp>

#include <cstdlib>
#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "cli/index_common.hpp"
#include "store/store.hpp"
#include "web/server.hpp"

namespace kindex::cli {

void add_serve_command(CLI::App& app, Registry& registry) {
  auto c = std::make_shared<Common>();
  auto o = std::make_shared<web::ServerOptions>();
  CLI::App* cmd = app.add_subcommand("serve", "Serve the JSON API and web pages");
  add_common(cmd, *c, false);
  cmd->add_option("--host", o->host, "Address to listen on (default 127.0.0.1)");
  cmd->add_option("--port", o->port, "Port (0: pick a free one)");
  cmd->add_option("--token", o->token, "Bearer token that enables POST /api/import (default $KINDEX_TOKEN; none: read-only)");
  cmd->add_option("--max-body", o->max_body_bytes, "Largest request body in bytes");
  cmd->add_option("--rate", o->requests_per_minute, "Requests per minute per client address");
  cmd->callback([&registry, c, o] {
    registry.selected = [c, o] {
      if (o->token.empty() && std::getenv("KINDEX_TOKEN")) o->token = std::getenv("KINDEX_TOKEN");
      auto s = open_store(c->store, false);
      web::IndexServer server(*s, *o);
      int port = server.bind();
      std::cout << "kindex serve: http://" << o->host << ":" << port << "/ (store " << store_display(store_uri(c->store)) << ", "
                << (o->token.empty() ? "read-only" : "imports need the token") << ")" << std::endl;
      server.listen();
      return 0;
    };
  });
}

}  // namespace kindex::cli
