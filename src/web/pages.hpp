#pragma once
// HTML pages and SVG plots rendered on the server from the same JSON the API returns (store/query.hpp).
// Every string that comes from data goes through html_escape.
#include <nlohmann/json.hpp>

#include <string>

namespace kindex::web {

std::string html_escape(const std::string& text);
// "359.8 µs", "6.96 µs", "1.23 ms", "850 ns".
std::string format_ns(double ns);
// "3.44×", "36.4×", "364×": three significant digits.
std::string format_ratio(double x);

// The home page's search as you type (served as /assets/search.js; the page works without it: the form submits).
const std::string& search_script();
std::string home_page(const nlohmann::json& operations, const std::string& query);
// The operation page's two plots (latency per workload, records against their floors): they show the operation's
// workloads and implementations only, so every workload's page of one operation has the same ones.
struct OperationPlots {
  std::string latency, floors;
};
OperationPlots operation_plots(const nlohmann::json& operation_view);
// `plots`, when given, are operation_plots(view) made earlier (the server keeps them until the store changes).
std::string operation_page(const nlohmann::json& view, const OperationPlots* plots = nullptr);
std::string run_page(const nlohmann::json& view);
std::string workload_page(const nlohmann::json& view);
std::string implementation_page(const nlohmann::json& view);
std::string compare_page(const nlohmann::json& view);
std::string resolve_page(const nlohmann::json& view);
// FlashInfer-Bench's leaderboard for one operation (store::leaderboard's JSON) with its filter form.
std::string leaderboard_page(const nlohmann::json& view);
std::string records_page(const nlohmann::json& records, const std::string& operation);
std::string error_page(int status, const std::string& message);

// Serving evidence (pages_serving.cpp, from store::serving_overview / serving_view / serving_run_view /
// resolve_serving): the models and GPUs, one model's runs on its GPUs with the Pareto plot, one run, resolve-serving.
std::string serving_overview_page(const nlohmann::json& overview);
std::string serving_page(const nlohmann::json& view);
std::string serving_run_page(const nlohmann::json& view);
std::string serving_resolve_page(const nlohmann::json& view);
// Output tokens/s per GPU against p99 latency (log scale): each configuration's runs in its colour with its Pareto
// front as a line, the front of all runs dashed, runs placed at their workload's SLO bound drawn hollow.
std::string serving_plot_svg(const nlohmann::json& view);

// Latency of each implementation on each workload (log scale), and each workload's record against its
// headroom-v1 floor.
std::string latency_plot_svg(const nlohmann::json& operation_view);
std::string floor_plot_svg(const nlohmann::json& operation_view);
// Each leaderboard entry's best latency per workload and GPU: box (quartiles), whiskers (min, max) and the points,
// log scale.
std::string leaderboard_plot_svg(const nlohmann::json& leaderboard);

}  // namespace kindex::web
