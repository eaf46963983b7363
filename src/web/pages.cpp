#include "web/pages.hpp"
#include "web/page_parts.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

namespace kindex::web {

using nlohmann::json;

std::string html_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

namespace page_parts {

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// Percent-encodes a URL component.
std::string url(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == ':') {
      out += static_cast<char>(c);
    } else {
      static const char kHex[] = "0123456789ABCDEF";  // not fmt: it formats a double, and %X takes an unsigned
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string e(const json& v) {
  if (v.is_null()) return "";
  if (v.is_string()) return html_escape(v.get<std::string>());
  return html_escape(v.dump());
}

std::string times(double x);

const char* kStyle = R"CSS(
body{font-family:system-ui,sans-serif;margin:0;color:#1b1f24;background:#fafafa}
header{background:#14213d;color:#fff;padding:10px 24px}header a{color:#fff;text-decoration:none;font-weight:600}
main{max-width:1100px;margin:0 auto;padding:16px 24px}
table{border-collapse:collapse;width:100%;margin:8px 0 16px;font-size:14px}
th,td{border-bottom:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#eef1f5}td.num{text-align:right;font-variant-numeric:tabular-nums}
.box{background:#fff;border:1px solid #d8dde3;border-radius:6px;padding:12px 16px;margin:12px 0}
.big{font-size:32px;font-weight:700}.muted{color:#5a6570;font-size:13px}
dl{display:grid;grid-template-columns:max-content auto;gap:2px 16px}dt{color:#5a6570}dd{margin:0}
pre{background:#f3f4f6;padding:8px;overflow:auto;font-size:12px;max-height:480px}
.badge{display:inline-block;padding:0 6px;border-radius:4px;background:#e3e8ef;font-size:12px}
.verified,.replicated{background:#c9f0d3}.reproducible{background:#fff1c2}.unverified{color:#a4262c}
)CSS";

std::string page(const std::string& title, const std::string& body) {
  return "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>" + html_escape(title) +
         "</title><style>" + kStyle + "</style></head><body><header><a href=\"/\">kindex</a> · evidence index · "
         "<a href=\"/records\">records</a> · <a href=\"/serving\">serving</a></header><main>" + body + "</main></body></html>";
}

std::string badge(const json& evidence) {
  std::string level = evidence.is_string() ? evidence.get<std::string>() : "reported";
  std::string name = level;
  name[0] = static_cast<char>(std::toupper(name[0]));
  return "<span class=\"badge " + html_escape(level) + "\" data-evidence=\"" + html_escape(level) + "\">" +
         html_escape(name) + "</span>";
}

std::string latency(const json& ns) { return ns.is_number() ? html_escape(format_ns(ns.get<double>())) : "—"; }

std::string dl(const std::vector<std::pair<std::string, std::string>>& rows) {
  std::string out = "<dl>";
  for (const auto& [k, v] : rows) out += "<dt>" + html_escape(k) + "</dt><dd>" + v + "</dd>";
  return out + "</dl>";
}

// A nested JSON object as a definition list of its leaves ("harness.name" -> "flashinfer-bench").
void flatten(const json& j, const std::string& prefix, std::vector<std::pair<std::string, std::string>>& out) {
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) flatten(v, prefix.empty() ? k : prefix + "." + k, out);
  } else {
    out.emplace_back(prefix, e(j));
  }
}

std::string run_link(const json& run, const std::string& text) {
  return "<a href=\"/runs/" + url(run.value("id", "")) + "\">" + html_escape(text) + "</a>";
}

// One rerun link (store::run_view's "reruns"): "reported 297.3 µs (mean) on NVIDIA B200; rerun here: 301.2 µs
// (median) on NVIDIA H200 (kindex rerun, 2026-12-03)", each half linked to its run ("rerun here with X instead"
// when the rerun ran another implementation).
std::string rerun_sentence(const json& link) {
  auto measured = [](const json& run) {
    std::string what = run.value("status", "") == "passed" && run["latencyNs"].is_number()
                           ? latency(run["latencyNs"]) + (run["statistic"].is_string() ? " (" + e(run["statistic"]) + ")" : "")
                           : e(run.value("status", ""));
    return what + " on " + (run["gpu"].is_string() ? e(run["gpu"]) : std::string("an unknown GPU"));
  };
  const json& original = link["original"];
  const json& rerun = link["rerun"];
  std::string out = "<span class=\"rerun\">";
  out += original.value("inStore", false)
             ? std::string("reported <a href=\"/runs/") + url(original.value("id", "")) + "\">" + measured(original) + "</a>"
             : "reported by run <code>" + e(original["runDigest"]) + "</code> (not in this store)";
  out += std::string("; rerun here") +
         (link.value("sameImplementation", true) ? std::string() : " with " + e(rerun["implementation"]) + " instead") +
         ": <a href=\"/runs/" + url(rerun.value("id", "")) + "\">" + measured(rerun) + "</a> (kindex rerun, " +
         e(rerun.value("observedAt", std::string()).substr(0, 10)) + ")</span>";
  return out;
}

}  // namespace page_parts

using namespace page_parts;

namespace {

// The date of an instant ("2026-12-07"); empty for none.
std::string day(const json& instant) { return instant.is_string() ? e(instant.get<std::string>().substr(0, 10)) : ""; }

// What one attestation (store::run_view's "attestations") says, as the run page shows it: "replicated by <key id> on
// <GPU>" linking the signed document only when the store verified it; otherwise what is wrong with it.
std::string attestation_claim(const json& a) {
  const std::string key = "<a class=\"attestation\" href=\"" + e(a.value("href", "")) + "\">" +
                          e(a.value("keyId", json("an unreadable attestation"))) + "</a>";
  const std::string where = a.value("gpu", json()).is_string() ? " on " + e(a["gpu"]) : std::string();
  if (a.value("status", "") == "verified")
    return a.value("verdict", "") == "replicated" ? "replicated by " + key + where
                                                  : "not replicated, attested by " + key + where;
  const json& problems = a.value("problems", json::array());
  return "<span class=\"unverified\" data-status=\"" + e(a.value("status", "")) + "\">" + key + where +
         ": not verified (" + e(a.value("status", "")) +
         (problems.empty() ? std::string() : ": " + e(problems[0])) + ")</span>";
}

// The run page's table of a run's reruns and attestations (who, where, when, ratio to the original): one row per
// rerun with the attestations of it, then the attestations of reruns this store does not hold.
std::string reruns_table(const json& v) {
  const json& attestations = v.value("attestations", json::array());
  const std::string self = v["run"].value("runDigest", "");
  std::string rows;
  std::set<std::string> shown;
  auto claims_of = [&](const std::string& rerun_digest) {
    std::string who;
    for (const auto& a : attestations) {
      if (a.value("rerunDigest", "") != rerun_digest || a.value("originalRunDigest", "") != self) continue;
      who += (who.empty() ? "" : "<br>") + attestation_claim(a);
      shown.insert(a.value("id", ""));
    }
    return who.empty() ? std::string("<span class=\"muted\">unsigned</span>") : who;
  };
  for (const auto& link : v.value("reruns", json::array())) {
    const json& r = link["rerun"];
    rows += "<tr><td>" + run_link(r, r.value("id", "").substr(0, 8)) +
            (link.value("sameImplementation", true) ? std::string() : " <span class=\"muted\">with " + e(r["implementation"]) + " instead</span>") +
            "</td><td>" + claims_of(r.value("runDigest", "")) + "</td><td>" + e(r["gpu"]) + "</td><td>" +
            day(r["observedAt"]) + "</td><td>" + e(r["status"]) +
            "</td><td class=\"num\">" + latency(r["latencyNs"]) + "</td><td class=\"num\">" +
            (link["ratioToOriginal"].is_number() ? html_escape(times(link["ratioToOriginal"])) : "—") + "</td></tr>";
  }
  for (const auto& a : attestations) {
    if (shown.count(a.value("id", "")) || a.value("originalRunDigest", "") != self) continue;
    const json rerun_id = a.value("rerunId", json());
    rows += "<tr><td>" + (rerun_id.is_string() ? run_link(json{{"id", rerun_id}}, rerun_id.get<std::string>().substr(0, 8))
                                               : "<code>" + e(a.value("rerunDigest", json())) + "</code> (not in this store)") +
            "</td><td>" + attestation_claim(a) + "</td><td>" + e(a.value("gpu", json())) + "</td><td>" +
            day(a.value("signedAt", json())) + "</td><td></td><td></td><td></td></tr>";
  }
  if (rows.empty()) return "";
  return "<table id=\"rerun-table\"><tr><th>Rerun</th><th>Who</th><th>Where</th><th>When</th><th>Status</th>"
         "<th>Latency</th><th>Ratio to the original</th></tr>" + rows + "</table>";
}

}  // namespace

std::string format_ns(double ns) {
  if (ns < 1000) return fmt("%.0f ns", ns);
  double us = ns / 1000;
  if (us < 10) return fmt("%.2f µs", us);
  if (us < 1000) return fmt("%.1f µs", us);
  double ms = us / 1000;
  return fmt(ms < 10 ? "%.3f ms" : "%.2f ms", ms);
}

std::string format_ratio(double x) { return fmt(x >= 100 ? "%.0f×" : x >= 10 ? "%.1f×" : "%.2f×", x); }

namespace page_parts {
std::string times(double x) { return format_ratio(x); }
}  // namespace page_parts

const std::string& search_script() {
  // Replaces the operations table with /api/search's answer as the user types; rows are built with textContent,
  // so nothing from data is parsed as HTML. Only the newest answer is shown.
  static const std::string script = R"JS("use strict";
(function () {
  var form = document.getElementById("search");
  var input = document.getElementById("q");
  var table = document.getElementById("operations");
  if (!form || !input || !table || !window.fetch) return;
  var latest = 0, timer = null;
  function cell(row, text, className) {
    var td = row.insertCell();
    td.textContent = text;
    if (className) td.className = className;
    return td;
  }
  function render(operations) {
    while (table.rows.length > 1) table.deleteRow(1);
    operations.forEach(function (op) {
      var row = table.insertRow();
      var a = document.createElement("a");
      a.href = "/operations/" + encodeURIComponent(op.slug);
      a.textContent = op.name;
      row.insertCell().appendChild(a);
      cell(row, op.family);
      cell(row, String(op.workloads), "num");
      cell(row, String(op.runs), "num");
    });
    var status = document.getElementById("search-status");
    if (status) status.textContent = operations.length + " operations";
  }
  function search() {
    var q = input.value, mine = ++latest;
    fetch("/api/search?q=" + encodeURIComponent(q), {headers: {Accept: "application/json"}})
      .then(function (r) { return r.ok ? r.json() : Promise.reject(r.status); })
      .then(function (ops) {
        if (mine !== latest) return;
        render(ops);
        history.replaceState(null, "", q ? "/?q=" + encodeURIComponent(q) : "/");
      })
      .catch(function () {});
  }
  input.addEventListener("input", function () {
    clearTimeout(timer);
    timer = setTimeout(search, 120);
  });
})();
)JS";
  return script;
}

std::string home_page(const json& operations, const std::string& query) {
  std::string body = "<h1>Operations</h1><form method=\"get\" action=\"/\" id=\"search\" role=\"search\"><input name=\"q\" id=\"q\" "
                     "autocomplete=\"off\" value=\"" + html_escape(query) + "\" placeholder=\"search operations\"> <button>Search</button>"
                     " <span class=\"muted\" id=\"search-status\">" + std::to_string(operations.size()) + " operations</span></form>";
  body += "<table id=\"operations\"><tr><th>Operation</th><th>Family</th><th>Workloads</th><th>Runs</th></tr>";
  for (const auto& op : operations) {
    body += "<tr><td><a href=\"/operations/" + url(op["slug"]) + "\">" + e(op["name"]) + "</a></td><td>" +
            e(op["family"]) + "</td><td class=\"num\">" + e(op["workloads"]) + "</td><td class=\"num\">" + e(op["runs"]) +
            "</td></tr>";
  }
  body += "</table><h2>Resolve a workload</h2><form method=\"get\" action=\"/resolve\">operation <input name=\"operation\">"
          " axes <input name=\"axes\" placeholder=\"batch_size=1,num_pages=425\"> gpu <input name=\"gpu\" size=\"8\"> "
          "<button>Resolve</button></form><script src=\"/assets/search.js\" defer></script>";
  return page("kindex", body);
}

OperationPlots operation_plots(const json& v) { return {latency_plot_svg(v), floor_plot_svg(v)}; }

std::string operation_page(const json& v, const OperationPlots* plots) {
  const json& op = v["operation"];
  std::string slug = op["slug"];
  std::string body = "<h1 id=\"title\">" + e(op["title"]) + "</h1>";
  body += "<p><span id=\"eligible\">" + std::to_string(v.value("eligibleRunsAllWorkloads", int64_t{0})) +
          " eligible runs across " + std::to_string(v["workloads"].size()) + " workloads</span> (" +
          std::to_string(v["eligibleRuns"].get<int64_t>()) + " on the selected one) · " +
          e(op["family"]) + "</p><p>" + e(op["description"]) + "</p>";
  const json& cohorts = v["cohorts"];
  if (!cohorts.empty() && !cohorts[0]["runs"].empty()) {
    const json& best = cohorts[0]["runs"][0];
    body += "<div class=\"box\" id=\"headline\"><div class=\"muted\">Current record · " + e(best["source"]) +
            "</div><div class=\"big\">" + latency(best["latencyNs"]) + "<span class=\"muted\"> " + e(best["statistic"]) +
            "</span></div><div>" + run_link(best, best.value("implementation", "")) + " · " + e(best["project"]) + " · " +
            badge(best["evidence"]) + " evidence · last observed " + e(best["observedAt"].get<std::string>().substr(0, 10)) +
            "</div></div>";
  }
  // Workload picker.
  const json& sel = v["selectedWorkload"];
  body += "<h2>Workload</h2><form method=\"get\" action=\"/operations/" + url(slug) +
          "\"><select name=\"workload\" id=\"workload-picker\">";
  for (const auto& w : v["workloads"]) {
    body += "<option value=\"" + e(w["id"]) + "\"" + (w["selected"].get<bool>() ? " selected" : "") + ">" + e(w["label"]) +
            " (" + e(w["runs"]) + " runs)</option>";
  }
  body += "</select> <button>Show</button></form><p class=\"muted\"><span id=\"workload-count\">" +
          std::to_string(v["workloads"].size()) + " cases</span></p>";
  body += "<table id=\"workloads\"><tr><th>Workload</th><th>Runs</th></tr>";
  for (const auto& w : v["workloads"]) {
    body += std::string("<tr class=\"workload") + (w["selected"].get<bool>() ? " selected" : "") + "\"><td><a href=\"/operations/" +
            url(slug) + "?workload=" + url(w["id"]) + "\">" + e(w["label"]) + "</a></td><td class=\"num\">" + e(w["runs"]) +
            "</td></tr>";
  }
  body += "</table>";
  // Records per cohort.
  body += "<h2>Current records</h2>";
  if (cohorts.empty()) body += "<p>No runs for this workload.</p>";
  for (const auto& c : cohorts) {
    body += "<div class=\"box cohort\" data-comparison-key=\"" + e(c["comparisonKey"]) + "\"><p class=\"muted\">" +
            (c["sourceNative"].get<bool>() ? "Source-native comparison" : "Controlled comparison") + " · GPU " +
            e(c["gpu"]) + " · Workload " + (sel.is_null() ? "" : e(sel["label"])) + " · " + e(c["environmentSummary"]) +
            " · Protocol " + e(c["protocol"].value("harness", "")) + " · " + e(c["protocol"].value("statistic", "")) +
            " · " + e(c["members"]) + " results · last observed " +
            e(c["lastObserved"].get<std::string>().substr(0, 10)) + "</p>";
    if (c.contains("floor")) {
      const json& f = c["floor"];
      body += "<p class=\"floor\">Estimated floor <b>" + html_escape(format_ns(f["ns"])) + "</b>";
      if (c.contains("recordAboveFloor")) body += " · record " + html_escape(fmt("%.2f×", c["recordAboveFloor"])) + " above it";
      body += "</p><p class=\"muted\">DRAM " + html_escape(format_ns(f["memoryNs"])) + " · " + e(f["bound"]) + "-bound on " +
              e(f["gpu"]) + ": every declared input tensor crosses HBM exactly once (" + fmt("%.0f", f["dramGBps"]) +
              " GB/s, " + e(f["gpu"]) + " datasheet)" +
              (f["flops"].get<double>() > 0 ? " · compute " + html_escape(format_ns(f["computeNs"])) + " at " + fmt("%.0f", f["tflops"]) + " TFLOP/s"
                                            : std::string(" · no arithmetic formula for this family: bandwidth floor only")) +
              ". headroom-v1: a lower bound from declared tensors and datasheet peaks.</p>";
    }
    if (c.contains("kindexFloorNs")) {
      body += "<p class=\"kindex-floor\">kindex floor " + html_escape(format_ns(c["kindexFloorNs"])) + " (bytes referenced at measured bandwidth)";
      if (c.contains("recordAboveKindexFloor")) body += " · record " + html_escape(fmt("%.2f×", c["recordAboveKindexFloor"])) + " above it";
      body += "</p>";
    }
    body += "<table class=\"records\"><tr><th>#</th><th>Implementation</th><th>Latency</th><th>vs #1</th><th>Trust</th>"
            "<th>Observed</th></tr>";
    for (const auto& r : c["runs"]) {
      body += "<tr class=\"record\"><td class=\"rank\">" + e(r["rank"]) + "</td><td>" + run_link(r, r.value("implementation", "")) +
              "<div class=\"muted\">" + e(r["project"]) + "</div></td><td class=\"num latency\">" + latency(r["latencyNs"]) +
              "</td><td class=\"num\">" + html_escape(times(r["xOfFirst"].get<double>())) + "</td><td>" + badge(r["evidence"]) +
              " · " + e(r["license"]) + "</td><td>" + e(r["observedAt"].get<std::string>().substr(0, 10)) + "</td></tr>";
    }
    body += "</table>";
    if (c["members"].get<size_t>() > c["runs"].size()) {
      body += "<p class=\"muted\">Showing the first " + std::to_string(c["runs"].size()) + " of " + e(c["members"]) +
              " ranked runs (all in the JSON of <a href=\"/records?operation=" + url(slug) + "\">records</a>).</p>";
    }
    if (c.contains("recordStatus") && c["recordStatus"].is_object()) {
      const json& st = c["recordStatus"];
      int64_t later = st["laterRunsNotBeatingIt"];
      body += "<p class=\"record-status\">" +
              std::string(later > 0 ? "<b>Unbeaten</b> by " + std::to_string(later) + " later run" + (later == 1 ? "" : "s") + " · "
                                    : "") +
              "record since " + e(st["since"].get<std::string>().substr(0, 10)) +
              (st["stale"].get<bool>() ? " · <b class=\"stale\">stale</b> (measured over a year before the newest run)" : "") + "</p>";
    }
    if (c.contains("recordTimeline") && !c["recordTimeline"].empty()) {
      body += "<details class=\"record-timeline\"><summary>Record timeline (" + std::to_string(c["recordTimeline"].size()) +
              " events)</summary><ol>";
      for (const auto& ev : c["recordTimeline"]) {
        body += "<li>" + e(ev["at"].get<std::string>().substr(0, 10)) + " · " + e(ev["cause"]) +
                (ev["runId"].is_string() ? " · <a href=\"/runs/" + url(ev["runId"]) + "\">" + e(ev["implementation"]) + "</a> " +
                                               latency(ev["latencyNs"])
                                         : std::string()) +
                "</li>";
      }
      body += "</ol></details>";
    }
    if (!c["unranked"].empty()) {
      body += "<p class=\"muted\">Not ranked: ";
      for (const auto& r : c["unranked"]) body += run_link(r, r.value("implementation", "") + " (" + r.value("status", "") + ")") + " ";
      body += "</p>";
    }
    body += "</div>";
  }
  // Implementations.
  body += "<h2>Implementations</h2><table id=\"implementations\"><tr><th>Implementation</th><th>Runtime</th>"
          "<th>Best latency</th><th></th><th>Evidence</th><th>Workloads run</th></tr>";
  for (const auto& i : v["implementations"]) {
    body += "<tr><td><a href=\"/implementations/" + url(i["id"]) + "\">" + e(i["title"]) + "</a><div class=\"muted\">" +
            e(i["project"]) + "</div></td><td>" + e(i["language"]) + "</td><td class=\"num\">" + latency(i["bestLatencyNs"]) +
            "</td><td class=\"num\">" + (i["xOfBest"].is_number() ? html_escape(times(i["xOfBest"])) : "") + "</td><td>" +
            badge(i["evidence"]) + "</td><td class=\"num\">" + e(i["workloadsRun"]) + "</td></tr>";
  }
  body += "</table>";
  // Plots.
  const OperationPlots made = plots ? OperationPlots{} : operation_plots(v);
  if (!plots) plots = &made;
  body += "<h2>Latency per workload</h2>" + plots->latency + "<h2>Records against their floors</h2>" + plots->floors;
  // Semantics.
  const json& s = v["semantics"];
  body += "<h2>Semantics</h2><h3>Inputs and outputs</h3><table id=\"io\">";
  for (const char* part : {"inputs", "outputs"}) {
    for (const auto& t : s[part]) {
      body += "<tr><td>" + e(t["name"]) + "</td><td>" + e(t["dtype"]) + " " + e(t["shape"]) + "</td><td class=\"muted\">" +
              (std::string(part) == "inputs" ? "input" : "output") + "</td></tr>";
    }
  }
  body += "</table><h3>Axes and behavior</h3><table id=\"axes\">";
  for (const auto& a : s["axes"]) body += "<tr><td>" + e(a["name"]) + "</td><td>" + e(a["text"]) + "</td></tr>";
  body += "<tr><td>determinism</td><td>" + e(s["determinism"]) + "</td></tr><tr><td>mutation</td><td>" + e(s["mutation"]) +
          "</td></tr></table><h3>Identity</h3>";
  std::string aliases;
  for (const auto& a : op["aliases"]) aliases += e(a) + " ";
  body += dl({{"alias", aliases}, {"digest", e(op["digest"])}, {"family", e(op["family"])}});
  body += "<p class=\"muted\"><a href=\"/api/operations/" + url(slug) + (sel.is_null() ? "" : "?workload=" + url(sel["id"])) +
          "\">JSON</a> · <a href=\"/records?operation=" + url(slug) + "\">Record history</a> · <a href=\"/operations/" + url(slug) +
          "/leaderboard\" id=\"leaderboard-link\">Leaderboard</a></p>";
  return page(op["title"].get<std::string>() + " · kindex", body);
}

std::string run_page(const json& v) {
  const json& r = v["run"];
  std::string body = "<h1>Run " + e(r["shortId"]) + " · kindex</h1><p class=\"muted\">" + e(v["title"]) + "</p>";
  body += "<div class=\"box\" id=\"primary\"><h2>Primary measurement</h2><div class=\"big\" id=\"latency\">" +
          latency(r["latencyNs"]) + "<span class=\"muted\"> " + e(r["statistic"]) + "</span></div>";
  if (v["rank"].is_number()) {
    body += "<p id=\"rank\">Rank " + e(v["rank"]) + " in its comparison group (" + e(v["cohortSize"]) + " runs) · " +
            (v["sourceNativeCohort"].get<bool>() ? "source-native comparison" : "controlled comparison") + " · observed " +
            e(r["observedAt"].get<std::string>().substr(0, 10)) + "</p>";
  } else {
    body += "<p id=\"rank\">Not ranked (status " + e(r["status"]) + (r["retractedAt"].is_null() ? "" : ", retracted") + ")</p>";
  }
  if (v["first"].is_object() && v["first"]["id"] != r["id"]) {
    body += "<p><a id=\"compare-first\" href=\"/compare?a=" + url(v["first"]["id"]) + "&amp;b=" + url(r["id"]) +
            "\">Compare with #1 →</a> (" + latency(v["first"]["latencyNs"]) + ")</p>";
  }
  std::string headline;
  if (v["solScore"].is_number()) headline += "SOL " + fmt("%.4f", v["solScore"]) + " · ";
  if (v["speedupFactor"].is_number()) headline += times(v["speedupFactor"]) + " reference";
  if (v["avgSpeedup"].is_number()) headline += times(v["avgSpeedup"]) + " reference";
  if (v["fast1"].is_object()) headline += " · " + e(v["fast1"]["count"]) + "/" + e(v["fast1"]["total"]) + " cases faster";
  if (!headline.empty()) body += "<p id=\"speedup\">" + html_escape(headline) + "</p>";
  body += "<p>" + badge(r["evidence"]) + " evidence" +
          (r["origin"] == "kindex" ? (r["realGpu"].get<bool>() ? " · measured by kindex on a GPU with raw samples" : " · measured by kindex (CPU path)")
                                   : " · reported by " + e(r["source"])) + "</p></div>";
  if (!v.value("reruns", json::array()).empty() || v.value("rerunOf", json()).is_object() ||
      !v.value("attestations", json::array()).empty()) {
    body += "<div class=\"box\" id=\"reruns\"><h2>Reruns</h2>" + reruns_table(v) + "<ul>";
    for (const auto& link : v["reruns"]) body += "<li>" + rerun_sentence(link) + "</li>";
    for (const auto& a : v.value("attestations", json::array()))
      if (a.value("rerunDigest", "") == v["run"].value("runDigest", ""))
        body += "<li>This rerun is attested: " + attestation_claim(a) + "</li>";
    if (v["rerunOf"].is_object())
      body += "<li>This run re-measured " +
              (v["rerunOf"].value("inStore", false)
                   ? run_link(v["rerunOf"], "run " + v["rerunOf"]["id"].get<std::string>().substr(0, 8)) + ": reported " +
                         (v["rerunOf"]["latencyNs"].is_number() ? latency(v["rerunOf"]["latencyNs"]) : e(v["rerunOf"]["status"])) +
                         " on " + e(v["rerunOf"]["gpu"])
                   : "run <code>" + e(v["rerunOf"]["runDigest"]) + "</code> (not in this store)") +
              " (kindex rerun)</li>";
    body += "</ul><p class=\"muted\">A rerun is a run of its own on its own GPU; a passing one of the same implementation "
            "on a GPU with raw samples makes the run it re-measured verified (two environments: replicated).</p></div>";
  }
  body += "<h2>Identity</h2>" + dl({{"implementation", "<a href=\"/implementations/" + url(r["implementationId"]) + "\">" + e(r["implementation"]) + "</a>"},
                                    {"project", e(r["project"])},
                                    {"revision", e(r["revision"])},
                                    {"workload", "<a href=\"/operations/" + url(v["operation"]["slug"]) + "?workload=" + url(v["workloadId"]) + "\">" + e(v["workload"]["label"]) + "</a>"},
                                    {"operation", "<a href=\"/operations/" + url(v["operation"]["slug"]) + "\">" + e(v["operation"]["name"]) + "</a>"},
                                    {"comparison key", "<code>" + e(r["comparisonKey"]) + "</code>"},
                                    {"source", e(r["source"])},
                                    {"external id", e(v["externalId"])},
                                    {"run digest", "<code>" + e(r["runDigest"]) + "</code>"}});
  body += "<h2>Correctness</h2>";
  if (v["correctness"].is_object()) {
    const json& c = v["correctness"];
    body += dl({{"comparator", e(c.value("comparator", json()))},
                {"max absolute error", e(c.value("maximumAbsoluteError", json()))},
                {"max relative error", e(c.value("maximumRelativeError", json()))},
                {"result", e(r["status"])}});
  } else {
    body += "<p>Marked " + e(r["status"]) + " by the source; the correctness figures were not published.</p>";
  }
  body += "<h2>Workload</h2>";
  std::vector<std::pair<std::string, std::string>> wrows;
  for (const auto& [k, a] : v["workload"]["axes"].items()) wrows.emplace_back(k, e(a));
  for (const auto& t : v["workload"]["tensors"]) wrows.emplace_back(t["name"], e(t["dtype"]) + " " + e(t["shape"]));
  wrows.emplace_back("definition comparator", e(v["workload"]["comparator"]));
  body += dl(wrows);
  if (v["floor"].is_object()) {
    body += "<p class=\"floor\">Estimated floor " + html_escape(format_ns(v["floor"]["ns"])) + " on " + e(v["floor"]["gpu"]) +
            (r["latencyNs"].is_number() ? " · this run " + html_escape(fmt("%.2f×", r["latencyNs"].get<double>() / v["floor"]["ns"].get<double>())) + " above it" : "") +
            " (headroom-v1)</p>";
  }
  body += "<h2>Measurements</h2><table id=\"measurements\">";
  for (const auto& m : v["measurements"]) {
    body += "<tr><td>" + e(m["metric"]) + " · " + e(m["statistic"]) + "</td><td class=\"num\">" +
            (m["unit"] == "ns" ? latency(m["value"]) : e(m["value"]) + " " + e(m["unit"])) + "</td></tr>";
  }
  body += "</table>";
  if (!v["samplesNs"].empty()) body += "<p class=\"muted\">" + std::to_string(v["samplesNs"].size()) + " raw samples kept (see JSON).</p>";
  std::vector<std::pair<std::string, std::string>> prows, erows;
  flatten(v["protocol"], "", prows);
  flatten(v["environment"], "", erows);
  body += "<h2>Protocol</h2>" + dl(prows) + "<h2>Environment</h2>" + dl(erows);
  body += "<h2>Canonical manifest</h2><details open><summary>Show manifest</summary><pre id=\"manifest\">" +
          html_escape(v["manifest"].dump(2)) + "</pre></details>";
  body += "<h2>Cite this record</h2><p id=\"citation\">" + e(v["citation"]) + "</p><p class=\"muted\"><a href=\"/api/runs/" +
          url(r["id"]) + "\">JSON</a> · <a href=\"/operations/" + url(v["operation"]["slug"]) + "\">All results for " +
          e(v["operation"]["name"]) + " →</a></p>";
  return page("Run " + r["shortId"].get<std::string>() + " · kindex", body);
}

std::string workload_page(const json& v) {
  std::string body = "<h1>Workload " + e(v["label"]) + "</h1><p><a href=\"/operations/" + url(v["operation"]) + "?workload=" +
                     url(v["id"]) + "\">" + e(v["operationName"]) + "</a> · <code>" + e(v["digest"]) + "</code></p>";
  for (const auto& c : v["cohorts"]) {
    body += "<div class=\"box\"><p class=\"muted\">GPU " + e(c["gpu"]) + " · " + e(c["environmentSummary"]) + "</p><table>";
    for (const auto& r : c["runs"]) {
      body += "<tr><td>" + e(r["rank"]) + "</td><td>" + run_link(r, r.value("implementation", "")) + "</td><td class=\"num\">" +
              latency(r["latencyNs"]) + "</td><td>" + badge(r["evidence"]) + "</td></tr>";
    }
    body += "</table></div>";
  }
  if (!v.value("reruns", json::array()).empty()) {
    body += "<h2>Reruns</h2><ul id=\"reruns\">";
    for (const auto& link : v["reruns"]) body += "<li>" + rerun_sentence(link) + "</li>";
    body += "</ul>";
  }
  body += "<h2>Manifest</h2><pre>" + html_escape(v["manifest"].dump(2)) + "</pre>";
  return page("Workload · kindex", body);
}

std::string implementation_page(const json& v) {
  std::string body = "<h1>" + e(v["title"]) + "</h1><p>" + e(v["project"]) + " · " + e(v["language"]) + " · <a href=\"/operations/" +
                     url(v["operation"]) + "\">" + e(v["operationName"]) + "</a> · <code>" + e(v["digest"]) + "</code></p>";
  body += "<table><tr><th>Run</th><th>Status</th><th>GPU</th><th>Latency</th><th>Evidence</th><th>Observed</th></tr>";
  for (const auto& r : v["runs"]) {
    body += "<tr><td>" + run_link(r, r["shortId"]) + "</td><td>" + e(r["status"]) + "</td><td>" + e(r["gpu"]) +
            "</td><td class=\"num\">" + latency(r["latencyNs"]) + "</td><td>" + badge(r["evidence"]) + "</td><td>" +
            e(r["observedAt"].get<std::string>().substr(0, 10)) + "</td></tr>";
  }
  body += "</table><h2>Manifest</h2><pre>" + html_escape(v["manifest"].dump(2)) + "</pre>";
  return page(v["slug"].get<std::string>() + " · kindex", body);
}

std::string compare_page(const json& v) {
  const json& a = v["a"];
  const json& b = v["b"];
  std::string body = "<h1>Compare runs</h1><p id=\"comparable\">" +
                     std::string(v["sameCohort"].get<bool>() ? "Same comparison group: directly comparable."
                                                             : "Different comparison groups: not directly comparable.") +
                     (v["ratioBOverA"].is_number() ? " B / A = " + html_escape(fmt("%.3f×", v["ratioBOverA"])) : std::string()) + "</p>";
  body += "<table id=\"compare\"><tr><th></th><th>A</th><th>B</th></tr>";
  auto row = [&](const std::string& name, const std::string& x, const std::string& y) {
    body += "<tr><th>" + html_escape(name) + "</th><td>" + x + "</td><td>" + y + "</td></tr>";
  };
  row("run", run_link(a["run"], a["run"]["shortId"]), run_link(b["run"], b["run"]["shortId"]));
  row("latency", latency(a["run"]["latencyNs"]), latency(b["run"]["latencyNs"]));
  row("rank", e(a["rank"]), e(b["rank"]));
  row("implementation", e(a["run"]["implementation"]), e(b["run"]["implementation"]));
  row("workload", e(a["workload"]["label"]), e(b["workload"]["label"]));
  row("gpu", e(a["run"]["gpu"]), e(b["run"]["gpu"]));
  row("evidence", badge(a["run"]["evidence"]), badge(b["run"]["evidence"]));
  row("environment", e(a["run"]["environmentSummary"]), e(b["run"]["environmentSummary"]));
  body += "</table><h2>Facets that differ</h2><ul>";
  for (const auto& d : v["differs"]) body += "<li>" + e(d["facet"]) + "</li>";
  return page("Compare · kindex", body + "</ul>");
}

std::string resolve_page(const json& v) {
  std::string body = "<h1>Resolve · " + e(v["operation"]["name"]) + "</h1>";
  if (v["exact"].is_null()) {
    body += "<p id=\"exact\">No exact workload match.</p>";
  } else {
    body += "<h2 id=\"exact\">Exact workload: " + e(v["exact"]["label"]) + "</h2><table><tr><th>#</th><th>Implementation</th>"
            "<th>Latency</th><th>GPU</th><th>Evidence</th></tr>";
    int n = 0;
    for (const auto& r : v["exact"]["ranked"]) {
      body += "<tr><td>" + std::to_string(++n) + "</td><td>" + run_link(r, r.value("implementation", "")) + "</td><td class=\"num\">" +
              latency(r["latencyNs"]) + "</td><td>" + e(r["gpu"]) + "</td><td>" + badge(r["evidence"]) + "</td></tr>";
    }
    body += "</table>";
  }
  body += "<h2>Near matches</h2><table><tr><th>Workload</th><th>Differs in</th><th>Best</th></tr>";
  for (const auto& n : v["near"]) {
    std::string facets;
    for (const auto& d : n["differs"]) facets += e(d["facet"]) + " (" + e(d["have"]) + " vs " + e(d["want"]) + ") ";
    body += "<tr><td>" + e(n["label"]) + "</td><td>" + facets + "</td><td>" +
            (n["best"].is_null() ? "" : run_link(n["best"], format_ns(n["best"]["latencyNs"].get<double>()) + " " + n["best"].value("implementation", ""))) +
            "</td></tr>";
  }
  return page("Resolve · kindex", body + "</table>");
}

std::string leaderboard_page(const json& v) {
  const json& op = v["operation"];
  const std::string slug = op["slug"];
  const json& f = v["filters"];
  std::string query;
  for (const char* k : {"device", "author", "baseline"}) {
    if (!f.value(k, std::string()).empty()) query += std::string(query.empty() ? "?" : "&") + k + "=" + url(f[k]);
  }
  std::string body = "<h1 id=\"title\">Leaderboard · " + e(op["title"]) + "</h1><p class=\"muted\"><a href=\"/operations/" +
                     url(slug) + "\">operation page</a> · <a href=\"/api/operations/" + url(slug) + "/leaderboard" + query +
                     "\">JSON</a></p>";
  // Filters: a plain GET form (no script needed).
  body += "<form method=\"get\" action=\"/operations/" + url(slug) + "/leaderboard\" id=\"filters\">device <select name=\"device\">"
          "<option value=\"\">all</option>";
  for (const auto& d : v["devices"]) {
    body += "<option value=\"" + e(d) + "\"" + (d == f["device"] ? " selected" : "") + ">" + e(d) + "</option>";
  }
  body += "</select> author <input name=\"author\" value=\"" + e(f["author"]) + "\" list=\"authors\"><datalist id=\"authors\">";
  for (const auto& a : v["authors"]) body += "<option value=\"" + e(a) + "\">";
  body += "</datalist> baseline <select name=\"baseline\"><option value=\"\">default</option>";
  for (const auto& en : v["entries"]) {
    body += "<option value=\"" + e(en["slug"]) + "\"" + (en["slug"] == f["baseline"] ? " selected" : "") + ">" + e(en["title"]) + "</option>";
  }
  body += "</select> <button>Apply</button></form>";
  const json& b = v["baseline"];
  body += "<p id=\"baseline\">" +
          (b.is_null() ? std::string("No speedup shown: no implementation of this operation has the baseline role "
                                     "(choose one as the baseline above to compare against it).")
                       : "Speedup over <b>" + e(b["title"]) + "</b> (" + e(b["chosenBy"]) +
                             "): its latency divided by each implementation's, averaged over every workload, GPU and "
                             "protocol where both have a passed run.") +
          "</p>";
  body += "<table id=\"leaderboard\"><tr><th>#</th><th>Implementation</th><th>Author</th><th>Avg speedup</th><th>Geomean</th>"
          "<th>Compared</th><th>Pass rate</th><th>Workloads</th><th>Median latency</th></tr>";
  for (const auto& en : v["entries"]) {
    std::string authors;
    for (const auto& a : en["authors"]) authors += (authors.empty() ? "" : ", ") + e(a);
    const json& lat = en["latency"];
    body += std::string("<tr class=\"entry") + (en["baseline"].get<bool>() ? " baseline" : "") + "\"><td class=\"num\">" +
            e(en["position"]) + "</td><td><a href=\"/implementations/" + url(en["id"]) + "\">" + e(en["title"]) + "</a></td><td>" +
            authors + "</td><td class=\"num speedup\">" +
            (en["avgSpeedup"].is_number() ? html_escape(times(en["avgSpeedup"])) : "—") + "</td><td class=\"num\">" +
            (en["geomeanSpeedup"].is_number() ? html_escape(times(en["geomeanSpeedup"])) : "—") + "</td><td class=\"num\">" +
            e(en["cohortsCompared"]) + "</td><td class=\"num pass-rate\">" +
            html_escape(fmt("%.0f%%", 100 * en["passRate"].get<double>())) + " <span class=\"muted\">(" + e(en["passed"]) + "/" +
            e(en["runs"]) + ")</span></td><td class=\"num\">" + e(en["workloads"]) + "</td><td class=\"num\">" +
            (lat.value("count", 0) > 0 ? latency(lat["medianNs"]) : "—") + "</td></tr>";
  }
  body += "</table>";
  if (v["entries"].empty()) body += "<p>No implementation matches these filters.</p>";
  body += "<h2>Latency distribution</h2><p class=\"muted\">Best latency per workload and GPU: whiskers from the fastest to the "
          "slowest, box from the first to the third quartile, the bar at the median.</p>" + leaderboard_plot_svg(v);
  return page("Leaderboard · " + op["title"].get<std::string>() + " · kindex", body);
}

std::string records_page(const json& records, const std::string& operation) {
  std::string body = "<h1>Records" + (operation.empty() ? std::string() : " · " + html_escape(operation)) + "</h1>";
  body += "<table><tr><th>Operation</th><th>Workload</th><th>Record</th><th>Latency</th><th>History</th></tr>";
  for (const auto& r : records) {
    std::string history;
    for (const auto& h : r["history"]) history += e(h["cause"]) + " " + e(h["at"].get<std::string>().substr(0, 10)) + "<br>";
    body += "<tr><td>" + e(r["operationName"]) + "</td><td>" + e(r["workload"]) + "</td><td>" +
            (r["record"].is_null() ? "—" : run_link(r["record"], r["record"].value("implementation", ""))) + "</td><td class=\"num\">" +
            (r["record"].is_null() ? "" : latency(r["record"]["latencyNs"])) + "</td><td>" + history + "</td></tr>";
  }
  return page("Records · kindex", body + "</table>");
}

std::string error_page(int status, const std::string& message) {
  return page("Error " + std::to_string(status), "<h1>Error " + std::to_string(status) + "</h1><p>" + html_escape(message) + "</p>");
}

namespace page_parts {

const char* const kPalette[8] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"};

double log_position(double v, double lo, double hi, double px_lo, double px_hi) {
  double t = (std::log10(v) - std::log10(lo)) / std::max(1e-9, std::log10(hi) - std::log10(lo));
  return px_lo + t * (px_hi - px_lo);
}

}  // namespace page_parts

// The x axis of the latency plot: workloads ordered by the integer axis that takes the most distinct values among
// them (ties: fewer other axes changing, then the name), then by the other axes, so lines run left to right
// along one size instead of zig-zagging in picker order. Returns the axis name and workload ids in order.
namespace {
std::pair<std::string, std::vector<std::string>> workload_order(const json& workloads) {
  std::map<std::string, std::set<int64_t>> values;
  for (const auto& w : workloads) {
    const json axes = w.value("axes", json::object());
    for (const auto& [k, a] : axes.items()) {
      if (a.is_number_integer()) values[k].insert(a.get<int64_t>());
    }
  }
  std::string axis;
  for (const auto& [k, vals] : values) {
    if (axis.empty() || vals.size() > values[axis].size()) axis = k;
  }
  std::vector<std::pair<std::vector<int64_t>, std::string>> keyed;
  for (const auto& w : workloads) {
    const json axes = w.value("axes", json::object());
    std::vector<int64_t> key;
    auto value = [&](const std::string& k) { return axes.contains(k) && axes[k].is_number_integer() ? axes[k].get<int64_t>() : INT64_MIN; };
    if (!axis.empty()) key.push_back(value(axis));
    for (const auto& [k, vals] : values) {
      if (k != axis) key.push_back(value(k));
    }
    keyed.push_back({key, w["id"]});
  }
  std::stable_sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> ids;
  for (auto& [key, id] : keyed) ids.push_back(std::move(id));
  return {axis, ids};
}
}  // namespace

std::string latency_plot_svg(const json& v) {
  const json& points = v["plots"]["latency"];
  std::map<std::string, int> workload_index;
  std::map<std::string, std::string> workload_labels;
  for (const auto& w : v["workloads"]) workload_labels[w["id"]] = w["label"];
  auto [order_axis, order] = workload_order(v["workloads"]);
  int n = 0;
  for (const auto& id : order) workload_index[id] = n++;
  std::map<std::string, std::string> names;
  for (const auto& i : v["implementations"]) names[i["id"]] = i["title"];
  std::map<std::string, std::vector<std::pair<int, double>>> series;
  double lo = 1e300, hi = 0;
  for (const auto& p : points) {
    double ns = p["latencyNs"];
    if (ns <= 0 || !workload_index.count(p["workloadId"])) continue;
    series[p["implementationId"]].push_back({workload_index[p["workloadId"]], ns});
    lo = std::min(lo, ns);
    hi = std::max(hi, ns);
  }
  const int width = 900, left = 70, right = 250, top = 10, height = 260, bottom = 40;
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"plot\" id=\"latency-plot\" width=\"" +
                    std::to_string(width) + "\" height=\"" + std::to_string(height + top + bottom) +
                    "\" role=\"img\" aria-label=\"latency per workload for each implementation\">";
  if (series.empty()) return svg + "<text x=\"10\" y=\"20\">No passed runs to plot.</text></svg>";
  lo /= 1.5;
  hi *= 1.5;
  double x0 = left, x1 = width - right;
  svg += "<rect x=\"" + std::to_string(left) + "\" y=\"" + std::to_string(top) + "\" width=\"" + std::to_string(int(x1 - x0)) +
         "\" height=\"" + std::to_string(height) + "\" fill=\"#fff\" stroke=\"#ccc\"/>";
  for (double tick = std::pow(10, std::floor(std::log10(lo))); tick <= hi; tick *= 10) {
    if (tick < lo) continue;
    double y = log_position(tick, lo, hi, top + height, top);
    svg += "<line x1=\"" + fmt("%.1f", x0) + "\" x2=\"" + fmt("%.1f", x1) + "\" y1=\"" + fmt("%.1f", y) + "\" y2=\"" +
           fmt("%.1f", y) + "\" stroke=\"#eee\"/><text x=\"" + fmt("%.1f", x0 - 4) + "\" y=\"" + fmt("%.1f", y + 4) +
           "\" font-size=\"11\" text-anchor=\"end\">" + html_escape(format_ns(tick)) + "</text>";
  }
  svg += "<text x=\"" + fmt("%.1f", (x0 + x1) / 2) + "\" y=\"" + std::to_string(top + height + 30) +
         "\" font-size=\"12\" text-anchor=\"middle\">" +
         html_escape(order_axis.empty() ? "workload" : "workload, by " + order_axis) + "</text>";
  auto xpos = [&](int i) { return n <= 1 ? (x0 + x1) / 2 : x0 + 15 + i * (x1 - x0 - 30) / (n - 1); };
  int color = 0, legend = 0;
  for (auto& [impl, pts] : series) {
    std::sort(pts.begin(), pts.end());
    std::string c = kPalette[color++ % 8];
    std::string path;
    for (const auto& [i, ns] : pts) {
      double x = xpos(i), y = log_position(ns, lo, hi, top + height, top);
      path += (path.empty() ? "M" : " L") + fmt("%.1f", x) + "," + fmt("%.1f", y);
      svg += "<circle cx=\"" + fmt("%.1f", x) + "\" cy=\"" + fmt("%.1f", y) + "\" r=\"3\" fill=\"" + c + "\"><title>" +
             html_escape(names[impl] + " · " + workload_labels[order[i]] + ": " + format_ns(ns)) + "</title></circle>";
    }
    svg += "<path d=\"" + path + "\" fill=\"none\" stroke=\"" + c + "\" stroke-width=\"1.5\"/>";
    if (legend < 12) {
      int ly = top + 14 + 16 * legend++;
      svg += "<rect x=\"" + fmt("%.1f", x1 + 10) + "\" y=\"" + std::to_string(ly - 9) + "\" width=\"10\" height=\"10\" fill=\"" + c +
             "\"/><text x=\"" + fmt("%.1f", x1 + 24) + "\" y=\"" + std::to_string(ly) + "\" font-size=\"11\">" +
             html_escape(names[impl].substr(0, 36)) + "</text>";
    }
  }
  return svg + "</svg>";
}

std::string floor_plot_svg(const json& v) {
  const json& points = v["plots"]["floors"];
  std::map<std::string, std::string> labels;
  for (const auto& w : v["workloads"]) labels[w["id"]] = w["label"];
  const int row = 16, left = 360, width = 900, top = 10;
  int rows = static_cast<int>(std::min<size_t>(points.size(), 60));
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"plot\" id=\"floor-plot\" width=\"" + std::to_string(width) +
                    "\" height=\"" + std::to_string(top + 30 + row * std::max(rows, 1)) +
                    "\" role=\"img\" aria-label=\"each record against its headroom-v1 floor\">";
  if (points.empty()) return svg + "<text x=\"10\" y=\"20\">No floors (no datasheet entry for these GPUs).</text></svg>";
  double hi = 1;
  for (const auto& p : points) hi = std::max(hi, p["ratio"].get<double>());
  hi *= 1.3;
  double x0 = left, x1 = width - 60;
  svg += "<line x1=\"" + fmt("%.1f", x0) + "\" x2=\"" + fmt("%.1f", x0) + "\" y1=\"" + std::to_string(top) + "\" y2=\"" +
         std::to_string(top + row * rows) + "\" stroke=\"#000\"/><text x=\"" + fmt("%.1f", x0) + "\" y=\"" +
         std::to_string(top + row * rows + 14) + "\" font-size=\"11\">floor (1×)</text>";
  for (int i = 0; i < rows; ++i) {
    const json& p = points[i];
    double ratio = p["ratio"];
    double x = log_position(std::max(ratio, 1.0), 1.0, hi, x0, x1);
    int y = top + row * i;
    svg += "<text x=\"" + fmt("%.1f", x0 - 6) + "\" y=\"" + std::to_string(y + 12) + "\" font-size=\"10\" text-anchor=\"end\">" +
           html_escape((labels[p["workloadId"]] + " · " + p["gpu"].get<std::string>()).substr(0, 70)) + "</text>";
    svg += "<rect x=\"" + fmt("%.1f", x0) + "\" y=\"" + std::to_string(y + 3) + "\" width=\"" + fmt("%.1f", std::max(1.0, x - x0)) +
           "\" height=\"10\" fill=\"#4c78a8\"><title>" + html_escape(format_ns(p["recordNs"]) + " record vs " + format_ns(p["floorNs"]) + " floor") +
           "</title></rect><text x=\"" + fmt("%.1f", x + 4) + "\" y=\"" + std::to_string(y + 12) + "\" font-size=\"10\">" +
           html_escape(fmt("%.1f×", ratio)) + "</text>";
  }
  return svg + "</svg>";
}

std::string leaderboard_plot_svg(const json& v) {
  std::vector<const json*> rows;
  double lo = 1e300, hi = 0;
  for (const auto& en : v["entries"]) {
    const json& lat = en["latency"];
    if (lat.value("count", 0) == 0 || rows.size() >= 40) continue;
    rows.push_back(&en);
    lo = std::min(lo, lat["minNs"].get<double>());
    hi = std::max(hi, lat["maxNs"].get<double>());
  }
  const int row = 22, left = 260, width = 900, top = 10, right = 30;
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"plot\" id=\"leaderboard-plot\" width=\"" +
                    std::to_string(width) + "\" height=\"" + std::to_string(top + 40 + row * std::max<size_t>(rows.size(), 1)) +
                    "\" role=\"img\" aria-label=\"latency distribution per implementation\">";
  if (rows.empty() || lo <= 0) return svg + "<text x=\"10\" y=\"20\">No passed latency runs to plot.</text></svg>";
  lo /= 1.5;
  hi *= 1.5;
  const double x0 = left, x1 = width - right;
  const int bottom = top + row * static_cast<int>(rows.size());
  auto x = [&](double ns) { return fmt("%.1f", log_position(ns, lo, hi, x0, x1)); };
  for (double tick = std::pow(10, std::floor(std::log10(lo))); tick <= hi; tick *= 10) {
    if (tick < lo) continue;
    svg += "<line x1=\"" + x(tick) + "\" x2=\"" + x(tick) + "\" y1=\"" + std::to_string(top) + "\" y2=\"" + std::to_string(bottom) +
           "\" stroke=\"#eee\"/><text x=\"" + x(tick) + "\" y=\"" + std::to_string(bottom + 14) +
           "\" font-size=\"11\" text-anchor=\"middle\">" + html_escape(format_ns(tick)) + "</text>";
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    const json& en = *rows[i];
    const json& lat = en["latency"];
    const int y = top + row * static_cast<int>(i), mid = y + row / 2;
    const std::string c = kPalette[i % 8];
    svg += "<text x=\"" + fmt("%.1f", x0 - 6) + "\" y=\"" + std::to_string(mid + 4) + "\" font-size=\"11\" text-anchor=\"end\">" +
           html_escape(en["title"].get<std::string>().substr(0, 40)) + "</text>";
    svg += "<line x1=\"" + x(lat["minNs"]) + "\" x2=\"" + x(lat["maxNs"]) + "\" y1=\"" + std::to_string(mid) + "\" y2=\"" +
           std::to_string(mid) + "\" stroke=\"" + c + "\"/>";
    svg += "<rect x=\"" + x(lat["q1Ns"]) + "\" y=\"" + std::to_string(y + 4) + "\" width=\"" +
           fmt("%.1f", std::max(1.0, log_position(lat["q3Ns"], lo, hi, x0, x1) - log_position(lat["q1Ns"], lo, hi, x0, x1))) +
           "\" height=\"" + std::to_string(row - 8) + "\" fill=\"" + c + "\" fill-opacity=\"0.25\" stroke=\"" + c + "\"><title>" +
           html_escape(en["title"].get<std::string>() + ": median " + format_ns(lat["medianNs"]) + ", quartiles " +
                       format_ns(lat["q1Ns"]) + " to " + format_ns(lat["q3Ns"]) + ", " + std::to_string(lat["count"].get<int64_t>()) +
                       " workload results") +
           "</title></rect><line x1=\"" + x(lat["medianNs"]) + "\" x2=\"" + x(lat["medianNs"]) + "\" y1=\"" + std::to_string(y + 3) +
           "\" y2=\"" + std::to_string(y + row - 3) + "\" stroke=\"" + c + "\" stroke-width=\"2\"/>";
    size_t n = 0;
    for (const auto& ns : lat["valuesNs"]) {
      if (n++ >= 200) break;
      svg += "<circle cx=\"" + x(ns) + "\" cy=\"" + std::to_string(mid) + "\" r=\"1.5\" fill=\"" + c + "\"/>";
    }
  }
  return svg + "</svg>";
}

}  // namespace kindex::web
