// `kindex serving`: serving evidence (store/query.hpp's serving questions): the models and GPUs, one model's
// throughput-latency Pareto front on a GPU, one serving run, and resolve-serving.
#include <CLI/CLI.hpp>

#include <array>
#include <cstdio>
#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "cli/index_common.hpp"
#include "store/query.hpp"
#include "store/store.hpp"

namespace kindex::cli {

using nlohmann::json;

namespace {

std::string number(const json& v, const char* format = "%.0f") {
  if (!v.is_number()) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v.get<double>());
  return buf;
}

std::string latency(const json& run, const char* metric) {
  const json& l = run["latency"].value(metric, json());
  if (!l.is_object()) return "-";
  return (l["bound"].get<bool>() ? "<=" : "") + number(l["ms"], "%g") + " ms";
}

// One run per line: per-GPU and system throughput, p99 TTFT and TPOT, configuration, workload.
void print_run_line(const json& r) {
  std::cout << "  " << number(r["outputTokensPerSecondPerAccelerator"]) << " tok/s/GPU  (" << number(r["outputTokensPerSecond"])
            << " on " << (r["accelerators"].is_number() ? r["accelerators"].dump() : "?") << ")  TTFT " << latency(r, "ttft_ms")
            << "  TPOT " << latency(r, "tpot_ms") << "  " << r["configuration"].get<std::string>() << " · "
            << r["workload"].get<std::string>() << "  [" << r["id"].get<std::string>().substr(0, 8) << "]\n";
}

void print_overview(const json& v) {
  std::cout << v["counts"]["serving_runs"] << " serving runs\n";
  for (const auto& p : v["modelsAndGpus"])
    std::cout << "  " << p["model"].get<std::string>() << " · " << (p["gpu"].is_string() ? p["gpu"].get<std::string>() : "?") << ": "
              << p["runs"] << " runs, " << p["configurations"] << " configurations\n";
}

void print_view(const json& v) {
  std::cout << v["model"]["name"].get<std::string>() << " on " << v["gpus"].size() << " GPU model(s); " << v["plotted"].get<std::string>()
            << "\nPareto front:\n";
  for (const auto& id : v["front"])
    for (const auto& p : v["points"])
      if (p["id"] == id) print_run_line(p);
  std::cout << v["points"].size() << " runs plotted, " << v["notPlotted"].size() << " not (no such latency or throughput)\n";
}

void print_run(const json& v) {
  std::cout << v["run"]["title"].get<std::string>() << " (" << v["run"]["status"].get<std::string>() << ")\n";
  print_run_line(v["run"]);
  for (const auto& m : v["run"]["measurements"])
    std::cout << "    " << m["metric"].get<std::string>() << " " << m["statistic"].get<std::string>() << " = " << m["value"] << " "
              << m["unit"].get<std::string>() << "\n";
}

void print_resolve(const json& v) {
  if (v["best"].is_null()) {
    std::cout << "No configuration's valid run meets this SLO on these GPUs.\n";
  } else {
    std::cout << "Best: " << v["best"]["configuration"].get<std::string>() << " (" << v["best"]["stack"].get<std::string>() << ")\n";
  }
  for (const auto& c : v["configurations"]) print_run_line(c);
}

}  // namespace

void add_serving_command(CLI::App& app, Registry& registry) {
  CLI::App* serving = app.add_subcommand("serving", "Serving evidence: models and GPUs, Pareto fronts, runs, resolve-serving");
  serving->require_subcommand(1);
  add_query_command(*serving, registry, "list", "The models and the GPUs they were served on", store::serving_overview,
                    print_overview);

  auto view = std::make_shared<std::array<std::string, 3>>();
  CLI::App* show = add_query_command(
      *serving, registry, "show", "One model's runs on a GPU with the throughput-latency Pareto front",
      [view](store::Store& s) { return store::serving_view(s, (*view)[0], (*view)[1], (*view)[2]); }, print_view);
  show->add_option("model", (*view)[0], "Model (slug, name or a unique part of either)")->required();
  show->add_option("gpu", (*view)[1], "GPU (its exact name, else every GPU whose name contains this)");
  show->add_option("--latency", (*view)[2], "Latency axis: ttft (default) or tpot, at p99");

  add_query_command(*serving, registry, "run", "One serving run with its measurements and manifests", "run",
                    "Serving run id, 8+ character prefix or runDigest", store::serving_run_view, print_run)
      ->required();

  auto q = std::make_shared<store::ServingResolveQuery>();
  // The limits given (a limit that is given is checked, whatever its value).
  struct Limits {
    double ttft = 0, tpot = 0;
    CLI::Option *ttft_option = nullptr, *tpot_option = nullptr;
  };
  auto limits = std::make_shared<Limits>();
  CLI::App* resolve = add_query_command(
      *serving, registry, "resolve", "For this model and GPU, the configurations that meet the SLO at the highest throughput",
      [q, limits](store::Store& s) {
        store::ServingResolveQuery query = *q;
        if (limits->ttft_option->count()) query.slo_ms["ttft"] = limits->ttft;
        if (limits->tpot_option->count()) query.slo_ms["tpot"] = limits->tpot;
        return store::resolve_serving(s, query);
      },
      print_resolve);
  resolve->add_option("model", q->model, "Model (slug, name or a unique part of either)")->required();
  resolve->add_option("gpu", q->gpu, "GPU (its exact name, else every GPU whose name contains this)");
  limits->ttft_option = resolve->add_option("--ttft", limits->ttft, "p99 time to first token limit, ms");
  limits->tpot_option = resolve->add_option("--tpot", limits->tpot, "p99 time per output token limit, ms");
  resolve->add_option("--limit", q->limit, "Configurations listed (default 10)");
}

}  // namespace kindex::cli
