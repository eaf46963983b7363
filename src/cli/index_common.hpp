#pragma once
// What the index subcommands (cmd_import, cmd_search, cmd_resolve, cmd_show, cmd_records, cmd_compare,
// cmd_export, cmd_serve) share: --store and --json, and how a latency prints. Each is a thin layer over
// store/query.hpp; --json prints exactly what the JSON API returns.
#include <CLI/CLI.hpp>

#include <string>

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
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

}  // namespace kindex::cli
