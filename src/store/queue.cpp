#include "store/queue.hpp"

#include <cstdio>
#include <random>

#include "core/error.hpp"

namespace kindex::store {

namespace {

// The whole queue: a row per run. `state` moves queued -> running (claimed, leased) -> done (its run recorded, in
// the same transaction) or failed; a running row whose lease expired goes back to queued (or to failed after
// max_attempts claims). host and pid name the worker that last claimed it.
constexpr const char* kQueueSchema = R"sql(
CREATE TABLE IF NOT EXISTS run_queue (
  id BIGSERIAL PRIMARY KEY,
  queue TEXT NOT NULL,
  batch TEXT NOT NULL,
  problem TEXT NOT NULL,
  definition TEXT NOT NULL,
  workload TEXT NOT NULL,
  implementation TEXT NOT NULL,
  options TEXT NOT NULL,
  state TEXT NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'running', 'done', 'failed')),
  max_attempts INTEGER NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  host TEXT,
  pid BIGINT,
  lease_token TEXT,
  lease_expires TIMESTAMPTZ,
  run_id TEXT,
  run_status TEXT,
  message TEXT,
  queued_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  started_at TIMESTAMPTZ,
  finished_at TIMESTAMPTZ
);
CREATE INDEX IF NOT EXISTS ix_run_queue_state ON run_queue (queue, state, id);
)sql";

std::string random_token() {
  std::random_device rd;
  std::string hex;
  for (int i = 0; i < 4; ++i) {
    char buf[9];
    std::snprintf(buf, sizeof buf, "%08x", rd());
    hex += buf;
  }
  return hex;
}

Error needs_postgres(const std::string& store) {
  return Error("kindex queue", "--store", store,
               "the run queue needs a PostgreSQL store (--store postgresql://...): workers on several hosts claim "
               "runs with row locks SQLite does not have; on one machine, run `kindex bench` instead");
}

}  // namespace

std::unique_ptr<Store> open_queue_store(const std::string& uri) {
  if (!is_postgres_uri(uri)) throw needs_postgres(uri);
  return Store::open(uri);
}

RunQueue::RunQueue(Store& store) : db_(store.db()) {
  if (store.backend() != "postgresql") throw needs_postgres(store.backend());
  // Workers starting at once on a new store would race to create the table: one at a time.
  Transaction t(db_);
  db_.query("SELECT pg_advisory_xact_lock(7263541)");
  db_.script(kQueueSchema);
  t.commit();
}

std::string RunQueue::add(const std::string& queue, const std::vector<QueuedRun>& runs, int max_attempts) {
  const std::string batch = random_token();
  Transaction t(db_);
  for (const auto& r : runs)
    db_.execute("INSERT INTO run_queue (queue, batch, problem, definition, workload, implementation, options, "
                "max_attempts) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                {queue, batch, r.problem, r.definition, r.workload, r.implementation, r.options,
                 int64_t(max_attempts)});
  t.commit();
  return batch;
}

int64_t RunQueue::requeue_expired(const std::string& queue) {
  return db_.execute(
      "UPDATE run_queue SET "
      "state = CASE WHEN attempts >= max_attempts THEN 'failed' ELSE 'queued' END, "
      "message = 'its lease expired on ' || host || ' (pid ' || pid || ', claim ' || attempts || ' of ' || "
      "max_attempts || ')' || CASE WHEN attempts >= max_attempts THEN ': no claims left' ELSE ': queued again' END, "
      "finished_at = CASE WHEN attempts >= max_attempts THEN now() END, lease_token = NULL, lease_expires = NULL "
      "WHERE queue = ? AND state = 'running' AND lease_expires < now()",
      {queue});
}

std::optional<ClaimedRun> RunQueue::claim(const std::string& queue, const std::string& host, int64_t pid,
                                          double lease_s) {
  requeue_expired(queue);
  const std::string token = random_token();
  // SKIP LOCKED: workers claiming at once each take a different row instead of waiting for one another's.
  const Rows rows = db_.query(
      "UPDATE run_queue SET state = 'running', host = ?, pid = ?, lease_token = ?, "
      "lease_expires = now() + make_interval(secs => ?), attempts = attempts + 1, started_at = now() "
      "WHERE id = (SELECT id FROM run_queue WHERE queue = ? AND state = 'queued' ORDER BY id LIMIT 1 "
      "FOR UPDATE SKIP LOCKED) "
      "RETURNING id, attempts, problem, definition, workload, implementation, options",
      {host, pid, token, lease_s, queue});
  if (rows.empty()) return std::nullopt;
  const Row& r = rows[0];
  return ClaimedRun{r.integer(0), token, int(r.integer(1)),
                    QueuedRun{r.text(2), r.text(3), r.text(4), r.text(5), r.text(6)}};
}

bool RunQueue::renew(int64_t id, const std::string& token, double lease_s) {
  return db_.execute("UPDATE run_queue SET lease_expires = now() + make_interval(secs => ?) "
                     "WHERE id = ? AND lease_token = ? AND state = 'running' AND lease_expires >= now()",
                     {lease_s, id, token}) == 1;
}

// Locks the row for the rest of the transaction when this worker still holds its lease: a claim skips it, and
// requeue_expired waits and then finds it closed.
bool RunQueue::lock_held(int64_t id, const std::string& token) {
  return !db_.query("SELECT id FROM run_queue WHERE id = ? AND lease_token = ? AND state = 'running' "
                    "AND lease_expires >= now() FOR UPDATE",
                    {id, token})
              .empty();
}

bool RunQueue::complete(int64_t id, const std::string& token, const std::function<RecordResult()>& record,
                        const std::string& run_status) {
  Transaction t(db_);
  if (!lock_held(id, token)) {
    t.rollback();
    return false;
  }
  const RecordResult recorded = record();
  db_.execute("UPDATE run_queue SET state = 'done', run_id = ?, run_status = ?, finished_at = now(), "
              "lease_token = NULL, lease_expires = NULL WHERE id = ?",
              {recorded.run_id, run_status, id});
  t.commit();
  return true;
}

bool RunQueue::fail(int64_t id, const std::string& token, const std::string& message) {
  Transaction t(db_);
  if (!lock_held(id, token)) {
    t.rollback();
    return false;
  }
  db_.execute("UPDATE run_queue SET state = 'failed', message = ?, finished_at = now(), lease_token = NULL, "
              "lease_expires = NULL WHERE id = ?",
              {message, id});
  t.commit();
  return true;
}

std::vector<QueueCount> RunQueue::status(const std::string& queue) {
  requeue_expired(queue);
  std::vector<QueueCount> out;
  for (const auto& r : db_.query("SELECT CASE WHEN state = 'queued' THEN '' ELSE host END AS h, state, COUNT(*) "
                                 "FROM run_queue WHERE queue = ? GROUP BY h, state ORDER BY h, state",
                                 {queue})) {
    if (out.empty() || out.back().host != r.text(0)) out.push_back({r.text(0)});
    QueueCount& c = out.back();
    const std::string state = r.text(1);
    (state == "queued" ? c.queued : state == "running" ? c.running : state == "done" ? c.done : c.failed) =
        r.integer(2);
  }
  return out;
}

int64_t RunQueue::pending(const std::string& queue) {
  const Rows rows =
      db_.query("SELECT COUNT(*) FROM run_queue WHERE queue = ? AND state IN ('queued', 'running')", {queue});
  return rows.empty() ? 0 : rows[0].integer(0);
}

std::vector<std::string> RunQueue::queues() {
  std::vector<std::string> out;
  for (const auto& r : db_.query("SELECT DISTINCT queue FROM run_queue ORDER BY queue")) out.push_back(r.text(0));
  return out;
}

}  // namespace kindex::store
