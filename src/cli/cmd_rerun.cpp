// `kindex rerun <run>`: re-measure a stored run on this machine and record the rerun linked to it
// (src/runner/rerun.hpp). A thin layer: the plan and the run are the runner's, the sentence the pages' own.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <iostream>
#include <memory>
#include <sstream>

#include "cli/commands.hpp"
#include "cli/index_common.hpp"
#include "runner/rerun.hpp"
#include "runner/execute/solution.hpp"
#include "store/query.hpp"
#include "store/store.hpp"

namespace kindex::cli {

namespace {

using nlohmann::json;

std::string measured(const json& run) {
  std::string what = run.value("status", "") == "passed" && run["latencyNs"].is_number()
                         ? ns(run["latencyNs"]) + (run["statistic"].is_string() ? " (" + run["statistic"].get<std::string>() + ")" : "")
                         : run.value("status", "");
  return what + " on " + (run["gpu"].is_string() ? run["gpu"].get<std::string>() : std::string("an unknown GPU"));
}

}  // namespace

void add_rerun_command(CLI::App& app, Registry& registry) {
  auto o = std::make_shared<runner::RerunOptions>();
  auto store = std::make_shared<std::string>();
  auto out_dir = std::make_shared<std::string>("kindex-results");
  auto events = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand(
      "rerun", "Re-measure a stored run on this machine under its own protocol and record the rerun linked to it");
  cmd->add_option("run", o->run, "The run: id, id prefix (8+ characters) or runDigest")->required();
  cmd->add_option("--impl", o->implementation,
                  "Run this instead of the implementation kindex maps the run's to: kindex | gpu-reference | "
                  "cpu-reference | external:PATH.so | solution:PATH.json | " + runner::peer_names_text());
  cmd->add_option("--workload", o->workload,
                  "The bundled workload (uuid, prefix or index) when several have the run's axes");
  cmd->add_option("--store", *store,
                  std::string("Store holding the run, where the rerun is recorded (default $KINDEX_STORE or ") +
                      kDefaultStore + ")");
  cmd->add_option("--out", *out_dir, "Output directory for the rerun's trace, manifests and samples ('' = none)")
      ->default_val("kindex-results");
  cmd->add_option("--trials", o->bench.trials, "Correctness rounds (default: the run's source's protocol)")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--iterations", o->bench.iterations, "Timed iterations per trial (50; 5 on the CPU path)")
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--warmup", o->bench.warmup, "Warm-up calls (10; 1 on the CPU path)")->check(CLI::Range(0, 100000));
  cmd->add_option("--timeout", o->bench.timeout_s, "Seconds before the run is a timeout")
      ->check(CLI::Range(0.001, 1e6))
      ->default_val(900);
  cmd->add_flag("--events", *events, "Time with CUDA events instead of the CUPTI activity API");
  cmd->add_flag("--json", o->json, "Print the plan and the rerun's run view (with its link) as JSON");

  cmd->callback([&registry, o, store, out_dir, events] {
    registry.selected = [o, store, out_dir, events] {
      auto s = open_store(*store, false);  // the run must be there; the rerun goes beside it
      runner::RerunPlan plan = runner::plan_rerun(*s, *o);
      std::cerr << "kindex rerun: run " << plan.original_id.substr(0, 8) << " (" << plan.original_implementation
                << ") as " << plan.implementation << " on " << plan.problem << " workload " << plan.workload_uuid
                << " (" << plan.workload_match << "), " << plan.source << " protocol; implementation: "
                << plan.implementation_how << "\n";
      o->output = {*out_dir, store_uri(*store)};
      o->bench.prefer_cupti = !*events;
      o->bench.progress = !o->json && isatty(STDERR_FILENO);
      std::ostringstream table;
      runner::RerunOutcome outcome = runner::run_rerun(plan, *o, o->json ? table : std::cout);
      const bool passed = !outcome.report.any_correctness_failure();
      // The rerun as the store now links it: the one observed when this one was, else the newest (the links are in
      // observation order).
      json original = store::run_view(*s, plan.original_id);
      json link;
      for (const auto& l : original["reruns"]) {
        link = l;
        if (!outcome.report.results.empty() && l["rerun"]["observedAt"] == outcome.report.results[0].observed_at) break;
      }
      if (o->json) {
        json rerun = link.is_null() ? json() : store::run_view(*s, link["rerun"]["id"].get<std::string>());
        std::cout << json{{"plan",
                           {{"originalId", plan.original_id}, {"originalDigest", plan.original_digest},
                            {"problem", plan.problem}, {"workload", plan.workload_uuid},
                            {"workloadMatch", plan.workload_match}, {"implementation", plan.implementation},
                            {"implementationHow", plan.implementation_how},
                            {"sameImplementation", plan.same_implementation}, {"source", plan.source}}},
                          {"passed", passed},
                          {"original", original["run"]},
                          {"rerun", rerun}}
                         .dump(2)
                  << "\n";
        return passed ? 0 : 1;
      }
      if (link.is_null()) {
        std::cout << "\nkindex rerun: the rerun was not recorded (see above)\n";
        return 1;
      }
      std::cout << "\nreported " << measured(link["original"]) << "; rerun here"
                << (link["sameImplementation"].get<bool>() ? "" : " with " + plan.implementation + " instead") << ": "
                << measured(link["rerun"])
                << " (kindex rerun, " << link["rerun"]["observedAt"].get<std::string>().substr(0, 10) << ")\n"
                << "rerun " << link["rerun"]["id"].get<std::string>() << " of run " << plan.original_id
                << "; the original's evidence is now " << original["run"]["evidence"].get<std::string>()
                << ": `kindex show run " << link["rerun"]["id"].get<std::string>().substr(0, 8) << "`\n";
      return passed ? 0 : 1;
    };
  });
}

}  // namespace kindex::cli
