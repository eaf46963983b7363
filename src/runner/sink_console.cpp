// What the terminal shows at the end: the human table, or the JSON report with what was written.
#include <algorithm>
#include <cstdio>
#include <ostream>
#include <sstream>

#include "runner/sinks.hpp"

namespace kindex::runner {

std::string results_table(const BenchReport& report) {
  auto time = [](double ns_value) {
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
  };
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
    rows.push_back({r.definition, axes, r.implementation, std::string(status_name(r.status)), time(r.latency_ns()),
                    ratio(r.speedup), ratio(r.headroom_ratio), ratio(r.kindex_ratio), r.timing.timer});
  }
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
  for (const auto& r : report.results)
    if (r.status != RunStatus::passed)
      out << r.definition << " " << r.workload_uuid.substr(0, 8) << " " << r.implementation << ": "
          << status_name(r.status) << ": " << r.message << "\n";
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
