#pragma once
// A worker process: forked from the runner before CUDA is touched, it answers one request line with one reply
// line. A crash, a hang (killed at the timeout) or a sticky CUDA error ends that worker; the runner starts another.
#include <signal.h>
#include <sys/types.h>

#include <functional>
#include <string>

namespace kindex::runner {

class Worker {
 public:
  // serve(request, &exit_after) -> reply; the worker exits after the reply when exit_after is set.
  using Serve = std::function<std::string(const std::string&, bool*)>;
  explicit Worker(const Serve& serve);  // forks
  ~Worker() { stop(); }
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  enum class Reply { line, died, timeout };
  Reply request(const std::string& line, double timeout_s, std::string* reply);
  // Ends the worker: closes its input (it exits), or kills it; returns how it ended, for the log.
  std::string stop(bool kill_it = false);

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
