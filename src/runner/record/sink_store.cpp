// Each run's row in the local store (SQLite or PostgreSQL): its KernelIndex records in one transaction, so a bench
// that is killed keeps every run recorded before it.
#include <filesystem>

#include "runner/record/records.hpp"
#include "runner/record/sinks.hpp"
#include "store/store.hpp"

namespace kindex::runner {

namespace {

class StoreSink final : public RunSink {
 public:
  StoreSink(const std::string& uri, bool samples_in_files, OutputSummary& summary)
      : uri_(uri), samples_in_files_(samples_in_files), summary_(summary) {}
  void add(const RunResult& r, const WorkItem& item, const Environment& environment) override {
    const store::OwnRun own = own_run(r, item, environment, samples_in_files_);
    if (!db_) {  // opened at the first run
      std::string path = uri_.rfind("sqlite:", 0) == 0 ? uri_.substr(7) : uri_;
      const bool is_file = uri_.find("://") == std::string::npos && path != ":memory:";
      if (is_file && std::filesystem::path(path).has_parent_path())
        std::filesystem::create_directories(std::filesystem::path(path).parent_path());
      db_ = store::Store::open(uri_);
    }
    auto recorded = db_->record_run(own);
    if (recorded.inserted)
      ++summary_.runs_recorded;
    else
      ++summary_.runs_already_stored;
  }

 private:
  std::string uri_;
  bool samples_in_files_;
  OutputSummary& summary_;
  std::unique_ptr<store::Store> db_;
};

}  // namespace

store::OwnRun own_run(const RunResult& r, const WorkItem& item, const Environment& environment, bool samples_in_files) {
  const RunRecords rec = run_records(r, item, environment, samples_in_files);
  store::OwnRun own;
  own.operation = rec.operation.document;
  own.workload = rec.workload.document;
  own.implementation = rec.implementation.document;
  own.protocol = rec.protocol.document;
  own.environment = rec.environment.document;
  own.run = rec.run.document;
  own.definition_name = item.definition->name;
  own.samples_ns = rec.samples;
  own.real_gpu = environment.has_gpu && r.timed_on_device;
  if (r.kindex_floor) own.kindex_floor_ns = r.kindex_floor->floor_s * 1e9;
  if (r.timing.summary) {
    own.interval_low_ns = r.timing.summary->pooled.ci95_low;
    own.interval_high_ns = r.timing.summary->pooled.ci95_high;
  }
  return own;
}

std::unique_ptr<RunSink> make_store_sink(const std::string& uri, bool samples_in_files, OutputSummary& summary) {
  return std::make_unique<StoreSink>(uri, samples_in_files, summary);
}

}  // namespace kindex::runner
