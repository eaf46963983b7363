// runs.jsonl (each run appended the moment it ends) and results.json (the whole report, at the end).
#include <filesystem>
#include <fstream>

#include "runner/record/sinks.hpp"
#include "core/error.hpp"

namespace kindex::runner {

namespace {

class ResultsJsonSink final : public RunSink {
 public:
  ResultsJsonSink(const std::string& out_dir, OutputSummary& summary) : dir_(out_dir), summary_(summary) {
    std::filesystem::create_directories(dir_);
    runs_.open(dir_ / "runs.jsonl", std::ios::app);
    if (!runs_) throw Error("kindex bench", "--out", out_dir, "cannot write runs.jsonl there");
  }
  void add(const RunResult& r, const WorkItem&, const Environment&) override {
    runs_ << r.to_json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
  }
  void finish(const BenchReport& report) override {
    write_output_file((dir_ / "results.json").string(), report.to_json().dump(2) + "\n", summary_.files);
  }

 private:
  std::filesystem::path dir_;
  OutputSummary& summary_;
  std::ofstream runs_;
};

}  // namespace

std::unique_ptr<RunSink> make_results_json_sink(const std::string& out_dir, OutputSummary& summary) {
  return std::make_unique<ResultsJsonSink>(out_dir, summary);
}

}  // namespace kindex::runner
