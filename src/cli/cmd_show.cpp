// `kindex show`: an operation, workload, implementation or run (store's *_view).
#include <CLI/CLI.hpp>

#include <iomanip>
#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "cli/index_common.hpp"
#include "store/query.hpp"
#include "store/store.hpp"

namespace kindex::cli {

namespace {

using nlohmann::json;

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

void add_show_command(CLI::App& app, Registry& registry) {
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
        // kindex rerun: the reruns of this run, and the run this one re-measured.
        auto measured = [](const json& run) {
          return (run.value("status", "") == "passed" ? ns(run["latencyNs"]) + " " + run["statistic"].dump()
                                                       : run.value("status", "")) +
                 " on " + (run["gpu"].is_string() ? run["gpu"].get<std::string>() : "an unknown GPU");
        };
        for (const auto& l : r["reruns"])
          std::cout << "  rerun " << l["rerun"]["id"].get<std::string>().substr(0, 8) << ": " << measured(l["rerun"])
                    << (l["sameImplementation"].get<bool>() ? "" : " (another implementation)") << ", "
                    << l["rerun"]["observedAt"].get<std::string>().substr(0, 10) << "\n";
        if (r["rerunOf"].is_object())
          std::cout << "  rerun of run "
                    << (r["rerunOf"].value("inStore", false) ? r["rerunOf"]["id"].get<std::string>().substr(0, 8) + ": reported " +
                                                                   measured(r["rerunOf"])
                                                             : r["rerunOf"]["runDigest"].get<std::string>() + " (not in this store)")
                    << "\n";
        // Signed attestations naming this run, as the store checked them (store/attestations.hpp).
        for (const auto& a : r["attestations"])
          std::cout << "  attestation " << a["id"].get<std::string>().substr(7, 12) << " by "
                    << a.value("keyId", json("?")).get<std::string>() << ": "
                    << (a["status"] == "verified" ? a.value("verdict", json("")).get<std::string>()
                                                  : "not verified (" + a["status"].get<std::string>() + ")")
                    << "\n";
        std::cout << "  " << r["citation"].get<std::string>() << "\n";
      }
      return 0;
    };
  });
}

}  // namespace kindex::cli
