// `kindex resolve`: the fastest implementations of one exact workload, and near matches (store::resolve).
#include <CLI/CLI.hpp>

#include <iomanip>
#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "cli/index_common.hpp"
#include "core/error.hpp"
#include "store/query.hpp"
#include "store/store.hpp"

namespace kindex::cli {

using nlohmann::json;

void add_resolve_command(CLI::App& app, Registry& registry) {
  auto c = std::make_shared<Common>();
  auto q = std::make_shared<store::ResolveQuery>();
  auto axes = std::make_shared<std::vector<std::string>>();
  CLI::App* cmd = app.add_subcommand("resolve", "Which implementation is fastest for this exact workload?");
  add_common(cmd, *c);
  cmd->add_option("operation", q->operation, "Operation or definition name")->required();
  cmd->add_option("axes", *axes, "Axis values as name=value");
  cmd->add_option("--dtype", q->dtype, "A dtype the workload uses (e.g. bf16)");
  cmd->add_option("--gpu", q->gpu, "GPU (substring of the product name, e.g. H200)");
  cmd->callback([&registry, c, q, axes] {
    registry.selected = [c, q, axes] {
      for (const auto& a : *axes) {
        auto eq = a.find('=');
        if (eq == std::string::npos) throw Error("resolve", "axes", a, "expected name=value");
        try {
          q->axes[a.substr(0, eq)] = std::stoll(a.substr(eq + 1));
        } catch (const std::exception&) {
          throw Error("resolve", "axes", a, "the value must be an integer");
        }
      }
      auto s = open_store(c->store, false);
      json r = store::resolve(*s, *q);
      if (c->json_output) {
        std::cout << r.dump(2) << "\n";
        return 0;
      }
      if (!r["ambiguous"].empty()) {
        std::cout << "these axes match " << r["ambiguous"].size() << " workloads; give more axes to pick one:\n";
        for (const auto& w : r["ambiguous"]) std::cout << "  " << w["label"].get<std::string>() << "\n";
      } else if (r["exact"].is_null()) {
        std::cout << "no exact workload match\n";
      } else {
        std::cout << "exact workload: " << r["exact"]["label"].get<std::string>() << "\n";
        int n = 0;
        for (const auto& e : r["exact"]["ranked"]) {
          std::cout << "  " << ++n << ". " << std::left << std::setw(12) << ns(e["latencyNs"]) << std::setw(13)
                    << e["evidence"].get<std::string>() << std::setw(14) << e["gpu"].get<std::string>()
                    << e["implementation"].get<std::string>() << "  run " << e["shortId"].get<std::string>() << std::right << "\n";
        }
      }
      if (!r["near"].empty()) std::cout << "near matches:\n";
      for (const auto& n : r["near"]) {
        std::string facets;
        for (const auto& d : n["differs"]) facets += d["facet"].get<std::string>() + "=" + d["have"].dump() + " ";
        std::cout << "  " << n["label"].get<std::string>() << "  [differs: " << facets << "]";
        if (!n["best"].is_null()) std::cout << "  best " << ns(n["best"]["latencyNs"]) << " " << n["best"]["implementation"].get<std::string>();
        std::cout << "\n";
      }
      return 0;
    };
  });
}

}  // namespace kindex::cli
