#pragma once
// The runner's side of the run queue (store/queue.hpp; docs/fleet.md): `kindex queue add` turns bench arguments
// into queued runs, checked before anything is queued; `kindex worker` claims them one at a time, runs each as
// `kindex bench` runs it (the same worker process, pipeline and records) and records it in the store in the
// transaction that closes its queued run, while a second connection renews its lease.
#include <iosfwd>
#include <string>
#include <vector>

#include "runner/session.hpp"
#include "store/queue.hpp"

namespace kindex::runner {

// The runs a `kindex bench` with these options would make, in its job order (plan_jobs), as queue rows. Throws
// kindex::Error naming the argument for anything the bench would refuse (problem, workloads, impl, peer,
// reference), and for options a queued run cannot carry (--baseline, --in-process).
std::vector<store::QueuedRun> queued_runs(const SessionOptions& options);

struct WorkerOptions {
  std::string store_uri;                // postgresql://...: where the queue is and where the runs are recorded
  std::string queue = "default";
  std::string host;                     // the name `kindex queue status` shows ("": this machine's host name)
  double lease_s = 60;                  // renewed every lease_s / 3 while a run lasts
  double poll_s = 5;                    // wait between claims when the queue has nothing to claim
  bool exit_when_drained = false;       // end once nothing of the queue is queued or running
  int max_runs = 0;                     // end after this many runs (0: no limit)
};

// Claims and runs the queue's runs until it is drained (exit_when_drained) or max_runs; a line per run on `log`
// (its result, or why it was refused or failed). A store out of reach is retried every poll_s on a fresh
// connection. Returns 0; throws kindex::Error when the store cannot be opened at the start.
int run_worker(const WorkerOptions& options, std::ostream& log);

}  // namespace kindex::runner
