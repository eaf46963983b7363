// `kindex rerun <run>`: re-measure a stored run on this machine and record the rerun linked to it
// (src/runner/rerun.hpp). A thin layer: the plan and the run are the runner's, the sentence the pages' own.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

#include "cli/commands.hpp"
#include "cli/index_common.hpp"
#include "runner/rerun.hpp"
#include "core/error.hpp"
#include "evidence/attestation.hpp"
#include "evidence/manifest.hpp"
#include "evidence/reader.hpp"
#include "runner/execute/solution.hpp"
#include "store/attestations.hpp"
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

// Signs what the store says of the rerun (store/attestations.hpp), keeps it with the run, trusts the signer's key in
// this store (whoever signs here records here) and writes the document to `path`.
json sign_rerun(store::Store& s, const std::string& rerun_id, const evidence::SigningKey& key,
                const std::string& key_file, const std::string& path) {
  json statement = store::attestation_claims(s, rerun_id);
  statement["signedAt"] = evidence::utc_timestamp_now();
  const evidence::Attestation a = evidence::sign_attestation(statement, key);
  store::trust_key(s, key.public_key_hex(), key_file);
  store::keep_attestation(s, a, "kindex rerun --sign");
  std::error_code ec;
  const auto dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  std::ofstream out(path, std::ios::binary);
  if (!(out << a.line() << "\n")) throw Error("kindex rerun", "--attestation", path, "cannot write the attestation");
  return {{"path", path}, {"id", a.digest()}, {"keyId", a.statement["keyId"]}, {"verdict", a.statement["verdict"]},
          {"gpu", a.statement["environment"]["gpu"]}};
}

}  // namespace

void add_rerun_command(CLI::App& app, Registry& registry) {
  auto o = std::make_shared<runner::RerunOptions>();
  auto store = std::make_shared<std::string>();
  auto out_dir = std::make_shared<std::string>("kindex-results");
  auto events = std::make_shared<bool>(false);
  auto sign = std::make_shared<std::string>();
  auto attestation = std::make_shared<std::string>();
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
  cmd->add_option("--sign", *sign,
                  "Sign an attestation of the rerun with this Ed25519 private key (`kindex keygen`): the two runs' "
                  "digests, this environment and the verdict, kept with the run");
  cmd->add_option("--attestation", *attestation,
                  "Where to write the signed attestation (default OUT/attestations/<rerun id>.attestation.json, or "
                  "the working directory when --out is '')");

  cmd->callback([&registry, o, store, out_dir, events, sign, attestation] {
    registry.selected = [o, store, out_dir, events, sign, attestation] {
      // A key that cannot sign is refused before anything is measured.
      std::optional<evidence::SigningKey> key;
      if (!sign->empty()) key = evidence::SigningKey::from_pem(evidence::read_file_bytes(*sign), *sign);
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
      json signed_by;
      if (key && !link.is_null()) {
        const std::string rerun_id = link["rerun"]["id"];
        const std::string path = !attestation->empty() ? *attestation
                                 : out_dir->empty()    ? rerun_id + ".attestation.json"
                                                       : *out_dir + "/attestations/" + rerun_id + ".attestation.json";
        signed_by = sign_rerun(*s, rerun_id, *key, *sign, path);
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
                          {"rerun", rerun},
                          {"attestation", signed_by}}
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
      if (signed_by.is_object())
        std::cout << "attestation " << signed_by["path"].get<std::string>() << ": "
                  << (signed_by["verdict"] == "replicated" ? "replicated" : "not replicated") << ", signed by "
                  << signed_by["keyId"].get<std::string>() << " on " << signed_by["gpu"].get<std::string>()
                  << " (check it with `kindex attest verify " << signed_by["path"].get<std::string>() << "`)\n";
      return passed ? 0 : 1;
    };
  });
}

}  // namespace kindex::cli
