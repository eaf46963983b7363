// `kindex rerun`: from a stored run to one (implementation, workload) of the runner, then `kindex bench`'s own
// pipeline and sinks with the link to the original in the rerun's manifest labels.
#include "runner/rerun.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>

#include "runner/record/records.hpp"
#include "runner/execute/solution.hpp"
#include "catalog/builtin.hpp"
#include "core/error.hpp"
#include "evidence/digest.hpp"
#include "problem_manifest/problem_manifest.hpp"
#include "store/query.hpp"
#include "store/rows.hpp"
#include "store/store.hpp"

namespace kindex::runner {

using nlohmann::json;

namespace {

const char* kWhere = "kindex rerun";

std::string lower_snake(std::string s) {
  for (char& c : s) c = c == '-' || c == '.' || c == ' ' ? '_' : char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The harness whose protocol the run was measured under: its source-native block, else its protocol's
// comparability family (kindex's own and imported traces name the harness there), else the importer's origin.
std::string measured_source(const json& run_manifest, const std::string& origin) {
  const std::string native = store::member_or_empty(
      store::member_or_empty(store::member_or_empty(run_manifest, "run"), "spec"), "sourceNative").value("source", "");
  if (native == "flashinfer-bench" || native == "sol-execbench") return native;
  const json& comparability = store::member_or_empty(
      store::member_or_empty(store::member_or_empty(run_manifest, "protocol"), "spec"), "comparability");
  const std::string family = comparability.value("family", "");
  if (family.find("flashinfer_bench") != std::string::npos) return "flashinfer-bench";
  if (family.find("sol_execbench") != std::string::npos) return "sol-execbench";
  if (origin == "flashinfer-bench" || origin == "sol-execbench") return origin;
  return "";
}

// A solution file or library a kindex run named, when it is here with the bytes its manifest recorded.
bool file_matches(const std::string& path, const json& implementation) {
  const std::string recorded =
      store::member_or_empty(store::member_or_empty(implementation, "spec"), "source").value("contentDigest", "");
  std::error_code ec;
  if (recorded.empty() || !std::filesystem::is_regular_file(path, ec)) return false;
  return file_digest(path).digest == recorded;  // the digest kindex's records give the file (records.hpp)
}

// A solution file or library given for a run: the same implementation when the file is the source the run's
// manifest recorded, or (a harness's solution JSON) one of its sources is.
bool holds_recorded_source(const std::string& path, const json& implementation) {
  if (file_matches(path, implementation)) return true;
  const std::string recorded =
      store::member_or_empty(store::member_or_empty(implementation, "spec"), "source").value("contentDigest", "");
  std::ifstream in(path, std::ios::binary);
  if (!in || recorded.empty()) return false;
  const json solution = json::parse(in, nullptr, false);
  if (!solution.is_object() || !solution.contains("sources") || !solution["sources"].is_array()) return false;
  for (const auto& source : solution["sources"])
    if (source.is_object() && source.contains("content") && source["content"].is_string() &&
        "sha256:" + evidence::sha256_hex(source["content"].get<std::string>()) == recorded)
      return true;
  return false;
}

struct StoredImplementation {
  std::string origin, source, title, slug, description;
  json manifest;
};

// The --impl spec that runs the stored implementation here, and how it was chosen; Error naming it when none.
std::pair<std::string, std::string> map_implementation(const StoredImplementation& impl) {
  const std::string name = impl.title.empty() ? impl.slug : impl.title;
  if (impl.origin == "kindex") {
    // kindex's own run: its manifest is titled "<--impl spec> · <definition>" (records.cpp).
    const std::string spec = name.substr(0, name.find(" · "));
    const auto& builtins = builtin_implementation_names();
    if (std::find(builtins.begin(), builtins.end(), spec) != builtins.end() || is_peer(spec))
      return {spec, "kindex's own run of " + spec};
    for (const std::string prefix : {"external:", "solution:"}) {
      if (spec.rfind(prefix, 0) != 0) continue;
      if (file_matches(spec.substr(prefix.size()), impl.manifest))
        return {spec, "the file kindex's run named, with the bytes it recorded"};
      throw Error(kWhere, "implementation", spec,
                  "the file is not here with the bytes the run recorded: give it with --impl " + prefix + "PATH");
    }
    throw Error(kWhere, "implementation", spec, "not an implementation kindex knows: give one with --impl");
  }
  // Imported: the harness's solution name (and the baseline's description) says what it is.
  const std::string key = lower_snake(name + " " + impl.slug);
  const std::string about = lower_snake(impl.description);
  if (impl.source == "flashinfer-bench" && key.find("flashinfer") != std::string::npos &&
      (key.find("wrapper") != std::string::npos || key.find("decode") != std::string::npos)) {
    // FlashInfer-Bench's baselines call BatchDecodeWithPagedKVCacheWrapper (CUDA cores), or for group sizes its
    // decode kernels lack, BatchPrefillWithPagedKVCacheWrapper: the tensor-core kernels flashinfer-tc runs.
    const bool prefill = about.find("batchprefill") != std::string::npos;
    const std::string peer = prefill ? "flashinfer-tc" : "flashinfer";
    return {peer, "the built-in peer " + peer + " for FlashInfer's " + (prefill ? "prefill" : "decode") +
                      " wrapper solution " + name};
  }
  if (impl.source == "sol-execbench" && key.find("torch") != std::string::npos &&
      key.find("compile") != std::string::npos)
    return {"torch-compile", "the built-in peer torch-compile for SOL-ExecBench's torch.compile baseline " + name};
  if (key.rfind("kindex", 0) == 0) return {"kindex", "kindex's kernels for the harness's run of kindex's solution " + name};
  throw Error(kWhere, "implementation", name,
              "is not one kindex can obtain here (" + (impl.source.empty() ? impl.origin : impl.source) +
                  "): give its solution file with --impl solution:FILE or a library with --impl external:FILE");
}

// Whether a bundled workload's WorkloadCase has the stored one's axes (each axis both state is equal, and the
// stored one states every variable axis).
bool same_axes(const json& bundled_case, const json& stored_case, const catalog::Workload& w) {
  const json& a = store::member_or_empty(store::member_or_empty(bundled_case, "spec"), "axes");
  const json& b = store::member_or_empty(store::member_or_empty(stored_case, "spec"), "axes");
  for (const auto& [k, v] : a.items())
    if (b.contains(k) && b[k] != v) return false;
  for (const auto& [k, v] : w.axes)
    if (!b.contains(k) || b[k] != json(v)) return false;
  return true;
}

}  // namespace

std::map<std::string, std::string> RerunPlan::labels() const {
  return {{store::kReproducesRunLabel, original_digest},
          {store::kSameImplementationLabel, same_implementation ? "true" : "false"},
          {"rerun_implementation", evidence::clip_text(implementation_how, 200)},
          {"rerun_workload", workload_match}};
}

RerunPlan plan_rerun(store::Store& store, const RerunOptions& options) {
  if (options.run.empty()) throw Error(kWhere, "run", "", "give a run id, id prefix or runDigest");
  json view;
  try {
    view = store::run_view(store, options.run);
  } catch (const Error& e) {
    throw Error(kWhere, "run", options.run, e.problem() + " in this store");
  }
  const json& run = view["run"];
  RerunPlan plan;
  plan.original_id = run["id"];
  plan.original_digest = run["runDigest"];
  auto rows = store.db().query(
      "SELECT w.manifest, w.kind, o.semantic_digest, o.name, i.manifest, i.slug, i.title, r.origin, w.workload_digest, "
      "o.manifest "
      "FROM benchmark_runs r JOIN workloads w ON w.id = r.workload_id JOIN operations o ON o.id = w.operation_id "
      "JOIN implementations i ON i.id = r.implementation_id WHERE r.id = ?",
      {plan.original_id});
  const json workload = json::parse(rows.at(0).text(0));
  const std::string operation_digest = rows[0].text(2), operation_name = rows[0].text(3);
  StoredImplementation impl{rows[0].text(7), "", rows[0].is_null(6) ? "" : rows[0].text(6), rows[0].text(5), "",
                            json::parse(rows[0].text(4))};
  impl.description = store::member_or_empty(impl.manifest, "metadata").value("description", "");
  plan.original_implementation = impl.title.empty() ? impl.slug : impl.title;
  plan.source = impl.source = measured_source(view["manifest"], impl.origin);

  // The operation: a bundled problem with the same OperationSpec, else one with the same semantics (axes, inputs
  // and outputs; KernelIndex files SOL's L2/003 under another family and without its reference, for one).
  const json stored_operation = json::parse(rows[0].text(9));
  auto semantics = [](const json& operation) {
    const json& spec = store::member_or_empty(operation, "spec");
    return json{spec.value("axes", json()), spec.value("inputs", json()), spec.value("outputs", json())};
  };
  std::optional<catalog::Problem> problem;
  for (const auto& name : catalog::list_builtin()) {
    catalog::Problem p = catalog::builtin_problem(name);
    const evidence::Manifest bundled = problem_manifest::operation_spec(p.definition);
    if (bundled.digest == operation_digest) {
      problem = std::move(p);
      break;
    }
    if (!problem && semantics(bundled.document) == semantics(stored_operation)) problem = std::move(p);
  }
  if (!problem)
    throw Error(kWhere, "operation", operation_name,
                "is not a problem kindex's runner can run: its OperationSpec (" + operation_digest +
                    ") has the semantics of none of the bundled problems (`kindex bench --list`)");
  const catalog::Definition& def = problem->definition;
  plan.problem = def.name;
  const std::string def_source(catalog::source_name(def.source));
  if (!plan.source.empty() && plan.source != def_source)
    throw Error(kWhere, "run", plan.original_id,
                "was measured under " + plan.source + "'s protocol, and kindex's bundled " + def.name + " follows " +
                    def_source + "'s: a rerun would not be under the run's own protocol");
  if (plan.source.empty()) plan.source = def_source;

  // The workload: the same WorkloadCase, else the same axes (or the one --workload names among the bundled ones).
  if (rows[0].text(1) != "WorkloadCase")
    throw Error(kWhere, "workload", view["workload"]["label"].get<std::string>(),
                "is a " + rows[0].text(1) + ": kindex rerun re-measures one workload (run its cases with kindex bench)");
  const evidence::Manifest op = problem_manifest::operation_spec(def);
  const std::string label = view["workload"]["label"].get<std::string>();
  const std::string stored_digest = rows[0].text(8);
  std::vector<const catalog::Workload*> matches;
  const catalog::Workload* exact = nullptr;
  for (const auto& w : problem->workloads) {
    const evidence::Manifest bundled = problem_manifest::workload_case(def, w, op);
    if (bundled.digest == stored_digest && !exact) exact = &w;
    if (bundled.digest == stored_digest || same_axes(bundled.document, workload, w)) matches.push_back(&w);
  }
  const catalog::Workload* chosen = nullptr;
  if (!options.workload.empty()) {
    auto named = select_workloads(*problem, options.workload);
    if (named.size() != 1 || std::find(matches.begin(), matches.end(), named[0]) == matches.end())
      throw Error(kWhere, "--workload", options.workload,
                  "must name one bundled workload of " + def.name + " with the run's axes (" + label + ")");
    chosen = named[0];
  } else if (exact) {
    chosen = exact;
  } else if (matches.size() == 1) {
    chosen = matches[0];
  } else if (matches.empty()) {
    throw Error(kWhere, "workload", label,
                "is none of the " + std::to_string(problem->workloads.size()) + " bundled workloads of " + def.name +
                    " (same digest or same axes): the runner has no inputs for it");
  } else {
    throw Error(kWhere, "workload", label,
                std::to_string(matches.size()) + " bundled workloads of " + def.name +
                    " have these axes: choose one with --workload (uuid)");
  }
  plan.workload_uuid = chosen->uuid;
  plan.workload_match = chosen == exact ? "same_workload" : "same_axes";

  if (!options.implementation.empty()) {
    const std::string& given = options.implementation;
    check_implementation_spec(given);
    plan.implementation = given;
    std::string mapped;
    try {
      mapped = map_implementation(impl).first;
    } catch (const Error&) {
    }
    const bool file = given.rfind("solution:", 0) == 0 || given.rfind("external:", 0) == 0;
    plan.same_implementation = given == mapped || (file && holds_recorded_source(given.substr(9), impl.manifest));
    plan.implementation_how = "given with --impl " + given + " for " + plan.original_implementation +
                              (plan.same_implementation ? " (the same implementation)" : " (another implementation)");
  } else {
    std::tie(plan.implementation, plan.implementation_how) = map_implementation(impl);
  }
  return plan;
}

RerunOutcome run_rerun(const RerunPlan& plan, const RerunOptions& options, std::ostream& out) {
  catalog::Problem problem = catalog::builtin_problem(plan.problem);
  const catalog::Workload* workload = nullptr;
  for (const auto& w : problem.workloads)
    if (w.uuid == plan.workload_uuid) workload = &w;
  if (!workload) throw Error(kWhere, "workload", plan.workload_uuid, "not a bundled workload of " + plan.problem);
  std::vector<WorkItem> items = {{&problem.definition, workload}};
  BenchOptions bench = options.bench;
  bench.implementations = {plan.implementation};
  bench.peers.clear();
  RecordWriter writer(items, options.output);
  writer.add_sink(make_console_sink(out, options.json, options.output, writer.summary()));
  const auto labels = plan.labels();
  RerunOutcome outcome{plan, run_bench(items, bench, [&](const RunResult& r, const Environment& env) {
                         RunResult linked = r;
                         linked.labels.insert(labels.begin(), labels.end());  // beside the run's own (its GPU)
                         writer.add(linked, env);
                       })};
  for (auto& r : outcome.report.results) r.labels.insert(labels.begin(), labels.end());
  writer.finish(outcome.report);
  if (auto missing = outcome.report.not_available.find(plan.implementation); missing != outcome.report.not_available.end())
    throw Error(kWhere, "implementation", plan.implementation,
                "is not installed here (" + missing->second + "): nothing was measured or recorded");
  return outcome;
}

}  // namespace kindex::runner
