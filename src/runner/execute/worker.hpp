#pragma once
// A worker process: forked from the runner before CUDA is touched, it answers one request line with one reply
// line. A crash, a hang (killed at the timeout) or a sticky CUDA error ends that worker; the runner starts another.
// A worker dies with the process that started it (PR_SET_PDEATHSIG). Several may live at once: each forked one
// closes its copies of the others' pipes, so a worker whose input the runner closes sees the end of it.
#include <signal.h>
#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

namespace kindex::runner {

class Worker {
 public:
  // serve(request, &exit_after) -> reply; the worker exits after the reply when exit_after is set.
  using Serve = std::function<std::string(const std::string&, bool*)>;
  explicit Worker(const Serve& serve);  // forks
  // Forks and runs argv[0] (searched on PATH) with the request pipe as its stdin and the reply pipe as its stdout,
  // and `stderr_path` (appended to) as its stderr. It dies with this process (PR_SET_PDEATHSIG), so a worker killed
  // at its timeout leaves no orphan. A program that cannot be started exits with code 127.
  Worker(const std::vector<std::string>& argv, const std::string& stderr_path);
  ~Worker() { stop(); }
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  enum class Reply { line, died, timeout };
  Reply request(const std::string& line, double timeout_s, std::string* reply);
  // The two halves of request(), for a worker that works while others are asked (a solution's preparation):
  // send() returns false when the worker is gone; receive() waits up to timeout_s (0: only looks) for a line.
  bool send(const std::string& line);
  Reply receive(double timeout_s, std::string* reply);
  // Ends the worker: closes its input (it exits), or kills it; returns how it ended, for the log.
  std::string stop(bool kill_it = false);
  // Closes its input only: it ends on its own while the caller ends others; stop() then waits for it.
  void close_input();
  // In a forked worker: `hook` runs when its input closes, before it exits (it ends the processes it started, so
  // that they end cleanly and their time is counted as the worker's). Not on a kill.
  static void at_exit(std::function<void()> hook);
  // In a forked worker, inside serve(): sends `line` to the runner ahead of the reply (a worker that streams what
  // it has done, read with receive()). False outside a worker or when the runner is gone.
  static bool emit(const std::string& line);

 private:
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
  std::string buffer_;
};

// SIGPIPE ignored for the guard's lifetime: a worker that died mid-request is a reply, not a signal.
struct SigpipeIgnored {
  struct sigaction old {};
  SigpipeIgnored();
  ~SigpipeIgnored();
};

}  // namespace kindex::runner
