#include "runner/execute/worker.hpp"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <iostream>
#include <set>
#include <stdexcept>

namespace kindex::runner {

namespace {

bool write_all(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += size_t(n);
  }
  return true;
}

// The runner's ends of every live worker's pipes: a child forked later closes its copies (else a worker would not
// see its input close while a sibling holds it open). Never destroyed: a worker kept in another static (a solution's
// Python process) is stopped during the exit's static destruction, after a static constructed later is gone.
std::set<int>& parent_ends() {
  static auto* fds = new std::set<int>;
  return *fds;
}

// In a forked worker: its reply pipe, for emit(); -1 in the runner.
int& reply_fd() {
  static int fd = -1;
  return fd;
}

std::vector<std::function<void()>>& exit_hooks() {
  static auto* hooks = new std::vector<std::function<void()>>;
  return *hooks;
}

void close_parent_end(int& fd) {
  if (fd < 0) return;
  parent_ends().erase(fd);
  ::close(fd);
  fd = -1;
}

// Forks a child joined to this process by two pipes; the child dies with this process. Returns the child's pid;
// `read_end` / `write_end` are the calling side's ends: in the child (pid 0) the ends towards the parent, in the
// parent the ends towards the child (close-on-exec there, so they do not leak into later children).
pid_t fork_joined(int& read_end, int& write_end) {
  int down[2], up[2];
  if (pipe(down) != 0 || pipe(up) != 0) throw std::runtime_error("pipe failed: " + std::string(strerror(errno)));
  const pid_t parent = getpid();
  std::cout.flush();
  std::cerr.flush();
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed: " + std::string(strerror(errno)));
  if (pid == 0) {
    // A worker dies with the runner (killed at a time limit, interrupted), rather than finishing its run alone.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // the parent died before prctl
    signal(SIGPIPE, SIG_DFL);
    for (int fd : parent_ends()) ::close(fd);
    parent_ends().clear();
    // A worker forked by a worker: the reply pipe of its parent is not its own (the runner sees its parent die).
    if (reply_fd() >= 0) ::close(reply_fd()), reply_fd() = -1;
    exit_hooks().clear();
    ::close(down[1]);
    ::close(up[0]);
    read_end = down[0];
    write_end = up[1];
    return 0;
  }
  ::close(down[0]);
  ::close(up[1]);
  read_end = up[0];
  write_end = down[1];
  fcntl(read_end, F_SETFD, FD_CLOEXEC);
  fcntl(write_end, F_SETFD, FD_CLOEXEC);
  parent_ends().insert({read_end, write_end});
  return pid;
}

}  // namespace

Worker::Worker(const Serve& serve) {
  int in = -1, out = -1;
  pid_ = fork_joined(in, out);
  if (pid_ == 0) {
    reply_fd() = out;
    std::string buffer, line;
    char chunk[256];
    while (true) {
      auto nl = buffer.find('\n');
      if (nl == std::string::npos) {
        ssize_t n = ::read(in, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        buffer.append(chunk, size_t(n));
        continue;
      }
      line = buffer.substr(0, nl);
      buffer.erase(0, nl + 1);
      bool exit_after = false;
      std::string reply;
      try {
        reply = serve(line, &exit_after) + "\n";
      } catch (const std::exception& e) {
        // Never back into the caller's code in a forked copy: the worker ends, the runner sees it die.
        std::cerr << "kindex worker: " << e.what() << std::endl;
        _exit(70);
      }
      if (!write_all(out, reply) || exit_after) break;
    }
    for (auto& hook : exit_hooks()) hook();
    _exit(0);  // no atexit handlers or destructors of the parent's state
  }
  from_ = in;
  to_ = out;
}

Worker::Worker(const std::vector<std::string>& argv, const std::string& stderr_path) {
  if (argv.empty()) throw std::runtime_error("Worker: no program to run");
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int in = -1, out = -1;
  pid_ = fork_joined(in, out);
  if (pid_ == 0) {
    dup2(in, 0);
    dup2(out, 1);
    int err = ::open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (err >= 0) dup2(err, 2);
    // Nothing else of this process's: above all not its own pipes to the runner, which must see them close when
    // this process dies.
    for (int fd = 3, n = int(std::min<long>(sysconf(_SC_OPEN_MAX), 65536)); fd < n; ++fd) ::close(fd);
    execvp(args[0], args.data());
    _exit(127);
  }
  from_ = in;
  to_ = out;
}

void Worker::at_exit(std::function<void()> hook) { exit_hooks().push_back(std::move(hook)); }

bool Worker::emit(const std::string& line) { return reply_fd() >= 0 && write_all(reply_fd(), line + "\n"); }

void Worker::close_input() { close_parent_end(to_); }

// A worker gone before its request arrives (a Python that could not be exec'd exits 127 at once) is a failed send,
// never a SIGPIPE: that would kill the sender, itself a worker process with SIGPIPE at its default. SIGPIPE is
// blocked for this thread while writing and a pending one taken, so no other thread's signal state changes.
bool Worker::send(const std::string& line) {
  if (to_ < 0) return false;
  sigset_t pipe_only, old;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
  const bool sent = write_all(to_, line + "\n");
  if (!sent) {
    const timespec none{0, 0};
    while (sigtimedwait(&pipe_only, nullptr, &none) == SIGPIPE) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return sent;
}

Worker::Reply Worker::request(const std::string& line, double timeout_s, std::string* reply) {
  if (!send(line)) return Reply::died;
  return receive(timeout_s, reply);
}

Worker::Reply Worker::receive(double timeout_s, std::string* reply) {
  if (from_ < 0) return Reply::died;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (true) {
    auto nl = buffer_.find('\n');
    if (nl != std::string::npos) {
      *reply = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return Reply::line;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd p{from_, POLLIN, 0};
    // Looks at least once, so a timeout of 0 still takes a reply that is there.
    int ready = poll(&p, 1, int(std::clamp<int64_t>(left.count(), 0, 1000)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      if (left.count() <= 0) return Reply::timeout;
      continue;
    }
    char chunk[65536];
    ssize_t n = ::read(from_, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Reply::died;
    buffer_.append(chunk, size_t(n));
  }
}

std::string Worker::stop(bool kill_it) {
    if (pid_ <= 0) return "";
    close_input();
    if (kill_it) ::kill(pid_, SIGKILL);
    int status = 0;
    // A worker that does not exit on EOF within 10 s is killed.
    for (int i = 0; i < 1000 && waitpid(pid_, &status, WNOHANG) == 0; ++i) usleep(10000);
    if (waitpid(pid_, &status, WNOHANG) == 0) {
      ::kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
    }
    pid_ = -1;
    close_parent_end(from_);
    if (WIFSIGNALED(status))
      return "signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
    return "exit code " + std::to_string(WEXITSTATUS(status));
}

SigpipeIgnored::SigpipeIgnored() {
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &ignore, &old);
}
SigpipeIgnored::~SigpipeIgnored() { sigaction(SIGPIPE, &old, nullptr); }

}  // namespace kindex::runner
