// A writer killed with SIGKILL mid-import loses nothing it committed, and the database stays consistent; readers
// read while it writes (WAL).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <set>

#include "store/fixtures.hpp"

namespace kindex::store {
namespace {

TEST(Crash, SigkillMidImportKeepsEveryCommittedRun) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("kindex-crash-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::string db = "sqlite:" + (dir / "index.db").string();
  Store::open(db);  // schema before the child starts
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(fds[0]);
    auto s = Store::open(db);
    for (int i = 0;; ++i) {
      std::vector<double> samples(50);
      for (size_t k = 0; k < samples.size(); ++k) samples[k] = 8000 + i + static_cast<double>(k);
      RecordResult r = s->record_run(test::example_run(8000 + i, i, true, samples, i + 1));  // one transaction each
      std::string line = r.run_id + "\n";
      if (write(fds[1], line.data(), line.size()) < 0) _exit(1);
    }
  }
  close(fds[1]);
  FILE* in = fdopen(fds[0], "r");
  std::set<std::string> committed;
  char buf[128];
  // While the child writes, a reader in this process reads.
  auto reader = Store::open(db);
  while (committed.size() < 40 && fgets(buf, sizeof buf, in)) {
    committed.insert(std::string(buf, strcspn(buf, "\n")));
    reader->counts();
  }
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  fclose(in);
  EXPECT_TRUE(WIFSIGNALED(status));
  reader.reset();

  auto s = Store::open(db);
  EXPECT_EQ(s->integrity_check(), "ok");
  for (const auto& id : committed) {
    auto rows = s->db().query(
        "SELECT (SELECT COUNT(*) FROM run_samples WHERE run_id = r.id), (SELECT COUNT(*) FROM measurements WHERE "
        "run_id = r.id) FROM benchmark_runs r WHERE r.id = ?",
        {id});
    ASSERT_EQ(rows.size(), 1u) << id;
    EXPECT_EQ(rows[0].integer(0), 50) << id;
    EXPECT_EQ(rows[0].integer(1), 1) << id;
  }
  EXPECT_GE(s->counts()["benchmark_runs"].get<int64_t>(), static_cast<int64_t>(committed.size()));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kindex::store
