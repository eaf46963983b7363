// The serving evidence pages and their Pareto plot, from store/query.hpp's serving JSON.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "web/page_parts.hpp"
#include "web/pages.hpp"

namespace kindex::web {

using nlohmann::json;
using namespace page_parts;

namespace {

std::string tokens(const json& v) { return v.is_number() ? html_escape(fmt("%.0f", v.get<double>())) : "—"; }

// "≤ 2000 ms (SLO)" or "1480 ms"; "—" without one.
std::string latency_ms(const json& run, const std::string& metric) {
  const json& l = run["latency"].value(metric, json());
  if (!l.is_object()) return "—";
  return (l["bound"].get<bool>() ? "≤ " : "") + html_escape(fmt("%.4g", l["ms"].get<double>())) + " ms" +
         (l["bound"].get<bool>() ? " (SLO)" : "");
}

std::string serving_run_link(const json& run, const std::string& text) {
  return "<a href=\"/serving/runs/" + url(run.value("id", "")) + "\">" + html_escape(text) + "</a>";
}

std::string model_href(const std::string& model, const json& gpu, const std::string& latency = "") {
  std::string href = "/serving/models/" + url(model);
  std::string query = gpu.is_string() && !gpu.get<std::string>().empty() ? "gpu=" + url(gpu.get<std::string>()) : "";
  if (!latency.empty()) query += (query.empty() ? "" : "&amp;") + std::string("latency=") + latency;
  return href + (query.empty() ? "" : "?" + query);
}

// The table of serving runs every serving page lists.
std::string runs_table(const json& runs, const std::string& id) {
  std::string body = "<table id=\"" + id + "\"><tr><th>Run</th><th>Configuration</th><th>Workload</th><th>GPU</th>"
                     "<th>GPUs</th><th>Output tok/s</th><th>per GPU</th><th>p99 TTFT</th><th>p99 TPOT</th><th>Status</th></tr>";
  for (const auto& r : runs) {
    body += "<tr class=\"serving-run\"><td>" + serving_run_link(r, r.value("title", r.value("id", ""))) + "</td><td>" +
            e(r["configuration"]) + "<br><span class=\"muted\">" + e(r["stack"]) + (r["dtype"].is_string() ? " · " + e(r["dtype"]) : "") +
            "</span></td><td>" + e(r["workload"]) + "</td><td>" + e(r["gpu"]) + "</td><td class=\"num\">" + e(r["accelerators"]) +
            "</td><td class=\"num\">" + tokens(r["outputTokensPerSecond"]) + "</td><td class=\"num\">" +
            tokens(r["outputTokensPerSecondPerAccelerator"]) + "</td><td class=\"num\">" + latency_ms(r, "ttft_ms") +
            "</td><td class=\"num\">" + latency_ms(r, "tpot_ms") + "</td><td>" + e(r["status"]) + "</td></tr>";
  }
  return body + "</table>";
}

}  // namespace

std::string serving_overview_page(const json& v) {
  std::string body = "<h1>Serving evidence</h1><p class=\"muted\">End-to-end serving runs: a model served by a serving "
                     "stack's configuration under a serving workload. <a href=\"/api/serving\">JSON</a></p>";
  if (v["modelsAndGpus"].empty()) return page("Serving · kindex", body + "<p id=\"empty\">No serving runs in this store.</p>");
  body += "<table id=\"serving-models\"><tr><th>Model</th><th>GPU</th><th>Runs</th><th>Configurations</th><th>Workloads</th></tr>";
  for (const auto& p : v["modelsAndGpus"]) {
    body += "<tr><td><a href=\"" + model_href(p["model"], json()) + "\">" + e(p["modelName"].is_string() ? p["modelName"] : p["model"]) +
            "</a></td><td><a href=\"" + model_href(p["model"], p["gpu"]) + "\">" + e(p["gpu"]) + "</a></td><td class=\"num\">" +
            e(p["runs"]) + "</td><td class=\"num\">" + e(p["configurations"]) + "</td><td class=\"num\">" + e(p["workloads"]) +
            "</td></tr>";
  }
  body += "</table><form method=\"get\" action=\"/serving/resolve\" id=\"resolve-serving\">Which configuration meets my SLO? "
          "model <input name=\"model\" size=\"18\"> gpu <input name=\"gpu\" size=\"12\"> p99 TTFT ≤ <input name=\"ttft\" size=\"6\"> ms "
          "p99 TPOT ≤ <input name=\"tpot\" size=\"6\"> ms <button>Resolve</button></form>";
  return page("Serving · kindex", body);
}

std::string serving_page(const json& v) {
  const json& model = v["model"];
  const std::string metric = v["latencyMetric"];
  const std::string other = metric == "ttft_ms" ? "tpot" : "ttft";
  std::string body = "<h1 id=\"title\">" + e(model["name"]) + (v["gpu"].get<std::string>().empty() ? "" : " · " + e(v["gpu"])) +
                     "</h1><p class=\"muted\"><a href=\"/serving\">serving</a> · <a href=\"/api" +
                     model_href(model["slug"], v["gpu"], metric == "ttft_ms" ? "ttft" : "tpot") + "\">JSON</a> · <a href=\"" +
                     model_href(model["slug"], v["gpu"], other) + "\">plot against p99 " + (other == "ttft" ? "TTFT" : "TPOT") +
                     "</a> · model digest <code>" + e(model["modelDigest"]) + "</code></p>";
  std::string gpus;
  for (const auto& g : v["gpus"]) gpus += (gpus.empty() ? "" : ", ") + e(g);
  body += "<p>GPUs: " + (gpus.empty() ? std::string("—") : gpus) + "</p>";
  body += "<div class=\"box\"><h2>Throughput against latency</h2><p class=\"muted\" id=\"plotted\">" + e(v["plotted"]) +
          ". Each configuration's Pareto front is its line; the front of all runs is dashed; hollow points are SLO bounds.</p>" +
          serving_plot_svg(v) + "</div>";
  std::set<std::string> front(v["front"].begin(), v["front"].end());
  body += "<h2>Pareto front (" + std::to_string(front.size()) + " runs)</h2>";
  json on_front = json::array();
  for (const auto& p : v["points"])
    if (front.count(p["id"])) on_front.push_back(p);
  body += runs_table(on_front, "front");
  body += "<h2>Every plotted run (" + std::to_string(v["points"].size()) + ")</h2>" + runs_table(v["points"], "points");
  body += "<h2>Not plotted (" + std::to_string(v["notPlotted"].size()) + ")</h2><p class=\"muted\">No p99 latency of this kind "
          "(offline runs), no output throughput, or not valid.</p>" + runs_table(v["notPlotted"], "not-plotted");
  return page(model["name"].get<std::string>() + " · serving · kindex", body);
}

std::string serving_run_page(const json& v) {
  const json& r = v["run"];
  std::string body = "<h1 id=\"title\">" + e(r["title"]) + "</h1><p class=\"muted\"><a href=\"" + model_href(v["model"]["slug"], r["gpu"]) +
                     "\">" + e(v["model"]["name"]) + " on " + e(r["gpu"]) + "</a> · <a href=\"/api/serving/runs/" + url(r["id"]) +
                     "\">JSON</a></p>";
  body += "<div class=\"box\"><div class=\"big\" id=\"throughput\">" + tokens(r["outputTokensPerSecond"]) +
          " output tokens/s</div><p>" + tokens(r["outputTokensPerSecondPerAccelerator"]) + " per GPU · " + e(r["accelerators"]) + "× " +
          e(r["gpu"]) + " · p99 TTFT " + latency_ms(r, "ttft_ms") + " · p99 TPOT " + latency_ms(r, "tpot_ms") + "</p></div>";
  body += dl({{"status", e(r["status"])},
              {"observed", e(r["observedAt"])},
              {"scenario", e(r["scenario"])},
              {"quality policy", e(r["qualityPolicy"])},
              {"configuration", e(r["configuration"])},
              {"serving stack", e(r["stack"]) + (r["stackVersion"].is_string() ? " (" + e(r["stackVersion"]) + ")" : "")},
              {"workload", e(r["workload"])},
              {"source", e(r["source"])},
              {"runDigest", "<code>" + e(r["runDigest"]) + "</code>"},
              {"cohortKey", "<code>" + e(r["cohortKey"]) + "</code>"},
              {"protocolKey", e(r["protocolKey"])}});
  body += "<h2>Measurements</h2><table id=\"measurements\"><tr><th>Metric</th><th>Statistic</th><th>Value</th><th>Unit</th><th>Samples</th></tr>";
  for (const auto& m : r["measurements"])
    body += "<tr><td>" + e(m["metric"]) + "</td><td>" + e(m["statistic"]) + "</td><td class=\"num\">" + e(m["value"]) + "</td><td>" +
            e(m["unit"]) + "</td><td class=\"num\">" + e(m["sampleCount"]) + "</td></tr>";
  body += "</table>";
  for (const char* part : {"run", "configuration", "stack", "workload"})
    body += "<h2>" + std::string(part) + " manifest</h2><pre>" + e(v["manifests"][part].dump(2)) + "</pre>";
  return page(r["title"].get<std::string>() + " · kindex", body);
}

std::string serving_resolve_page(const json& v) {
  std::string slo;
  for (const auto& s : v["slo"]) slo += (slo.empty() ? "" : ", ") + e(s["statistic"]) + " " + e(s["metric"]) + " ≤ " + e(s["ms"]) + " ms";
  std::string body = "<h1>Resolve serving · " + e(v["model"]["name"]) + (v["gpu"].get<std::string>().empty() ? "" : " · " + e(v["gpu"])) +
                     "</h1><p>SLO: " + (slo.empty() ? std::string("none") : slo) + " · ranked by " + e(v["rankedBy"]) + "</p>";
  if (v["best"].is_null()) {
    body += "<p id=\"best\">No configuration's valid run meets this SLO on these GPUs.</p>";
  } else {
    body += "<p id=\"best\" class=\"box\">Best: <b>" + e(v["best"]["configuration"]) + "</b> (" + e(v["best"]["stack"]) + ") — " +
            tokens(v["best"]["outputTokensPerSecondPerAccelerator"]) + " output tokens/s per GPU, " +
            serving_run_link(v["best"], "its run") + "</p>";
  }
  const json& x = v["excluded"];
  body += "<p class=\"muted\">Considered " + e(v["considered"]) + " runs; left out: " + e(x["notValid"]) + " not valid, " +
          e(x["noThroughput"]) + " without output throughput, " + e(x["noLatencyForTheSlo"]) + " without the latency the SLO needs, " +
          e(x["overTheSlo"]) + " over the SLO.</p>";
  return page("Resolve serving · kindex", body + runs_table(v["configurations"], "configurations"));
}

std::string serving_plot_svg(const json& v) {
  const std::string metric = v["latencyMetric"];
  const int width = 900, left = 70, right = 260, top = 10, height = 300, bottom = 44;
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"plot\" id=\"serving-plot\" width=\"" + std::to_string(width) +
                    "\" height=\"" + std::to_string(height + top + bottom) +
                    "\" role=\"img\" aria-label=\"output tokens per second per GPU against p99 latency\">";
  const json& points = v["points"];
  if (points.empty()) return svg + "<text x=\"10\" y=\"20\">No valid runs with this latency and a throughput to plot.</text></svg>";
  auto lat = [&](const json& p) { return p["latency"][metric]["ms"].get<double>(); };
  auto tput = [](const json& p) { return p["outputTokensPerSecondPerAccelerator"].get<double>(); };
  double lo = 1e300, hi = 0, top_y = 0;
  for (const auto& p : points) {
    lo = std::min(lo, lat(p));
    hi = std::max(hi, lat(p));
    top_y = std::max(top_y, tput(p));
  }
  lo /= 1.5;
  hi *= 1.5;
  top_y *= 1.1;
  const double x0 = left, x1 = width - right, y0 = top + height, y1 = top;
  auto X = [&](double ms) { return log_position(ms, lo, hi, x0, x1); };
  auto Y = [&](double t) { return y0 - (t / top_y) * (y0 - y1); };
  svg += "<rect x=\"" + fmt("%.1f", x0) + "\" y=\"" + fmt("%.1f", y1) + "\" width=\"" + fmt("%.1f", x1 - x0) + "\" height=\"" +
         std::to_string(height) + "\" fill=\"#fff\" stroke=\"#ccc\"/>";
  for (double tick = std::pow(10, std::floor(std::log10(lo))); tick <= hi; tick *= 10) {
    for (double m : {1.0, 2.0, 5.0}) {
      const double t = tick * m;
      if (t < lo || t > hi) continue;
      svg += "<line x1=\"" + fmt("%.1f", X(t)) + "\" x2=\"" + fmt("%.1f", X(t)) + "\" y1=\"" + fmt("%.1f", y1) + "\" y2=\"" +
             fmt("%.1f", y0) + "\" stroke=\"#eee\"/><text x=\"" + fmt("%.1f", X(t)) + "\" y=\"" + fmt("%.1f", y0 + 14) +
             "\" font-size=\"11\" text-anchor=\"middle\">" + html_escape(fmt("%g", t)) + "</text>";
    }
  }
  for (int i = 0; i <= 4; ++i) {
    const double t = top_y * i / 4;
    svg += "<text x=\"" + fmt("%.1f", x0 - 4) + "\" y=\"" + fmt("%.1f", Y(t) + 4) + "\" font-size=\"11\" text-anchor=\"end\">" +
           html_escape(fmt("%.0f", t)) + "</text>";
  }
  svg += "<text x=\"" + fmt("%.1f", (x0 + x1) / 2) + "\" y=\"" + fmt("%.1f", y0 + 34) + "\" font-size=\"12\" text-anchor=\"middle\">p99 " +
         std::string(metric == "ttft_ms" ? "time to first token" : "time per output token") + " (ms, log scale)</text>";
  svg += "<text x=\"14\" y=\"" + fmt("%.1f", (y0 + y1) / 2) + "\" font-size=\"12\" text-anchor=\"middle\" transform=\"rotate(-90 14 " +
         fmt("%.1f", (y0 + y1) / 2) + ")\">output tokens/s per GPU</text>";
  std::map<std::string, json> by_id;
  for (const auto& p : points) by_id[p["id"]] = p;
  auto path_of = [&](const json& ids) {
    std::string path;
    for (const auto& id : ids) {
      const json& p = by_id[id];
      path += (path.empty() ? "M" : " L") + fmt("%.1f", X(lat(p))) + "," + fmt("%.1f", Y(tput(p)));
    }
    return path;
  };
  svg += "<path class=\"front-all\" d=\"" + path_of(v["front"]) + "\" fill=\"none\" stroke=\"#555\" stroke-width=\"1\" stroke-dasharray=\"4 3\"/>";
  int color = 0, legend = 0;
  for (const auto& c : v["configurations"]) {
    const std::string col = kPalette[color++ % 8];
    svg += "<path class=\"front\" d=\"" + path_of(c["front"]) + "\" fill=\"none\" stroke=\"" + col + "\" stroke-width=\"1.5\"/>";
    for (const auto& p : points) {
      if (p["configurationId"] != c["id"]) continue;
      const bool bound = p["latency"][metric]["bound"].get<bool>();
      svg += "<circle cx=\"" + fmt("%.1f", X(lat(p))) + "\" cy=\"" + fmt("%.1f", Y(tput(p))) + "\" r=\"3.5\" fill=\"" +
             (bound ? std::string("#fff") : col) + "\" stroke=\"" + col + "\"><title>" +
             html_escape(c["configuration"].get<std::string>() + " · " + p["workload"].get<std::string>() + ": " +
                         fmt("%.0f", tput(p)) + " tok/s per GPU at " + (bound ? "≤ " : "") + fmt("%g", lat(p)) + " ms") +
             "</title></circle>";
    }
    if (legend < 16) {
      const int ly = top + 14 + 16 * legend++;
      svg += "<rect x=\"" + fmt("%.1f", x1 + 10) + "\" y=\"" + std::to_string(ly - 9) + "\" width=\"10\" height=\"10\" fill=\"" + col +
             "\"/><text x=\"" + fmt("%.1f", x1 + 24) + "\" y=\"" + std::to_string(ly) + "\" font-size=\"11\">" +
             html_escape(c["configuration"].get<std::string>().substr(0, 38)) + "</text>";
    }
  }
  return svg + "</svg>";
}

}  // namespace kindex::web
