// `kindex follow KIND VALUE...`, `kindex unfollow KIND VALUE...` (KIND: operation, cohort, gpu, model or project)
// and `kindex feed`: what changed for the things followed, newest first, as lines, JSON (--json, the API's
// /api/feed) or Atom (--atom, what /feed.xml serves). Follows are kept in the store (store/feed.hpp).
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "cli/index_common.hpp"
#include "core/error.hpp"
#include "store/feed.hpp"
#include "web/atom.hpp"

namespace kindex::cli {

namespace {

const char* kKindHelp = "operation (slug, name or alias) | cohort (comparisonKey) | gpu (text within the hardware "
                        "model, e.g. H200) | model (as in the tag model:NAME) | project (slug or id)";

void print_follows(store::Store& s) {
  const auto all = store::follows(s);
  if (all.empty()) std::cout << "following nothing: `kindex follow KIND VALUE` (" << kKindHelp << ")\n";
  for (const auto& f : all) std::cout << f.kind << " " << f.label << "\n";
}

}  // namespace

void add_follow_command(CLI::App& app, Registry& registry) {
  for (const bool add : {true, false}) {
    auto store = std::make_shared<std::string>();
    auto kind = std::make_shared<std::string>();
    auto values = std::make_shared<std::vector<std::string>>();
    CLI::App* cmd = app.add_subcommand(add ? "follow" : "unfollow",
                                       add ? "Follow operations, cohorts, GPUs, models or projects (no arguments: "
                                             "list what is followed); `kindex feed` shows what changed for them"
                                           : "Stop following something");
    cmd->add_option("kind", *kind, kKindHelp);
    cmd->add_option("values", *values, "What to follow of that kind");
    if (!add) {
      cmd->get_option("kind")->required();
      cmd->get_option("values")->required();
    }
    cmd->add_option("--store", *store,
                    std::string("Store: sqlite:PATH, PATH or postgresql://... (default $KINDEX_STORE or ") +
                        kDefaultStore + ")");
    cmd->callback([&registry, add, store, kind, values] {
      registry.selected = [add, store, kind, values] {
        auto s = open_store(*store, false);
        if (add && kind->empty()) {
          print_follows(*s);
          return 0;
        }
        if (values->empty()) throw Error(add ? "kindex follow" : "kindex unfollow", *kind, "", "give what to follow");
        for (const auto& v : *values) {
          if (add) {
            const store::Follow f = store::resolve_follow(*s, *kind, v);
            std::cout << (store::add_follow(*s, f) ? "following " : "already following ") << f.kind << " " << v << "\n";
          } else {
            std::cout << (store::remove_follow(*s, *kind, v) ? "unfollowed " : "was not following ") << *kind << " "
                      << v << "\n";
          }
        }
        return 0;
      };
    });
  }
}

void add_feed_command(CLI::App& app, Registry& registry) {
  auto common = std::make_shared<Common>();
  auto query = std::make_shared<store::FeedQuery>();
  auto atom = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand(
      "feed", "What changed for what you follow, newest first: new runs, reruns, new records, records that moved");
  add_common(cmd, *common);
  cmd->add_option("--since", query->since, "Only what happened at or after this UTC date or date-time");
  cmd->add_option("--limit", query->limit, "At most this many entries (default 200)")->check(CLI::Range(1, 100000));
  cmd->add_flag("--atom", *atom, "Print the Atom document `kindex serve` serves at /feed.xml");
  cmd->callback([&registry, common, query, atom] {
    registry.selected = [common, query, atom] {
      auto s = open_store(common->store, false);
      const nlohmann::json f = store::feed(*s, *query);
      if (*atom) {
        std::cout << web::atom_feed(f, "", "/feed.xml", "kindex: followed");
      } else if (common->json_output) {
        std::cout << f.dump(2) << "\n";
      } else {
        if (f["follows"].empty()) print_follows(*s);
        for (const auto& e : f["events"])
          std::cout << e["at"].get<std::string>() << "  " << web::feed_event_title(e) << "  ["
                    << e["href"].get<std::string>() << "]\n";
        if (!f["follows"].empty() && f["events"].empty()) std::cout << "nothing new for what you follow\n";
      }
      return 0;
    };
  });
}

}  // namespace kindex::cli
