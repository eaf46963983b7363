#include "runner/record/sinks.hpp"

#include <filesystem>
#include <fstream>

#include "core/error.hpp"

namespace kindex::runner {

namespace fs = std::filesystem;

void write_output_file(const std::string& path, const std::string& text, std::vector<std::string>& files) {
  const fs::path p(path);
  fs::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary);
  if (!out) throw Error("kindex bench", "--out", p.parent_path().string(), "cannot write " + p.string());
  out << text;
  files.push_back(p.string());
}

RecordWriter::RecordWriter(const std::vector<WorkItem>& items, const OutputOptions& out)
    : items_(items), summary_(std::make_unique<OutputSummary>()) {
  if (!out.out_dir.empty()) {
    sinks_.push_back(make_results_json_sink(out.out_dir, *summary_));
    sinks_.push_back(make_trace_sink(out.out_dir, *summary_));
    sinks_.push_back(make_manifest_sink(out.out_dir, *summary_));
  }
  // The store last, so the files are written even when it cannot be opened.
  if (!out.store_uri.empty()) sinks_.push_back(make_store_sink(out.store_uri, !out.out_dir.empty(), *summary_));
}

void RecordWriter::add(const RunResult& r, const Environment& environment) {
  const WorkItem* item = nullptr;
  for (const auto& it : items_)
    if (it.definition->name == r.definition && it.workload->uuid == r.workload_uuid) item = &it;
  if (!item) return;
  for (auto& sink : sinks_) sink->add(r, *item, environment);
}

void RecordWriter::finish(const BenchReport& report) {
  for (auto& sink : sinks_) sink->finish(report);
}

OutputSummary write_outputs(const BenchReport& report, const std::vector<WorkItem>& items, const OutputOptions& out) {
  RecordWriter writer(items, out);
  for (const auto& r : report.results) writer.add(r, report.environment);
  writer.finish(report);
  return writer.summary();
}

}  // namespace kindex::runner
