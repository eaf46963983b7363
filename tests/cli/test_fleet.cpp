// The run queue end to end (docs/fleet.md): `kindex queue add`, `kindex worker` processes and `kindex queue status`
// against a real PostgreSQL server this test starts, on the CPU reference (a real implementation, no GPU needed).
// Four workers drain 201 runs while one of them is killed mid-run; a paused worker's late result is refused; two
// queues are drained at once; bad arguments queue nothing. Leases are 1 s and the runs tiny, so each test takes
// seconds.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include "cli/support.hpp"
#include "store/postgres_suite.hpp"
#include "store/store.hpp"

namespace {

using kindex::test::kindex_binary;
using kindex::test::Outcome;
using kindex::test::WorkDir;
using Clock = std::chrono::steady_clock;

// Short runs: the CPU reference on one small decode workload, one round, one timed call.
const std::string kShort =
    " --problem gqa_paged_decode_h32_kv4_d128_ps1 --impl cpu-reference --reference cpu-reference --trials 1 "
    "--iterations 1 --warmup 0";
// A run of a few seconds: the same with many timed calls.
const std::string kLong =
    " --problem gqa_paged_decode_h32_kv4_d128_ps1 --workloads 0 --impl cpu-reference --reference cpu-reference "
    "--trials 1 --warmup 0 --iterations 10000";
const std::string kWorker = "worker --lease 1 --poll 0.1 --drain";

// A `kindex worker` started in the background, its output in a file.
struct WorkerProcess {
  pid_t pid = -1;
  std::string log_path;
  WorkerProcess(const WorkDir& dir, const std::string& args, const std::string& name) {
    log_path = (dir.path / (name + ".log")).string();
    pid = fork();
    if (pid == 0) {
      const int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
      if (chdir(dir.path.c_str()) != 0) _exit(127);
      unsetenv("KINDEX_STORE");
      const std::string cmd = "exec " + kindex_binary() + " " + args;
      execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
  }
  ~WorkerProcess() {
    if (pid > 0) kill(pid, SIGKILL), waitpid(pid, nullptr, 0);
  }
  // Its exit code (-signal when killed), or -1000 when it is still running after `timeout_s` (then killed).
  int wait(double timeout_s) {
    const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
    int status = 0;
    while (waitpid(pid, &status, WNOHANG) == 0) {
      if (Clock::now() > deadline) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        pid = -1;
        return -1000;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    pid = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  }
  std::string log() const {
    std::ifstream in(log_path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
};

class Fleet : public kindex::store::test::PostgresSuite {
 protected:
  void SetUp() override {
    PostgresSuite::SetUp();
    if (IsSkipped()) return;
    if (!std::filesystem::exists(kindex_binary())) GTEST_SKIP() << kindex_binary() << " is not built";
  }
  std::string database(const std::string& name) {
    uri_ = PostgresSuite::database(name);
    store_ = kindex::store::Store::open(uri_);
    return uri_;
  }
  int64_t count(const std::string& sql, const std::vector<kindex::store::Value>& params = {}) {
    return store_->db().query(sql, params).at(0).integer(0);
  }
  // The pid of the worker that holds run `id`, once it is running (0 after `timeout_s`).
  int64_t holder_of(int64_t id, double timeout_s) {
    const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
    while (Clock::now() < deadline) {
      auto rows = store_->db().query("SELECT pid FROM run_queue WHERE id = ? AND state = 'running'", {id});
      if (!rows.empty()) return rows[0].integer(0);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return 0;
  }
  std::string uri_;
  std::unique_ptr<kindex::store::Store> store_;
};

TEST_F(Fleet, FourWorkersDrainTheQueueAndAKilledWorkersRunIsRedoneOnce) {
  WorkDir dir;
  const std::string uri = database("drain");
  // The long run first (the first claim takes it), then 200 short ones: 10 workloads under 20 seeds.
  Outcome o = dir.run("queue add --store " + uri + kLong);
  ASSERT_EQ(o.code, 0) << o.output;
  for (int seed = 1; seed <= 20; ++seed) {
    o = dir.run("queue add --store " + uri + kShort + " --workloads 0-9 --seed " + std::to_string(seed));
    ASSERT_EQ(o.code, 0) << o.output;
  }
  ASSERT_EQ(count("SELECT COUNT(*) FROM run_queue WHERE state = 'queued'"), 201);
  const int64_t long_run = count("SELECT MIN(id) FROM run_queue");

  const auto t0 = Clock::now();
  std::vector<std::unique_ptr<WorkerProcess>> workers;
  for (int w = 1; w <= 4; ++w)
    workers.push_back(std::make_unique<WorkerProcess>(
        dir, kWorker + " --store " + uri + " --host w" + std::to_string(w), "w" + std::to_string(w)));
  const int64_t victim = holder_of(long_run, 30);
  ASSERT_GT(victim, 0) << "no worker claimed the long run";
  ASSERT_EQ(kill(pid_t(victim), SIGKILL), 0);
  for (auto& w : workers) {
    const bool killed = w->pid == victim;
    EXPECT_EQ(w->wait(120), killed ? -SIGKILL : 0) << w->log();
  }
  const double drain_s = std::chrono::duration<double>(Clock::now() - t0).count();
  std::cout << "4 workers drained 201 runs in " << drain_s << " s (" << 201 / drain_s << " runs/s)\n";

  // Every run done once: none lost, none recorded twice, each queue row naming its own stored run.
  EXPECT_EQ(count("SELECT COUNT(*) FROM run_queue WHERE state = 'done'"), 201);
  EXPECT_EQ(count("SELECT COUNT(*) FROM benchmark_runs"), 201);
  EXPECT_EQ(count("SELECT COUNT(DISTINCT q.run_id) FROM run_queue q JOIN benchmark_runs r ON r.id = q.run_id"), 201);
  EXPECT_EQ(count("SELECT COUNT(*) FROM run_queue WHERE run_status = 'passed'"), 201);
  // The killed worker's run was redone by another worker, on its second claim.
  auto row = store_->db().query("SELECT attempts, pid FROM run_queue WHERE id = ?", {long_run});
  EXPECT_EQ(row.at(0).integer(0), 2);
  EXPECT_NE(row.at(0).integer(1), victim);
  EXPECT_GE(count("SELECT COUNT(DISTINCT host) FROM run_queue"), 2) << "the runs were shared among the workers";

  Outcome status = dir.run("queue status --store " + uri, "", true);
  EXPECT_EQ(status.code, 0);
  EXPECT_NE(status.output.find("queue default: 201 runs: 0 queued, 0 running, 201 done, 0 failed"), std::string::npos)
      << status.output;
  EXPECT_NE(status.output.find("  w"), std::string::npos) << status.output;
}

TEST_F(Fleet, APausedWorkersLateResultIsRefusedAndTheRunRedoneElsewhere) {
  WorkDir dir;
  const std::string uri = database("paused");
  ASSERT_EQ(dir.run("queue add --store " + uri + kLong).code, 0);
  WorkerProcess a(dir, kWorker + " --store " + uri + " --host a", "a");
  const int64_t id = count("SELECT MIN(id) FROM run_queue");
  ASSERT_EQ(holder_of(id, 30), a.pid);
  // Paused (as if cut off from the server) for longer than its lease: no renewal reaches the store.
  ASSERT_EQ(kill(a.pid, SIGSTOP), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  WorkerProcess b(dir, kWorker + " --store " + uri + " --host b", "b");
  EXPECT_EQ(b.wait(60), 0) << b.log();
  EXPECT_NE(b.log().find("passed, recorded as run"), std::string::npos) << b.log();
  ASSERT_EQ(kill(a.pid, SIGCONT), 0);
  EXPECT_EQ(a.wait(60), 0) << a.log();
  EXPECT_NE(a.log().find("refused: its lease was lost"), std::string::npos) << a.log();

  EXPECT_EQ(count("SELECT COUNT(*) FROM benchmark_runs"), 1);
  auto row = store_->db().query("SELECT state, host, attempts FROM run_queue WHERE id = ?", {id});
  EXPECT_EQ(row.at(0).text(0), "done");
  EXPECT_EQ(row.at(0).text(1), "b");
  EXPECT_EQ(row.at(0).integer(2), 2);
}

// A worker "a" measuring the long run of a queue of it and five short runs: the long run's queue id.
class FleetOutage : public Fleet {
 protected:
  int64_t start_worker_on_the_long_run(const std::string& name) {
    const std::string uri = database(name);
    EXPECT_EQ(dir_.run("queue add --store " + uri + kLong).code, 0);
    EXPECT_EQ(dir_.run("queue add --store " + uri + kShort + " --workloads 0-4").code, 0);
    const int64_t long_run = count("SELECT MIN(id) FROM run_queue");
    worker_ = std::make_unique<WorkerProcess>(dir_, kWorker + " --store " + uri + " --host a", "a");
    EXPECT_EQ(holder_of(long_run, 30), worker_->pid);
    return long_run;
  }
  // The worker drains the queue; each of the six runs is recorded once. Returns the worker's log.
  std::string expect_each_run_recorded_once() {
    EXPECT_EQ(worker_->wait(120), 0) << worker_->log();
    EXPECT_EQ(count("SELECT COUNT(*) FROM run_queue WHERE state = 'done'"), 6) << worker_->log();
    EXPECT_EQ(count("SELECT COUNT(*) FROM benchmark_runs"), 6) << worker_->log();
    EXPECT_EQ(count("SELECT COUNT(DISTINCT q.run_id) FROM run_queue q JOIN benchmark_runs r ON r.id = q.run_id"), 6);
    return worker_->log();
  }
  WorkDir dir_;
  std::unique_ptr<WorkerProcess> worker_;
};

// The worker's connections cut while it measures a run (pg_terminate_backend on every session but this test's): the
// lease keeper renews at once on a fresh connection, so the lease holds; closing the run finds the worker's own
// connection lost and closes it on a fresh one. Every run recorded once, the cut one on its first claim.
TEST_F(FleetOutage, AWorkerWhoseConnectionsAreCutMidRunReconnectsAndRecordsItOnce) {
  const int64_t long_run = start_worker_on_the_long_run("cut");
  // Both of the worker's sessions (its own, and the lease keeper's from its first renewal on) are cut.
  const std::string others = "FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()";
  for (int i = 0; i < 500 && count("SELECT COUNT(*) " + others) < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_GE(count("SELECT COUNT(pg_terminate_backend(pid)) " + others), 2);
  const std::string log = expect_each_run_recorded_once();
  EXPECT_NE(log.find("connection was lost"), std::string::npos) << log;
  EXPECT_EQ(count("SELECT attempts FROM run_queue WHERE id = ?", {long_run}), 1) << log;
}

// The database restarts while a worker measures a run, down longer than the lease: the lease expires, so closing the
// run (on a fresh connection once the server is back) is refused and nothing recorded; the run goes back to the
// queue and the worker, reconnected, redoes it once. Every run recorded once.
TEST_F(FleetOutage, AWorkerOutlivesADatabaseRestartAndTheRunWhoseLeaseExpiredIsRedoneOnce) {
  const int64_t long_run = start_worker_on_the_long_run("restart");
  store_.reset();
  restart_server(2.0);
  store_ = kindex::store::Store::open(uri_);
  const std::string log = expect_each_run_recorded_once();
  EXPECT_EQ(count("SELECT attempts FROM run_queue WHERE id = ?", {long_run}), 2) << log;
  EXPECT_EQ(count("SELECT COUNT(*) FROM run_queue WHERE attempts > 1"), 1) << log;
}

TEST_F(Fleet, TwoQueuesAreDrainedAtOnceEachByItsOwnWorkers) {
  WorkDir dir;
  const std::string uri = database("two");
  ASSERT_EQ(dir.run("queue add --queue alpha --store " + uri + kShort + " --workloads 0-5").code, 0);
  ASSERT_EQ(dir.run("queue add --queue beta --store " + uri + kShort + " --workloads 0-3 --seed 7").code, 0);
  Outcome before = dir.run("queue status --store " + uri, "", true);
  EXPECT_NE(before.output.find("queue alpha: 6 runs: 6 queued, 0 running, 0 done, 0 failed"), std::string::npos)
      << before.output;
  EXPECT_NE(before.output.find("queue beta: 4 runs: 4 queued, 0 running, 0 done, 0 failed"), std::string::npos)
      << before.output;
  WorkerProcess a(dir, kWorker + " --queue alpha --store " + uri + " --host on-alpha", "a");
  WorkerProcess b(dir, kWorker + " --queue beta --store " + uri + " --host on-beta", "b");
  EXPECT_EQ(a.wait(60), 0) << a.log();
  EXPECT_EQ(b.wait(60), 0) << b.log();
  EXPECT_EQ(count("SELECT COUNT(*) FROM run_queue WHERE queue = 'alpha' AND state = 'done' AND host = 'on-alpha'"), 6);
  EXPECT_EQ(count("SELECT COUNT(*) FROM run_queue WHERE queue = 'beta' AND state = 'done' AND host = 'on-beta'"), 4);
  EXPECT_EQ(count("SELECT COUNT(*) FROM benchmark_runs"), 10);
  Outcome after = dir.run("queue status --queue beta --json --store " + uri, "", true);
  ASSERT_EQ(after.code, 0) << after.output;
  const auto j = nlohmann::json::parse(after.output);
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["queue"], "beta");
  EXPECT_EQ(j[0]["hosts"], nlohmann::json::parse(R"([{"host":"on-beta","queued":0,"running":0,"done":4,"failed":0}])"));
}

TEST_F(Fleet, BadArgumentsQueueNothingAndSqliteIsRefused) {
  WorkDir dir;
  const std::string uri = database("bad");
  const std::string base = "queue add --store " + uri;
  struct Case {
    std::string args, expected;
  } cases[] = {
      {" --problem no_such_problem --impl cpu-reference", "--problem = no_such_problem"},
      {" --problem gqa_paged_decode_h32_kv4_d128_ps1 --workloads 9999 --impl cpu-reference", "--workloads = 9999"},
      {" --problem gqa_paged_decode_h32_kv4_d128_ps1 --impl no-such-impl", "--impl = no-such-impl"},
      {" --problem gqa_paged_decode_h32_kv4_d128_ps1 --impl external:/no/such/lib.so", "--impl"},
      {" --problem gqa_paged_decode_h32_kv4_d128_ps1 --impl cpu-reference --reference nonsense", "--reference"},
      {" --problem gqa_paged_decode_h32_kv4_d128_ps1 --impl cpu-reference --trials 0", "--trials"},
      {" --problem gqa_paged_decode_h32_kv4_d128_ps1 --impl cpu-reference --queue ''", "--queue"},
      {" --impl cpu-reference", "--problem"},
  };
  for (const auto& c : cases) {
    Outcome o = dir.run(base + c.args);
    EXPECT_NE(o.code, 0) << c.args;
    EXPECT_NE(o.output.find(c.expected), std::string::npos) << c.args << "\n" << o.output;
  }
  Outcome status = dir.run("queue status --store " + uri, "", true);
  EXPECT_EQ(status.output, "no queue in this store\n") << "a refused queue add queued nothing";

  // SQLite (the default store): the queue commands say the queue needs PostgreSQL, and create no file.
  for (const std::string& args : {"queue add" + kShort, std::string("queue status"), std::string("worker --drain")}) {
    Outcome o = dir.run(args + " --store sqlite:local.db");
    EXPECT_EQ(o.code, 2) << args;
    EXPECT_NE(o.output.find("the run queue needs a PostgreSQL store"), std::string::npos) << args << "\n" << o.output;
  }
  EXPECT_FALSE(std::filesystem::exists(dir.path / "local.db"));
  EXPECT_NE(dir.run("worker --lease 0 --store " + uri).code, 0);
}

}  // namespace
