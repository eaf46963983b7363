// The index's command-line door: `kindex import`, `search`, `resolve`, `show`, `records`, `leaderboard`, `compare`, `export`
// and `serve`. Each is a thin layer over store/query.hpp; --json prints exactly what the JSON API returns.
#include <CLI/CLI.hpp>

#include <csignal>
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>

#include "cli/commands.hpp"
#include "core/error.hpp"
#include "store/export.hpp"
#include "store/import.hpp"
#include "store/query.hpp"
#include "store/store.hpp"
#include "web/pages.hpp"
#include "web/server.hpp"

namespace kindex::cli {
namespace {

using nlohmann::json;

struct Common {
  std::string store;  // empty: store_uri's default
  bool json_output = false;
};

void add_common(CLI::App* cmd, Common& c, bool with_json = true) {
  cmd->add_option("--store", c.store,
                  std::string("Store: sqlite:PATH, PATH or postgresql://... (default $KINDEX_STORE or ") + kDefaultStore + ")");
  if (with_json) cmd->add_flag("--json", c.json_output, "Print JSON (the same as the HTTP API)");
}

std::string ns(const json& v) { return v.is_number() ? web::format_ns(v.get<double>()) : "-"; }

void print_cohort(const json& c) {
  std::cout << "  cohort " << c["comparisonKey"].get<std::string>().substr(0, 23) << "  GPU " << c["gpu"].get<std::string>()
            << "  " << c["environmentSummary"].get<std::string>() << "\n";
  if (c.contains("floor")) {
    std::cout << "    estimated floor " << ns(c["floor"]["ns"]);
    if (c.contains("recordAboveFloor")) std::cout << ", record " << std::fixed << std::setprecision(2) << c["recordAboveFloor"].get<double>() << "x above it";
    std::cout << " (headroom-v1)\n";
  }
  for (const auto& r : c["runs"]) {
    std::cout << "    #" << r["rank"] << "  " << std::left << std::setw(12) << ns(r["latencyNs"]) << std::setw(8)
              << (std::to_string(r["xOfFirst"].get<double>()).substr(0, 4) + "x") << std::setw(13) << r["evidence"].get<std::string>()
              << r["implementation"].get<std::string>() << "  run " << r["shortId"].get<std::string>() << std::right << "\n";
  }
}

}  // namespace

void add_index_commands(CLI::App& app, Registry& registry) {
  // import
  {
    auto c = std::make_shared<Common>();
    auto files = std::make_shared<std::vector<std::string>>();
    auto opts = std::make_shared<store::ImportOptions>();
    CLI::App* cmd = app.add_subcommand("import", "Import KernelIndex exports/manifests, FlashInfer-Bench/SOL-ExecBench traces, kindex run records");
    add_common(cmd, *c);
    cmd->add_option("files", *files, "Files or manifest directories")->required();
    cmd->add_option("--definitions", opts->definitions, "Definition JSON files or directories (for traces)");
    cmd->add_option("--solutions", opts->solutions, "FlashInfer-Bench solution JSON files or directories (for traces)");
    cmd->add_option("--source", opts->source, "Trace source: flashinfer-bench or sol-execbench (default: guess)");
    cmd->callback([&registry, c, files, opts] {
      registry.selected = [c, files, opts] {
        auto s = open_store(c->store, true);
        store::ImportReport rep = store::import_files(*s, *files, *opts);
        for (const auto& w : rep.warnings) std::cerr << "warning: " << w << "\n";
        if (c->json_output) {
          std::cout << rep.to_json().dump(2) << "\n";
        } else {
          std::cout << "inserted " << rep.total_inserted() << " rows";
          for (const auto& [t, n] : rep.inserted) if (n) std::cout << ", " << t << " " << n;
          int64_t skipped = 0;
          for (const auto& [t, n] : rep.skipped) skipped += n;
          std::cout << "; already present " << skipped << "; record events appended " << rep.record_events << "\n";
        }
        return 0;
      };
    });
  }
  // search
  {
    auto c = std::make_shared<Common>();
    auto text = std::make_shared<std::string>();
    CLI::App* cmd = app.add_subcommand("search", "Find operations by name, alias, family or description");
    add_common(cmd, *c);
    cmd->add_option("text", *text, "Text to look for (empty: all)");
    cmd->callback([&registry, c, text] {
      registry.selected = [c, text] {
        auto s = open_store(c->store, false);
        json r = store::search(*s, *text);
        if (c->json_output) {
          std::cout << r.dump(2) << "\n";
        } else {
          for (const auto& o : r) {
            std::cout << std::left << std::setw(50) << o["name"].get<std::string>() << std::right << std::setw(6) << o["workloads"]
                      << " workloads " << std::setw(6) << o["runs"] << " runs\n";
          }
        }
        return 0;
      };
    });
  }
  // resolve
  {
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
  // show
  {
    auto c = std::make_shared<Common>();
    auto what = std::make_shared<std::string>();
    auto key = std::make_shared<std::string>();
    auto workload = std::make_shared<std::string>();
    CLI::App* cmd = app.add_subcommand("show", "Show an operation, workload, implementation or run");
    add_common(cmd, *c);
    cmd->add_option("what", *what, "operation | workload | implementation | run")
        ->required()
        ->check(CLI::IsMember({"operation", "workload", "implementation", "run"}));
    cmd->add_option("key", *key, "Name, slug, id, id prefix or digest")->required();
    cmd->add_option("--workload", *workload, "For an operation: the workload to show records for");
    cmd->callback([&registry, c, what, key, workload] {
      registry.selected = [c, what, key, workload] {
        auto s = open_store(c->store, false);
        json r = *what == "operation"        ? store::operation_view(*s, *key, *workload)
                 : *what == "workload"       ? store::workload_view(*s, *key)
                 : *what == "implementation" ? store::implementation_view(*s, *key)
                                             : store::run_view(*s, *key);
        if (c->json_output) {
          std::cout << r.dump(2) << "\n";
        } else if (*what == "operation") {
          std::cout << r["operation"]["title"].get<std::string>() << "  (" << r["eligibleRunsAllWorkloads"] << " eligible runs across "
                    << r["workloads"].size() << " workloads)\n";
          if (!r["selectedWorkload"].is_null()) std::cout << "workload: " << r["selectedWorkload"]["label"].get<std::string>() << "\n";
          for (const auto& co : r["cohorts"]) print_cohort(co);
        } else if (*what == "workload") {
          std::cout << r["operationName"].get<std::string>() << " · " << r["label"].get<std::string>() << "\n";
          for (const auto& co : r["cohorts"]) print_cohort(co);
        } else if (*what == "implementation") {
          std::cout << r["title"].get<std::string>() << " (" << r["operationName"].get<std::string>() << "), " << r["runs"].size() << " runs\n";
          for (const auto& run : r["runs"]) {
            std::cout << "  " << run["shortId"].get<std::string>() << "  " << run["status"].get<std::string>() << "  "
                      << ns(run["latencyNs"]) << "  " << run["gpu"].get<std::string>() << "\n";
          }
        } else {
          std::cout << "Run " << r["run"]["shortId"].get<std::string>() << ": " << r["title"].get<std::string>() << "\n"
                    << "  " << ns(r["run"]["latencyNs"]) << " " << r["run"]["statistic"].dump() << ", rank " << r["rank"].dump()
                    << " of " << r["cohortSize"] << ", evidence " << r["run"]["evidence"].get<std::string>() << "\n";
          if (r["speedupFactor"].is_number()) std::cout << "  speedup over reference " << r["speedupFactor"].get<double>() << "x\n";
          if (r["solScore"].is_number()) std::cout << "  SOL score " << r["solScore"].get<double>() << "\n";
          std::cout << "  " << r["citation"].get<std::string>() << "\n";
        }
        return 0;
      };
    });
  }
  // records
  {
    auto c = std::make_shared<Common>();
    auto op = std::make_shared<std::string>();
    CLI::App* cmd = app.add_subcommand("records", "Current records and their history per comparison group");
    add_common(cmd, *c);
    cmd->add_option("operation", *op, "Only this operation");
    cmd->callback([&registry, c, op] {
      registry.selected = [c, op] {
        auto s = open_store(c->store, false);
        json r = store::records(*s, *op);
        if (c->json_output) {
          std::cout << r.dump(2) << "\n";
          return 0;
        }
        for (const auto& rec : r) {
          std::cout << rec["operationName"].get<std::string>() << " · " << rec["workload"].get<std::string>() << "\n  record: ";
          if (rec["record"].is_null()) {
            std::cout << "none";
          } else {
            std::cout << ns(rec["record"]["latencyNs"]) << " " << rec["record"]["implementation"].get<std::string>() << " ("
                      << rec["record"]["gpu"].get<std::string>() << ")";
          }
          std::cout << "; " << rec["history"].size() << " events\n";
        }
        return 0;
      };
    });
  }
  // leaderboard
  {
    auto c = std::make_shared<Common>();
    auto q = std::make_shared<store::LeaderboardQuery>();
    CLI::App* cmd = app.add_subcommand("leaderboard", "Per implementation across an operation's workloads: average speedup over the baseline, pass rate, latency spread");
    add_common(cmd, *c);
    cmd->add_option("operation", q->operation, "Operation (name, slug or alias)")->required();
    cmd->add_option("--device", q->device, "Only runs on a GPU whose name contains this (e.g. H200)");
    cmd->add_option("--author", q->author, "Only implementations with an author (or project) containing this");
    cmd->add_option("--baseline", q->baseline, "Implementation (slug or id) the speedups are measured against");
    cmd->callback([&registry, c, q] {
      registry.selected = [c, q] {
        auto s = open_store(c->store, false);
        json r = store::leaderboard(*s, *q);
        if (c->json_output) {
          std::cout << r.dump(2) << "\n";
          return 0;
        }
        std::cout << r["operation"]["name"].get<std::string>() << ": speedup over "
                  << (r["baseline"].is_null() ? std::string("(no baseline)") : r["baseline"]["title"].get<std::string>()) << "\n";
        for (const auto& en : r["entries"]) {
          std::ostringstream speedup;
          if (en["avgSpeedup"].is_number()) speedup << std::fixed << std::setprecision(2) << en["avgSpeedup"].get<double>() << "x";
          std::cout << "  " << std::setw(3) << en["position"].get<int64_t>() << "  " << std::left << std::setw(9)
                    << (speedup.str().empty() ? "-" : speedup.str()) << std::setw(14)
                    << (std::to_string(en["passed"].get<int64_t>()) + "/" + std::to_string(en["runs"].get<int64_t>()) + " passed")
                    << std::setw(12) << ns(en["latency"].value("medianNs", json())) << en["title"].get<std::string>() << std::right << "\n";
        }
        return 0;
      };
    });
  }
  // compare
  {
    auto c = std::make_shared<Common>();
    auto a = std::make_shared<std::string>(), b = std::make_shared<std::string>();
    CLI::App* cmd = app.add_subcommand("compare", "Two runs side by side");
    add_common(cmd, *c);
    cmd->add_option("a", *a, "Run id, id prefix or digest")->required();
    cmd->add_option("b", *b, "Run id, id prefix or digest")->required();
    cmd->callback([&registry, c, a, b] {
      registry.selected = [c, a, b] {
        auto s = open_store(c->store, false);
        json r = store::compare(*s, *a, *b);
        if (c->json_output) {
          std::cout << r.dump(2) << "\n";
          return 0;
        }
        std::cout << "A " << r["a"]["title"].get<std::string>() << ": " << ns(r["a"]["run"]["latencyNs"]) << "\n"
                  << "B " << r["b"]["title"].get<std::string>() << ": " << ns(r["b"]["run"]["latencyNs"]) << "\n"
                  << (r["sameCohort"].get<bool>() ? "same comparison group" : "different comparison groups (not directly comparable)");
        if (r["ratioBOverA"].is_number()) std::cout << "; B/A = " << r["ratioBOverA"].get<double>();
        std::cout << "\n";
        for (const auto& d : r["differs"]) std::cout << "  differs: " << d["facet"].get<std::string>() << "\n";
        return 0;
      };
    });
  }
  // export
  {
    auto c = std::make_shared<Common>();
    auto out = std::make_shared<std::string>();
    CLI::App* cmd = app.add_subcommand("export", "Write the store as a KernelIndex export (.jsonl.zst or .jsonl)");
    add_common(cmd, *c);
    cmd->add_option("output", *out, "Output file")->required();
    cmd->callback([&registry, c, out] {
      registry.selected = [c, out] {
        auto s = open_store(c->store, false);
        json counts = store::export_store(*s, *out);
        if (c->json_output) {
          std::cout << counts.dump(2) << "\n";
        } else {
          for (const auto& [t, n] : counts.items()) std::cout << t << " " << n << "\n";
        }
        return 0;
      };
    });
  }
  // serve
  {
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
}

}  // namespace kindex::cli
