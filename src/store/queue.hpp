#pragma once
// The run queue of a shared PostgreSQL store (`kindex queue`, `kindex worker`; docs/fleet.md): one table,
// run_queue, a row per queued (implementation, workload) run. Workers on any host claim rows with
// `FOR UPDATE SKIP LOCKED`, hold a lease they renew while the run lasts, and close the row in the transaction that
// records the run, after checking that they still hold the lease; so a run is recorded at most once, and a run
// whose lease expired (its worker killed, paused or cut off) goes back to the queue for another worker. SQLite has
// no row locks to skip: the queue refuses it.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "store/store.hpp"

namespace kindex::store {

// What a queued run is: the `kindex bench` arguments of one (implementation, workload).
struct QueuedRun {
  std::string problem;         // as given to --problem (a bundled name, or a path every worker host can read)
  std::string definition;      // the definition's name within it
  std::string workload;        // the workload's uuid
  std::string implementation;  // an --impl spec
  std::string options;         // the bench options, JSON (runner/queue.hpp writes and reads it)
};

// A run a worker holds: the row, its lease token and how many times it has been claimed (this one included).
struct ClaimedRun {
  int64_t id = 0;
  std::string token;
  int attempts = 0;
  QueuedRun run;
};

// One line of `kindex queue status`: per host (empty for runs no worker holds), how many runs are in each state.
struct QueueCount {
  std::string host;
  int64_t queued = 0, running = 0, done = 0, failed = 0;
};

// Opens the queue's store: PostgreSQL only. Any other URI is refused, naming it, before anything is opened or
// created.
std::unique_ptr<Store> open_queue_store(const std::string& uri);

class RunQueue {
 public:
  // Creates the table if needed. Throws kindex::Error naming the store when it is not PostgreSQL.
  explicit RunQueue(Store& store);

  // Queues `runs` on `queue` in one transaction, in order (claims take them in that order); returns the batch id.
  // A run whose lease expires `max_attempts` times is failed instead of queued again.
  std::string add(const std::string& queue, const std::vector<QueuedRun>& runs, int max_attempts);
  // Takes the first queued run of `queue` (after returning expired leases to the queue), leased for `lease_s`.
  std::optional<ClaimedRun> claim(const std::string& queue, const std::string& host, int64_t pid, double lease_s);
  // Extends the lease by `lease_s` from now; false when it is no longer this worker's (expired or taken).
  bool renew(int64_t id, const std::string& token, double lease_s);
  // Closes the run in one transaction: checks the lease is still held (and not expired), calls `record` (which
  // records the run in the same store, same transaction) and marks the row done with the run's id and status.
  // False, and nothing recorded, when the lease was lost: the result is refused.
  bool complete(int64_t id, const std::string& token, const std::function<RecordResult()>& record,
                const std::string& run_status);
  // Marks the run failed (it could not be run here: a problem this host cannot read, ...) with `message`; false
  // when the lease was lost.
  bool fail(int64_t id, const std::string& token, const std::string& message);
  // Returns the runs whose lease has expired to the queue (or fails those out of attempts); the number returned.
  int64_t requeue_expired(const std::string& queue);
  // Per host, in host order; the runs no worker holds under the host "".
  std::vector<QueueCount> status(const std::string& queue);
  // Runs of `queue` still queued or running.
  int64_t pending(const std::string& queue);
  std::vector<std::string> queues();

 private:
  bool lock_held(int64_t id, const std::string& token);
  Db& db_;
};

}  // namespace kindex::store
