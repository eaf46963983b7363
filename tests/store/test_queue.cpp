// The run queue's rules against a real PostgreSQL server this test starts (store/queue.hpp): claims skip rows
// another worker holds locked, a lease renews only while held, an expired lease goes back to the queue (or fails
// after its attempts), a lost lease's late result is refused with nothing recorded, and SQLite is refused.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <thread>

#include "core/error.hpp"
#include "store/fixtures.hpp"
#include "store/postgres_suite.hpp"
#include "store/queue.hpp"

namespace kindex::store {
namespace {

class Queue : public test::PostgresSuite {
 protected:
  static std::vector<QueuedRun> runs(int n) {
    std::vector<QueuedRun> out;
    for (int i = 0; i < n; ++i)
      out.push_back({"problem", "definition", "workload-" + std::to_string(i), "cpu-reference", "{}"});
    return out;
  }
  static int64_t count(Store& s, const std::string& sql) { return s.db().query(sql)[0].integer(0); }
};

void sleep_s(double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }

TEST_F(Queue, ClaimsTakeRunsInOrderAndSkipRowsAnotherWorkerHoldsLocked) {
  const std::string uri = database("claims");
  auto a = Store::open(uri), b = Store::open(uri);
  RunQueue qa(*a), qb(*b);
  qa.add("q", runs(3), 3);
  auto first = qa.claim("q", "host-a", 1, 60);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->run.workload, "workload-0");
  EXPECT_EQ(first->attempts, 1);
  // A row another transaction holds locked (a worker closing it) is skipped, not waited for: b takes the next
  // one. (Were it waited for, this thread would wait on itself; the statement timeout turns that into a failure.)
  b->db().script("SET statement_timeout = 5000");
  Transaction t(a->db());
  ASSERT_FALSE(a->db().query("SELECT id FROM run_queue WHERE workload = 'workload-1' FOR UPDATE").empty());
  auto second = qb.claim("q", "host-b", 2, 60);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->run.workload, "workload-2");
  t.rollback();
  auto third = qb.claim("q", "host-b", 2, 60);
  ASSERT_TRUE(third);
  EXPECT_EQ(third->run.workload, "workload-1");
  EXPECT_FALSE(qb.claim("q", "host-b", 2, 60)) << "a run held by a live lease is not claimable";
  EXPECT_EQ(qa.pending("q"), 3);
  EXPECT_FALSE(qa.claim("other", "host-a", 1, 60)) << "a queue's runs are its own";
}

TEST_F(Queue, ALostLeasesLateResultIsRefusedAndTheRunIsRecordedOnce) {
  const std::string uri = database("lease");
  auto s = Store::open(uri);
  RunQueue q(*s);
  q.add("q", runs(1), 3);
  auto late = q.claim("q", "host-a", 1, 0.5);
  ASSERT_TRUE(late);
  EXPECT_TRUE(q.renew(late->id, late->token, 0.5)) << "a held lease renews";
  sleep_s(0.8);
  EXPECT_FALSE(q.renew(late->id, late->token, 0.5)) << "an expired lease does not";
  const auto expired = q.status("q");
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].queued, 1) << "status returns an expired run to the queue";
  EXPECT_EQ(expired[0].running, 0);
  auto redo = q.claim("q", "host-b", 2, 60);
  ASSERT_TRUE(redo) << "the expired run went back to the queue";
  EXPECT_EQ(redo->id, late->id);
  EXPECT_EQ(redo->attempts, 2);
  bool called = false;
  EXPECT_FALSE(q.complete(late->id, late->token, [&] {
    called = true;
    return s->record_run(test::example_run(9000, 1));
  }, "passed"));
  EXPECT_FALSE(called) << "a refused result is not recorded";
  EXPECT_FALSE(q.fail(late->id, late->token, "too late"));
  EXPECT_TRUE(q.complete(redo->id, redo->token, [&] { return s->record_run(test::example_run(9000, 2)); }, "passed"));
  EXPECT_FALSE(q.complete(redo->id, redo->token, [&] { return s->record_run(test::example_run(9000, 3)); }, "passed"))
      << "a run closes once";
  EXPECT_EQ(count(*s, "SELECT COUNT(*) FROM benchmark_runs"), 1);
  auto rows = s->db().query("SELECT state, host, run_id, run_status FROM run_queue");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].text(0), "done");
  EXPECT_EQ(rows[0].text(1), "host-b");
  EXPECT_EQ(count(*s, "SELECT COUNT(*) FROM benchmark_runs WHERE id = (SELECT run_id FROM run_queue)"), 1);
  EXPECT_EQ(rows[0].text(3), "passed");
  const auto status = q.status("q");
  ASSERT_EQ(status.size(), 1u);
  EXPECT_EQ(status[0].host, "host-b");
  EXPECT_EQ(status[0].done, 1);
  EXPECT_EQ(q.pending("q"), 0);
}

TEST_F(Queue, ARecordThatFailsLeavesTheRunHeldAndNothingRecorded) {
  auto s = Store::open(database("rollback"));
  RunQueue q(*s);
  q.add("q", runs(1), 3);
  auto c = q.claim("q", "host-a", 1, 60);
  ASSERT_TRUE(c);
  OwnRun broken = test::example_run(9000, 1);
  broken.run["spec"]["workloadDigest"] = "sha256:" + std::string(64, '0');  // names a workload not given
  EXPECT_THROW(q.complete(c->id, c->token, [&] { return s->record_run(broken); }, "passed"), Error);
  EXPECT_EQ(count(*s, "SELECT COUNT(*) FROM benchmark_runs"), 0);
  EXPECT_EQ(s->db().query("SELECT state FROM run_queue")[0].text(0), "running");
  EXPECT_TRUE(q.fail(c->id, c->token, "could not record"));
  EXPECT_EQ(q.status("q").at(0).failed, 1);
}

TEST_F(Queue, ARunWhoseLeaseExpiresOnEveryClaimFailsAfterItsAttempts) {
  auto s = Store::open(database("attempts"));
  RunQueue q(*s);
  q.add("q", runs(1), 2);
  ASSERT_TRUE(q.claim("q", "host-a", 1, 0.2));
  sleep_s(0.4);
  ASSERT_TRUE(q.claim("q", "host-b", 2, 0.2));
  sleep_s(0.4);
  EXPECT_EQ(q.requeue_expired("q"), 1);
  EXPECT_FALSE(q.claim("q", "host-c", 3, 0.2));
  auto rows = s->db().query("SELECT state, attempts, message FROM run_queue");
  EXPECT_EQ(rows[0].text(0), "failed");
  EXPECT_EQ(rows[0].integer(1), 2);
  EXPECT_NE(rows[0].text(2).find("its lease expired on host-b (pid 2, claim 2 of 2): no claims left"),
            std::string::npos)
      << rows[0].text(2);
}

TEST(QueueSqlite, TheQueueNeedsPostgres) {
  auto s = Store::open(":memory:");
  try {
    RunQueue q(*s);
    FAIL() << "a SQLite store was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.field(), "--store");
    EXPECT_NE(std::string(e.what()).find("needs a PostgreSQL store"), std::string::npos) << e.what();
  }
  EXPECT_THROW(open_queue_store("sqlite:never-created.db"), Error);
  EXPECT_FALSE(std::filesystem::exists("never-created.db")) << "refused before any file is created";
}

}  // namespace
}  // namespace kindex::store
