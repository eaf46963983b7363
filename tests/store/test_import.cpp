// Import of the KernelIndex export slice and manifests: digests verified, idempotent, invalid input refused.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "store/import.hpp"
#include "store/query.hpp"
#include "store/store.hpp"
#include "support/paths.hpp"

namespace kindex::store {
namespace {

std::string slice() { return test::data_dir() + "/kernelindex/export-slice-gqa.jsonl.zst"; }
std::string examples() { return test::data_dir() + "/kernelindex/examples"; }

TEST(StoreImport, SliceImportsEveryRowAndSecondImportInsertsNothing) {
  auto store = Store::open(":memory:");
  ImportReport first = import_files(*store, {slice()});
  EXPECT_EQ(first.inserted.at("benchmark_runs"), 347);
  EXPECT_EQ(first.inserted.at("workloads"), 357);
  EXPECT_EQ(first.inserted.at("operations"), 22);
  EXPECT_EQ(first.inserted.at("measurements"), 305);
  EXPECT_EQ(first.inserted.at("record_events"), 301);
  // The export's own record events already name every cohort's running minimum.
  EXPECT_EQ(first.record_events, 0);
  nlohmann::json counts = store->counts();
  ImportReport second = import_files(*store, {slice()});
  EXPECT_EQ(second.total_inserted(), 0);
  EXPECT_EQ(second.record_events, 0);
  EXPECT_EQ(store->counts(), counts);
  EXPECT_EQ(store->integrity_check(), "ok");
}

TEST(StoreImport, TamperedDigestIsRefusedNamingTheColumn) {
  namespace fs = std::filesystem;
  auto dir = fs::temp_directory_path() / ("kindex-tamper-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::string out = (dir / "tampered.jsonl").string();
  // Re-export the slice uncompressed, then change one run's latency inside its manifest.
  auto store = Store::open(":memory:");
  import_files(*store, {slice()});
  export_store(*store, out);
  std::ifstream in(out);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  auto pos = text.find("\"latencyNs\":{\"mean\":");
  ASSERT_NE(pos, std::string::npos);
  text.insert(pos + 20, "1");
  std::ofstream(out) << text;
  auto fresh = Store::open(":memory:");
  try {
    import_files(*fresh, {out});
    FAIL() << "tampered export imported";
  } catch (const Error& e) {
    EXPECT_EQ(e.field(), "runDigest") << e.what();
  }
  fs::remove_all(dir);
}

TEST(StoreImport, ExportRoundTripsThroughImport) {
  namespace fs = std::filesystem;
  auto store = Store::open(":memory:");
  import_files(*store, {slice()});
  std::string out = (fs::temp_directory_path() / ("kindex-rt-" + std::to_string(::getpid()) + ".jsonl.zst")).string();
  nlohmann::json counts = export_store(*store, out);
  EXPECT_EQ(counts["benchmark_runs"], 347);
  auto again = Store::open(":memory:");
  ImportReport rep = import_files(*again, {out});
  EXPECT_EQ(rep.inserted.at("benchmark_runs"), 347);
  EXPECT_EQ(again->counts(), store->counts());
  fs::remove(out);
}

TEST(StoreImport, ValidExampleManifestsImportAndTheirRunIsRanked) {
  auto store = Store::open(":memory:");
  ImportReport rep = import_files(*store, {examples()});
  EXPECT_GE(rep.inserted.at("manifests"), 10);
  EXPECT_EQ(rep.inserted.at("benchmark_runs"), 1);
  EXPECT_EQ(import_files(*store, {examples()}).total_inserted(), 0);
}

TEST(StoreImport, InvalidExampleManifestsAreRefusedWithTheirProblem) {
  const std::map<std::string, std::string> expected = {
      {"bad-digest.yaml", "operationSpecDigest"},
      {"ambiguous-duration.yaml", "median"},
      {"unknown-field.yaml", "popularity"},
      {"duplicate-key.yaml", "name"},
  };
  for (const auto& [file, mention] : expected) {
    auto store = Store::open(":memory:");
    std::string path = examples() + "/invalid/" + file;
    try {
      import_files(*store, {path});
      ADD_FAILURE() << file << " was accepted";
    } catch (const Error& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find(file), std::string::npos) << msg;
      EXPECT_NE(msg.find(mention), std::string::npos) << msg;
    }
    EXPECT_EQ(store->counts()["manifests"], 0) << file;
  }
}

}  // namespace
}  // namespace kindex::store
