#pragma once
// What the index subcommands (cmd_import, cmd_search, cmd_resolve, cmd_show, cmd_records, cmd_compare,
// cmd_export, cmd_serve) share: --store and --json, and how a latency prints. Each is a thin layer over
// store/query.hpp; --json prints exactly what the JSON API returns.
#include <CLI/CLI.hpp>

#include <functional>
#include <iostream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "store/store.hpp"
#include "web/pages.hpp"

namespace kindex::cli {

struct Common {
  std::string store;  // empty: store_uri's default
  bool json_output = false;
};

inline void add_common(CLI::App* cmd, Common& c, bool with_json = true) {
  cmd->add_option("--store", c.store,
                  std::string("Store: sqlite:PATH, PATH or postgresql://... (default $KINDEX_STORE or ") + kDefaultStore + ")");
  if (with_json) cmd->add_flag("--json", c.json_output, "Print JSON (the same as the HTTP API)");
}

// A latency in ns as the pages print it ("-" when absent).
inline std::string ns(const nlohmann::json& v) { return v.is_number() ? web::format_ns(v.get<double>()) : "-"; }

// An index query subcommand: --store and --json, then `query` on the store opened for reading; with --json its
// answer is printed as the JSON API returns it, else `print` writes the text form. The caller adds the command's own
// options to the returned subcommand (its state shared with `query`).
inline CLI::App* add_query_command(CLI::App& app, Registry& registry, const std::string& name,
                                   const std::string& description,
                                   std::function<nlohmann::json(store::Store&)> query,
                                   std::function<void(const nlohmann::json&)> print) {
  auto c = std::make_shared<Common>();
  CLI::App* cmd = app.add_subcommand(name, description);
  add_common(cmd, *c);
  cmd->callback([&registry, c, query, print] {
    registry.selected = [c, query, print] {
      auto s = open_store(c->store, false);
      const nlohmann::json answer = query(*s);
      if (c->json_output)
        std::cout << answer.dump(2) << "\n";
      else
        print(answer);
      return 0;
    };
  });
  return cmd;
}

// The same for a command of one positional argument (`argument`, described by `help`), handed to `query`.
inline CLI::Option* add_query_command(CLI::App& app, Registry& registry, const std::string& name,
                                      const std::string& description, const std::string& argument,
                                      const std::string& help,
                                      std::function<nlohmann::json(store::Store&, const std::string&)> query,
                                      std::function<void(const nlohmann::json&)> print) {
  auto value = std::make_shared<std::string>();
  CLI::App* cmd = add_query_command(
      app, registry, name, description, [value, query](store::Store& s) { return query(s, *value); },
      std::move(print));
  return cmd->add_option(argument, *value, help);
}

}  // namespace kindex::cli
