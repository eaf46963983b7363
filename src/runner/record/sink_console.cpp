// What the terminal shows at the end: the human table, or the JSON report with what was written.
#include <algorithm>
#include <cstdio>
#include <ostream>
#include <sstream>

#include "runner/record/sinks.hpp"
#include "runner/execute/solution.hpp"

namespace kindex::runner {

namespace {

std::string format_latency(double ns_value) {
  char buf[32];
  if (ns_value <= 0) return std::string("-");
  if (ns_value < 1e3)
    std::snprintf(buf, sizeof buf, "%.0f ns", ns_value);
  else if (ns_value < 1e6)
    std::snprintf(buf, sizeof buf, "%.2f us", ns_value / 1e3);
  else if (ns_value < 1e9)
    std::snprintf(buf, sizeof buf, "%.3f ms", ns_value / 1e6);
  else
    std::snprintf(buf, sizeof buf, "%.3f s", ns_value / 1e9);
  return std::string(buf);
}

// Columns padded to their widest cell, the header underlined.
std::string format_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& row : rows)
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  std::ostringstream out;
  for (size_t i = 0; i < rows.size(); ++i) {
    for (size_t c = 0; c < rows[i].size(); ++c)
      out << rows[i][c] << std::string(width[c] - rows[i][c].size() + (c + 1 < rows[i].size() ? 2 : 0), ' ');
    out << "\n";
    if (i == 0) {
      size_t total = 0;
      for (size_t c = 0; c < width.size(); ++c) total += width[c] + (c + 1 < width.size() ? 2 : 0);
      out << std::string(total, '-') << "\n";
    }
  }
  return out.str();
}

}  // namespace

std::string results_table(const BenchReport& report) {
  auto ratio = [](const std::optional<double>& v) {
    if (!v) return std::string("-");
    char buf[32];
    std::snprintf(buf, sizeof buf, *v >= 100 ? "%.0fx" : "%.2fx", *v);
    return std::string(buf);
  };
  std::vector<std::vector<std::string>> rows;
  const std::string target = report.environment.floor_target();
  rows.push_back({"problem", "workload", "implementation", "status", "latency", "speedup", "x floor (" + target + ")",
                  "x kindex floor", "timer"});
  for (const auto& r : report.results) {
    std::string axes;
    for (const auto& [k, v] : r.axes) {
      if (k == "len_indptr") continue;  // batch_size + 1
      axes += (axes.empty() ? "" : " ") + k + "=" + std::to_string(v);
    }
    rows.push_back({r.definition, axes, r.implementation, std::string(status_name(r.status)),
                    format_latency(r.latency_ns()),
                    ratio(r.speedup), ratio(r.headroom_ratio), ratio(r.kindex_ratio), r.timing.timer});
  }
  std::ostringstream out;
  out << format_table(rows);
  for (const auto& r : report.results)
    if (r.status != RunStatus::passed)
      out << r.definition << " " << r.workload_uuid.substr(0, 8) << " " << r.implementation << ": "
          << status_name(r.status) << ": " << r.message << "\n";
  out << peer_table(report) << set_up_summary(report);
  return out.str();
}

std::string set_up_summary(const BenchReport& report) {
  std::string text;
  for (const auto& [spec, s] : report.set_up) {
    char wall[32];
    std::snprintf(wall, sizeof wall, "%.1f s", s.wall_s);
    std::string entry = spec + " ";
    if (s.status == "prepared") {
      entry += wall + std::string(" (") + std::to_string(s.workloads) + " workloads";
      if (const std::string what = peer_set_up(spec); !what.empty()) entry += "; " + what;
      if (s.compile_cache_hits || s.compile_cache_misses)
        entry += "; torch.compile's on-disk cache: " + std::to_string(s.compile_cache_hits) + " hits, " +
                 std::to_string(s.compile_cache_misses) + " misses";
      if (s.warm_up_processes)
        entry += "; " + std::to_string(s.warm_up_processes) + " warm-up processes filled that cache meanwhile";
      entry += ")";
    } else if (s.status == "timeout") {
      entry += "ended after " + std::string(wall) + ": " + s.message + " (its runs were not run)";
    } else {
      entry += "failed after " + std::string(wall) + ": " + s.message + " (its runs went on)";
    }
    text += (text.empty() ? "" : "; ") + entry;
  }
  if (text.empty()) return "";
  return "set-up before the runs: " + text +
         ". Each was done in its own worker while the other implementations' runs were measured, and is part of no "
         "run's time.\n";
}

std::string peer_table(const BenchReport& report) {
  // Per workload: kindex's latency and the fastest peer that passed there.
  struct Row {
    const RunResult* kindex = nullptr;
    const RunResult* best = nullptr;
  };
  std::vector<std::pair<std::string, Row>> rows;  // in the results' order
  bool any_peer = false;
  auto row = [&](const RunResult& r) -> Row& {
    const std::string key = r.definition + "/" + r.workload_uuid;
    for (auto& [k, v] : rows)
      if (k == key) return v;
    return rows.emplace_back(key, Row{}).second;
  };
  for (const auto& r : report.results) {
    if (r.implementation == "kindex") row(r).kindex = &r;
    if (!is_peer(r.implementation)) continue;
    any_peer = true;
    if (r.status != RunStatus::passed || r.latency_ns() <= 0) continue;
    Row& w = row(r);
    if (!w.best || r.latency_ns() < w.best->latency_ns()) w.best = &r;
  }
  std::ostringstream out;
  if (any_peer) {
    std::vector<std::vector<std::string>> cells = {
        {"problem", "workload", "kindex", "best peer", "peer latency", "peer / kindex"}};
    for (const auto& [key, w] : rows) {
      const RunResult* any = w.kindex ? w.kindex : w.best;
      if (!any) continue;
      const bool kindex_ok = w.kindex && w.kindex->status == RunStatus::passed && w.kindex->latency_ns() > 0;
      std::string ratio = "-";
      if (kindex_ok && w.best) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.2fx", w.best->latency_ns() / w.kindex->latency_ns());
        ratio = buf;
      }
      cells.push_back({any->definition, any->workload_uuid.substr(0, 8),
                       kindex_ok ? format_latency(w.kindex->latency_ns())
                                 : w.kindex ? std::string(status_name(w.kindex->status)) : "-",
                       w.best ? w.best->implementation : "(none passed)",
                       w.best ? format_latency(w.best->latency_ns()) : "-", ratio});
    }
    out << "\nkindex beside the best peer that ran (peer / kindex > 1: kindex is faster)\n" << format_table(cells);
  }
  for (const auto& [spec, why] : report.not_available) out << "peer " << spec << " not available: " << why << "\n";
  return out.str();
}

namespace {

class ConsoleSink final : public RunSink {
 public:
  ConsoleSink(std::ostream& out, bool json, const OutputOptions& output, const OutputSummary& summary)
      : out_(out), json_(json), output_(output), summary_(summary) {}
  void add(const RunResult&, const WorkItem&, const Environment&) override {}
  void finish(const BenchReport& report) override {
    const OutputSummary& written = summary_;
    if (json_) {
      nlohmann::json j = report.to_json();
      j["outputs"] = {{"files", written.files},
                      {"runs_recorded", written.runs_recorded},
                      {"runs_already_stored", written.runs_already_stored}};
      out_ << j.dump(2) << "\n";
      return;
    }
    const Environment& env = report.environment;
    out_ << "kindex bench on "
         << (env.has_gpu ? env.gpu_name + " (" + env.architecture + ")" : env.cpu_model + " (no GPU: CPU path)")
         << ", kindex " << env.kindex_version << "\n\n";
    out_ << results_table(report);
    if (!output_.out_dir.empty())
      out_ << "\nwrote " << written.files.size() << " files under " << output_.out_dir << "/";
    if (!output_.store_uri.empty())
      out_ << "; store " << output_.store_uri << ": " << written.runs_recorded << " runs recorded, "
           << written.runs_already_stored << " already there";
    out_ << "\n";
  }

 private:
  std::ostream& out_;
  bool json_;
  OutputOptions output_;
  const OutputSummary& summary_;
};

}  // namespace

std::unique_ptr<RunSink> make_console_sink(std::ostream& out, bool json, const OutputOptions& output,
                                           const OutputSummary& summary) {
  return std::make_unique<ConsoleSink>(out, json, output, summary);
}

}  // namespace kindex::runner
