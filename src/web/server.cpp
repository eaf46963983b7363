#include "web/server.hpp"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/crypto.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <regex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "core/error.hpp"
#include "evidence/digest.hpp"
#include "store/attestations.hpp"
#include "store/feed.hpp"
#include "store/import.hpp"
#include "store/query.hpp"
#include "web/atom.hpp"
#include "web/pages.hpp"

namespace kindex::web {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// What the routes tell the connection loop about the request being served on this thread.
struct RequestControl {
  bool close_after_response = false;               // the body was left unread: the connection cannot be reused
  std::function<void(int seconds)> extend_reading;  // the head is in: allow this long for the rest
  std::function<void()> after_response;             // run once the request is answered (or failed)
};
thread_local RequestControl* t_request = nullptr;

void close_after_response(httplib::Response& res) {
  if (t_request) t_request->close_after_response = true;
  res.set_header("Connection", "close");
}

int poll_one(int fd, short events, int timeout_ms) {
  pollfd p{fd, events, 0};
  while (true) {
    int rc = ::poll(&p, 1, std::max(0, timeout_ms));
    if (rc >= 0 || errno != EINTR) return rc;
  }
}

// One accepted TCP connection as cpp-httplib's Stream: buffered reads (the request line is read a byte at a
// time) that fail once the current read deadline has passed, so a client trickling its headers cannot hold a
// thread longer than the head timeout; writes wait at most write_timeout_ms per call.
class SocketConnection final : public httplib::Stream {
 public:
  SocketConnection(int fd, int write_timeout_ms) : fd_(fd), write_timeout_ms_(write_timeout_ms) {}

  bool is_readable() const override { return begin_ < end_ || poll_one(fd_, POLLIN, remaining_ms()) > 0; }
  bool is_writable() const override { return poll_one(fd_, POLLOUT, write_timeout_ms_) > 0; }

  ssize_t read(char* ptr, size_t size) override {
    if (begin_ == end_) {
      if (remaining_ms() <= 0 || poll_one(fd_, POLLIN, remaining_ms()) <= 0) return -1;
      ssize_t n;
      do n = ::recv(fd_, buffer_, sizeof buffer_, 0);
      while (n < 0 && errno == EINTR);
      if (n <= 0) return n;
      begin_ = 0;
      end_ = static_cast<size_t>(n);
    }
    size_t n = std::min(size, end_ - begin_);
    std::memcpy(ptr, buffer_ + begin_, n);
    begin_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (poll_one(fd_, POLLOUT, write_timeout_ms_) <= 0) return -1;
    ssize_t n;
    do n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { address(::getpeername, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address(::getsockname, ip, port); }
  socket_t socket() const override { return fd_; }

  // Waits up to timeout_ms for the next request to start (true: bytes or EOF are there).
  bool wait_for_request(int timeout_ms) const { return begin_ < end_ || poll_one(fd_, POLLIN, timeout_ms) > 0; }
  void set_read_deadline(int seconds) { deadline_ = Clock::now() + std::chrono::seconds(seconds); }

  // Closes after a response that left a request body unread: the response goes out first (FIN), then a bounded
  // drain lets it reach the client before the close resets the connection; the body itself is never read.
  void close_lingering() {
    ::shutdown(fd_, SHUT_WR);
    auto until = Clock::now() + std::chrono::milliseconds(300);
    size_t drained = 0;
    char sink[16384];
    while (drained < (1u << 20)) {
      int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count());
      if (left <= 0 || poll_one(fd_, POLLIN, left) <= 0) break;
      ssize_t n = ::recv(fd_, sink, sizeof sink, 0);
      if (n <= 0) break;
      drained += static_cast<size_t>(n);
    }
  }

 private:
  int remaining_ms() const {
    return static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now()).count());
  }
  template <class F>
  void address(F get, std::string& ip, int& port) const {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    ip.clear();
    port = 0;
    if (get(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return;
    char text[INET6_ADDRSTRLEN] = "";
    if (addr.ss_family == AF_INET) {
      auto* a = reinterpret_cast<sockaddr_in*>(&addr);
      inet_ntop(AF_INET, &a->sin_addr, text, sizeof text);
      port = ntohs(a->sin_port);
    } else if (addr.ss_family == AF_INET6) {
      auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
      inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof text);
      port = ntohs(a->sin6_port);
    }
    ip = text;
  }

  int fd_;
  int write_timeout_ms_;
  Clock::time_point deadline_ = Clock::now();
  char buffer_[8192];
  size_t begin_ = 0, end_ = 0;
};

// Request bytes in memory, response bytes collected: serve_bytes's stream.
class MemoryConnection final : public httplib::Stream {
 public:
  explicit MemoryConnection(std::string_view in) : in_(in) {}
  bool is_readable() const override { return pos_ < in_.size(); }
  bool is_writable() const override { return true; }
  ssize_t read(char* ptr, size_t size) override {
    size_t n = std::min(size, in_.size() - pos_);
    std::memcpy(ptr, in_.data() + pos_, n);
    pos_ += n;
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    out_.append(ptr, size);
    return static_cast<ssize_t>(size);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = "memory";
    port = 0;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override { get_remote_ip_and_port(ip, port); }
  socket_t socket() const override { return INVALID_SOCKET; }
  std::string& output() { return out_; }

 private:
  std::string_view in_;
  size_t pos_ = 0;
  std::string out_;
};

// Threads started on demand (one per open connection) up to a maximum, so that slow or idle connections never
// leave a new client waiting in a queue behind them; beyond the maximum, connections wait for a free thread.
class OnDemandPool final : public httplib::TaskQueue {
 public:
  explicit OnDemandPool(size_t max_threads) : max_threads_(std::max<size_t>(1, max_threads)) {}
  void enqueue(std::function<void()> fn) override {
    std::lock_guard lock(mutex_);
    jobs_.push_back(std::move(fn));
    if (idle_ < jobs_.size() && threads_.size() < max_threads_) {
      ++idle_;
      threads_.emplace_back([this] { work(); });
    } else {
      wake_.notify_one();
    }
  }
  void shutdown() override {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (auto& t : threads_) t.join();
  }

 private:
  void work() {
    std::unique_lock lock(mutex_);
    while (true) {
      wake_.wait(lock, [&] { return !jobs_.empty() || stopping_; });
      if (jobs_.empty()) return;
      auto fn = std::move(jobs_.front());
      jobs_.pop_front();
      --idle_;
      lock.unlock();
      fn();
      lock.lock();
      ++idle_;
    }
  }
  const size_t max_threads_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  size_t idle_ = 0;
  bool stopping_ = false;
};

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 0 : (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xE ? 2 : (c >> 3) == 0x1E ? 3 : 4;
    if (n == 4 || i + n >= s.size()) return false;
    uint32_t cp = n == 0 ? c : c & (0x3F >> n);
    for (size_t k = 1; k <= n; ++k) {
      auto d = static_cast<unsigned char>(s[i + k]);
      if ((d >> 6) != 0x2) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n + 1;
  }
  return true;
}

// A value as it can be shown in an error: at most 40 bytes, bytes outside printable ASCII as \xHH.
std::string shown(std::string_view v) {
  std::string out;
  for (unsigned char c : v.substr(0, 40)) {
    if (c >= 0x20 && c < 0x7F) {
      out += static_cast<char>(c);
    } else {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02X", c);
      out += hex;
    }
  }
  return v.size() > 40 ? out + "..." : out;
}

// Errors carry the file they came from; a client is told the file's name, never where it lives on the server.
std::string without_directories(const std::string& message) {
  static const std::regex absolute_path(R"((^|[\s"'(=\[,:])/(?:[^\s"'()<>:,\[\]/]*/)*([^\s"'()<>:,\[\]/]*))");
  return std::regex_replace(message, absolute_path, "$1$2");
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  if (from.empty()) return;
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) s.replace(p, from.size(), to);
}

// Route parameters are ids, digests, slugs or names: bounded and printable, never paths.
std::string param(const httplib::Request& req, const std::string& name, size_t index = 1) {
  std::string v = index < req.matches.size() ? std::string(req.matches[index]) : req.get_param_value(name);
  if (v.size() > 300) throw Error("request", name, shown(v), "too long");
  return v;
}

int status_for(const Error& e) {
  const std::string& p = e.problem();
  if (p.rfind("store busy", 0) == 0) return 503;
  return p.rfind("no such", 0) == 0 || p.rfind("not a workload", 0) == 0 ? 404 : 400;
}

// Never throws: invalid UTF-8 anywhere in the body is replaced, not an exception in a worker thread.
void send_json(httplib::Response& res, const json& body) {
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json; charset=utf-8");
}

void send_html(httplib::Response& res, const std::string& body) { res.set_content(body, "text/html; charset=utf-8"); }

void send_error(const httplib::Request& req, httplib::Response& res, int status, const std::string& message) {
  res.status = status;
  if (req.path.rfind("/api/", 0) == 0) {
    send_json(res, {{"error", message}});
  } else {
    send_html(res, error_page(status, message));
  }
}

bool has_body(const httplib::Request& req) {
  if (req.has_header("Transfer-Encoding")) return true;
  std::string length = req.get_header_value("Content-Length");
  return !length.empty() && length.find_first_not_of('0') != std::string::npos;
}

// ?since=DATE&limit=N of the feed routes.
store::FeedQuery feed_query(const httplib::Request& req) {
  store::FeedQuery q;
  q.since = param(req, "since", 99);
  const std::string limit = param(req, "limit", 99);
  if (!limit.empty()) {
    if (limit.size() > 5 || limit.find_first_not_of("0123456789") != std::string::npos || std::stoi(limit) < 1)
      throw Error("request", "limit", shown(limit), "expected a count from 1 to 99999");
    q.limit = static_cast<size_t>(std::stoi(limit));
  }
  return q;
}

// The address a client reached this server at (its Host header, when it is a plain host[:port]), for the absolute
// links an Atom feed carries; empty (relative links) otherwise.
std::string base_url(const httplib::Request& req) {
  const std::string host = req.get_header_value("Host");
  static const std::regex plain(R"(^[A-Za-z0-9.\-]{1,253}(:[0-9]{1,5})?$|^\[[0-9A-Fa-f:.]{2,45}\](:[0-9]{1,5})?$)");
  return std::regex_match(host, plain) ? "http://" + host : "";
}

// /operations/NAME/leaderboard?device=H200&author=...&baseline=SLUG
store::LeaderboardQuery leaderboard_query(const httplib::Request& req) {
  store::LeaderboardQuery q;
  q.operation = param(req, "operation");
  q.device = param(req, "device", 99);
  q.author = param(req, "author", 99);
  q.baseline = param(req, "baseline", 99);
  return q;
}

store::ResolveQuery resolve_query(const httplib::Request& req) {
  store::ResolveQuery q;
  q.operation = param(req, "operation");
  q.dtype = param(req, "dtype");
  q.gpu = param(req, "gpu");
  // axes=batch_size=1,num_pages=425 and/or individual axis parameters.
  std::string axes = param(req, "axes");
  size_t start = 0;
  while (start < axes.size()) {
    size_t comma = axes.find(',', start);
    std::string pair = axes.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    auto eq = pair.find('=');
    if (eq == std::string::npos) throw Error("request", "axes", shown(pair), "expected name=value");
    try {
      q.axes[pair.substr(0, eq)] = std::stoll(pair.substr(eq + 1));
    } catch (const std::exception&) {
      throw Error("request", "axes", shown(pair), "the value must be an integer");
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  // Axis values may also come as their own parameters (?batch_size=1&num_pages=425).
  for (const auto& [key, value] : req.params) {
    if (key == "operation" || key == "dtype" || key == "gpu" || key == "axes") continue;
    if (key.size() > 100 || value.empty() || value.find_first_not_of("-0123456789") != std::string::npos) {
      throw Error("request", shown(key), shown(value), "unknown parameter (axis values must be integers)");
    }
    try {
      q.axes[key] = std::stoll(value);
    } catch (const std::exception&) {
      throw Error("request", shown(key), shown(value), "not an integer");
    }
  }
  return q;
}

// /serving/resolve?model=M&gpu=G&ttft=2000&tpot=100 (p99 limits in ms; each optional).
store::ServingResolveQuery serving_resolve_query(const httplib::Request& req) {
  store::ServingResolveQuery q;
  q.model = param(req, "model");
  q.gpu = param(req, "gpu");
  for (const auto& [key, value] : req.params) {
    if (key == "model" || key == "gpu") continue;
    if (key != "ttft" && key != "tpot") throw Error("request", shown(key), shown(value), "unknown parameter (model, gpu, ttft, tpot)");
    if (value.empty()) continue;  // an empty field of the page's form
    std::size_t used = 0;
    double ms = 0;
    try {
      ms = std::stod(value, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != value.size() || !std::isfinite(ms)) throw Error("request", key, shown(value), "expected a number of milliseconds");
    q.slo_ms[key] = ms;
  }
  return q;
}

}  // namespace

// cpp-httplib's server with kindex's own connection loop: the library's loop (0.11) reads with a per-call
// timeout only, keeps a body it refused on the connection, and shares one small fixed thread pool.
class IndexServer::Http final : public httplib::Server {
 public:
  explicit Http(const ServerOptions& o) : options_(o) {
    new_task_queue = [n = o.threads] { return new OnDemandPool(static_cast<size_t>(n)); };
    set_keep_alive_timeout(o.keep_alive_timeout_s);
    set_keep_alive_max_count(kRequestsPerConnection);
    set_write_timeout(10, 0);
    set_tcp_nodelay(true);
    // SO_REUSEADDR only: SO_REUSEPORT (the library's default) would let a second server bind the same port and
    // take half of the connections.
    set_socket_options([](socket_t sock) {
      int yes = 1;
      ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    });
  }

  // The library listens with a backlog of 5; a burst of clients would see dropped SYNs and 1 s retries.
  void widen_backlog() { ::listen(svr_sock_, SOMAXCONN); }

  // Serves requests from one connection until it closes, idles out, or a response closes it.
  template <class WaitForRequest>
  void serve(httplib::Stream& strm, RequestControl& control, WaitForRequest wait_for_request) {
    for (size_t n = 0; n < kRequestsPerConnection; ++n) {
      if (!wait_for_request()) break;
      control.close_after_response = false;
      t_request = &control;
      bool connection_closed = false, ok = false;
      try {
        ok = process_request(strm, n + 1 == kRequestsPerConnection, connection_closed, nullptr);
      } catch (...) {
        ok = false;  // the exception handler failed too: drop this connection, keep serving the others
      }
      if (control.after_response) {
        control.after_response();
        control.after_response = nullptr;
      }
      t_request = nullptr;
      if (!ok || connection_closed || control.close_after_response) break;
    }
  }

 private:
  static constexpr size_t kRequestsPerConnection = 1000;

  bool process_and_close_socket(socket_t sock) override {
    int one = 1;
    ::setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // no Nagle wait between head and body
    SocketConnection conn(sock, 10000);
    std::string address;
    int port = 0;
    conn.get_remote_ip_and_port(address, port);
    RequestControl control;
    if (admit(address)) {
      control.extend_reading = [&conn](int seconds) { conn.set_read_deadline(seconds); };
      serve(conn, control, [&] {
        if (!conn.wait_for_request(options_.keep_alive_timeout_s * 1000)) return false;
        conn.set_read_deadline(options_.head_timeout_s);
        return true;
      });
      release(address);
    } else {
      static const std::string busy =
          "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\n"
          "Content-Length: 50\r\n\r\n{\"error\":\"too many connections from this address\"}";
      conn.write(busy.data(), busy.size());
      control.close_after_response = true;
    }
    if (control.close_after_response) conn.close_lingering();
    ::close(sock);
    return true;
  }

  // One address may hold at most half of the threads, so one client cannot take them all.
  bool admit(const std::string& address) {
    std::lock_guard lock(connections_mutex_);
    int& n = connections_[address];
    if (n >= std::max(1, options_.threads / 2)) return false;
    ++n;
    return true;
  }
  void release(const std::string& address) {
    std::lock_guard lock(connections_mutex_);
    if (--connections_[address] <= 0) connections_.erase(address);
  }

  const ServerOptions& options_;
  std::mutex connections_mutex_;
  std::map<std::string, int> connections_;
};

// A fixed window per client address: simple and enough to stop one client from starving the rest.
struct IndexServer::RateLimiter {
  std::mutex mutex;
  std::map<std::string, std::pair<int64_t, int>> windows;  // address -> (minute, count)
  bool allow(const std::string& address, int per_minute) {
    int64_t minute = std::chrono::duration_cast<std::chrono::minutes>(Clock::now().time_since_epoch()).count();
    std::lock_guard lock(mutex);
    if (windows.size() > 100000) windows.clear();
    auto& [m, count] = windows[address];
    if (m != minute) {
      m = minute;
      count = 0;
    }
    return ++count <= per_minute;
  }
};

// One import at a time: imports share the server's store connection, whose transactions cannot nest.
struct IndexServer::ImportGate {
  std::mutex mutex;
};

// Answers to GET requests, kept while the store is unchanged: every page and API answer is a function of the
// store's content and the request target. SQLite's data_version moves when another connection (a `kindex import`
// or `kindex bench` elsewhere) commits; the server's own imports clear the cache. On a store without
// data_version (PostgreSQL) nothing is cached.
struct IndexServer::ResponseCache {
  static constexpr size_t kMaxBytes = 64u << 20;
  struct Entry {
    std::string content_type, body;
  };
  std::mutex mutex;
  std::optional<int64_t> version;
  std::unordered_map<std::string, Entry> entries;
  size_t bytes = 0;
  std::condition_variable computed;
  std::unordered_set<std::string> computing;

  static std::optional<int64_t> store_version(store::Store& store) {
    if (store.backend() != "sqlite") return std::nullopt;
    auto rows = store.db().query("PRAGMA data_version", {});
    return rows.empty() ? std::nullopt : std::optional<int64_t>(rows[0].integer(0));
  }
  // The entry for `target` if the store has not changed since it was kept.
  std::optional<Entry> find(store::Store& store, const std::string& target) {
    auto now = store_version(store);
    std::lock_guard lock(mutex);
    if (now != version) clear_locked(now);
    if (!now) return std::nullopt;
    auto it = entries.find(target);
    if (it == entries.end()) return std::nullopt;
    return it->second;
  }
  void keep(store::Store& store, const std::string& target, const std::string& content_type, const std::string& body) {
    auto now = store_version(store);
    std::lock_guard lock(mutex);
    if (!now || now != version || body.size() > kMaxBytes / 16) return;
    if (bytes + body.size() > kMaxBytes) clear_locked(now);
    auto [it, inserted] = entries.try_emplace(target, Entry{content_type, body});
    if (inserted) bytes += body.size() + target.size();
  }
  void clear() {
    std::lock_guard lock(mutex);
    clear_locked(version);
    version.reset();  // the next lookup re-reads the version
  }
  // One computation per answer: a request for an answer another thread is computing waits for it (at most
  // 10 s) instead of computing it again, then claims it (for release() after its response) if still missing.
  void wait_or_claim(const std::string& target) {
    std::unique_lock lock(mutex);
    computed.wait_for(lock, std::chrono::seconds(10), [&] { return !computing.count(target); });
    computing.insert(target);
  }
  void release(const std::string& target) {
    {
      std::lock_guard lock(mutex);
      computing.erase(target);
    }
    computed.notify_all();
  }

 private:
  void clear_locked(std::optional<int64_t> now) {
    entries.clear();
    bytes = 0;
    version = now;
  }
};

IndexServer::IndexServer(store::Store& store, ServerOptions options)
    : store_(store), options_(std::move(options)), http_(std::make_unique<Http>(options_)),
      limiter_(std::make_unique<RateLimiter>()), import_gate_(std::make_unique<ImportGate>()),
      cache_(std::make_unique<ResponseCache>()) {
  routes();
}

IndexServer::~IndexServer() { stop(); }

int IndexServer::bind() {
  errno = 0;
  if (options_.port == 0) {
    port_ = http_->bind_to_any_port(options_.host.c_str());
  } else {
    port_ = http_->bind_to_port(options_.host.c_str(), options_.port) ? options_.port : -1;
  }
  if (port_ <= 0) {
    int err = errno;
    std::string why = err == EADDRINUSE ? "address already in use (another server is listening on it)"
                      : err != 0        ? std::string("cannot bind: ") + std::strerror(err)
                                        : "cannot bind";
    throw Error("serve", "address", options_.host + ":" + std::to_string(options_.port), why);
  }
  http_->widen_backlog();
  return port_;
}

void IndexServer::listen() {
  listen_entered_ = true;
  if (!stop_requested_) http_->listen_after_bind();
  listen_done_ = true;
}

void IndexServer::stop() {
  stop_requested_ = true;
  if (!http_) return;
  // A listen() that has begun and not seen the request above is about to start httplib's accept loop: wait for it
  // to run, so that httplib's stop() (a no-op before then) ends it. (seq_cst: listen() stores entered then reads
  // the request; this stores the request then reads entered; one of them sees the other.)
  if (listen_entered_)
    while (!http_->is_running() && !listen_done_) std::this_thread::yield();
  http_->stop();
}

std::string IndexServer::serve_bytes(std::string_view request) {
  MemoryConnection conn(request);
  RequestControl control;
  http_->serve(conn, control, [&] { return conn.is_readable(); });
  return std::move(conn.output());
}

namespace {

void refuse_unread(const httplib::Request& req, httplib::Response& res, int status, const std::string& message) {
  send_error(req, res, status, message);
  if (status == 401) res.set_header("WWW-Authenticate", "Bearer");
  if (has_body(req)) close_after_response(res);
}

}  // namespace

// Why an import request is refused before its body is read (nothing: it may go on).
std::optional<std::pair<int, std::string>> IndexServer::import_refusal(const httplib::Request& req) const {
  if (options_.token.empty()) return std::pair{403, "this server is read-only (start it with --token to allow imports)"};
  std::string auth = req.get_header_value("Authorization");
  std::string expected = "Bearer " + options_.token;
  if (auth.size() != expected.size() || CRYPTO_memcmp(auth.data(), expected.data(), auth.size()) != 0)
    return std::pair{401, "missing or wrong bearer token"};
  std::string length = req.get_header_value("Content-Length");
  if (!length.empty() && (length.size() > 19 || std::strtoull(length.c_str(), nullptr, 10) > options_.max_body_bytes))
    return std::pair{413, "request too large (the limit is " + std::to_string(options_.max_body_bytes) + " bytes)"};
  return std::nullopt;
}

// What every request meets before and after its route: headers, the rate limit, UTF-8 checks, bodies refused
// unread, the response cache, "Expect: 100-continue", and errors turned into responses.
void IndexServer::install_guards() {
  httplib::Server& s = *http_;
  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    // The head is in; an authorised upload may take longer than a head.
    if (t_request && t_request->extend_reading) t_request->extend_reading(300);
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_header("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; form-action 'self'; "
                   "script-src 'self'; connect-src 'self'");
    if (!limiter_->allow(req.remote_addr, options_.requests_per_minute)) {
      refuse_unread(req, res, 429, "rate limit exceeded");
      return httplib::Server::HandlerResponse::Handled;
    }
    auto bad = [&](const std::string& field, const std::string& value) {
      refuse_unread(req, res, 400, format_error("request", field, shown(value), "not valid UTF-8"));
      return httplib::Server::HandlerResponse::Handled;
    };
    if (!valid_utf8(req.path)) return bad("path", req.path);
    for (const auto& [key, value] : req.params) {
      if (!valid_utf8(key)) return bad("parameter", key);
      if (!valid_utf8(value)) return bad(key, value);
    }
    // Only an import carries a body; anything else with one is refused without reading it.
    if (has_body(req) && !(req.method == "POST" && req.path == "/api/import")) {
      refuse_unread(req, res, 413, "this request takes no body");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (req.method == "GET") {
      for (int attempt = 0; attempt < 2; ++attempt) {
        if (auto hit = cache_->find(store_, req.target)) {
          if (attempt) cache_->release(req.target);
          res.set_content(hit->body, hit->content_type.c_str());
          res.set_header("X-Kindex-Cache", "hit");
          return httplib::Server::HandlerResponse::Handled;
        }
        if (!attempt) cache_->wait_or_claim(req.target);
      }
      // Computed here: released once answered, whatever happens to the request.
      if (t_request) {
        t_request->after_response = [cache = cache_.get(), target = req.target] { cache->release(target); };
      } else {
        cache_->release(req.target);
      }
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  s.set_post_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    // A body the library compressed for this client (Accept-Encoding) is not kept: a hit is sent as it is, to
    // clients that may not accept that encoding.
    if (req.method == "GET" && res.status == 200 && !res.has_header("X-Kindex-Cache") && !res.has_header("Content-Encoding"))
      cache_->keep(store_, req.target, res.get_header_value("Content-Type"), res.body);
  });
  // "Expect: 100-continue": an unauthorised or oversized upload is answered before the client sends its body.
  s.set_expect_100_continue_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (req.path != "/api/import" || req.method != "POST") {
      refuse_unread(req, res, 413, "this request takes no body");
      return 413;
    }
    if (auto refusal = import_refusal(req)) {
      refuse_unread(req, res, refusal->first, refusal->second);
      return refusal->first;
    }
    return 100;
  });
  s.set_exception_handler([](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
    int status = 500;
    std::string message = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const Error& e) {
      status = status_for(e);
      message = without_directories(e.what());
    } catch (const std::exception& e) {
      // Not the client's fault and not for the client's eyes (it may name files): logged here only.
      std::cerr << "kindex serve: internal error on " << shown(req.path) << ": " << e.what() << std::endl;
    } catch (...) {
    }
    send_error(req, res, status, message);
  });
  s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string message = res.status == 413 ? "request too large" : res.status == 404 ? "not found" : "error";
    send_error(req, res, res.status, message);
  });
}

// POST /api/import. The upload is read here, after the token and the declared size were checked, whatever its
// Content-Type (curl's -d sends application/x-www-form-urlencoded; the body is the file either way).
void IndexServer::import_upload(const httplib::Request& req, httplib::Response& res,
                                const httplib::ContentReader& read_body) {
  if (auto refusal = import_refusal(req)) return refuse_unread(req, res, refusal->first, refusal->second);
  if (req.is_multipart_form_data())
    return refuse_unread(req, res, 415, "send the file itself as the body (curl --data-binary @FILE), not multipart/form-data");
  std::string body;
  bool too_large = false;
  bool complete = read_body([&](const char* data, size_t n) {
    if (body.size() + n > options_.max_body_bytes) {
      too_large = true;
      return false;
    }
    body.append(data, n);
    return true;
  });
  if (too_large)
    return refuse_unread(req, res, 413, "request too large (the limit is " + std::to_string(options_.max_body_bytes) + " bytes)");
  if (!complete) return refuse_unread(req, res, 400, "the request body was cut short");
  std::unique_lock gate(import_gate_->mutex, std::try_to_lock);
  if (!gate.owns_lock()) {
    res.set_header("Retry-After", "5");
    return send_error(req, res, 503, "store busy: another import is in progress on this server; retry when it finishes");
  }
  // The body goes to a server-chosen temporary file; its format is detected from content, never a path.
  bool zstd = body.size() >= 4 && static_cast<unsigned char>(body[0]) == 0x28 && static_cast<unsigned char>(body[1]) == 0xb5 &&
              static_cast<unsigned char>(body[2]) == 0x2f && static_cast<unsigned char>(body[3]) == 0xfd;
  size_t first = body.find_first_not_of(" \t\r\n");
  bool json_body = first != std::string::npos && body[first] == '{';
  bool one_document = json_body && body.find("\n{", first) == std::string::npos && body.find("\"apiVersion\"") != std::string::npos;
  std::string ext = zstd ? ".jsonl.zst" : one_document ? ".json" : json_body ? ".jsonl" : ".yaml";
  auto path = std::filesystem::temp_directory_path() /
              ("kindex-upload-" + std::to_string(::getpid()) + "-" +
               evidence::sha256_hex(body + std::to_string(Clock::now().time_since_epoch().count())).substr(0, 16) + ext);
  {
    std::ofstream out(path, std::ios::binary);
    out.write(body.data(), static_cast<std::streamsize>(body.size()));
  }
  struct Cleanup {
    std::filesystem::path p;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove(p, ec);
    }
  } cleanup{path};
  struct ClearCache {  // whether the import succeeds or fails part-way
    ResponseCache& cache;
    ~ClearCache() { cache.clear(); }
  } clear_cache{*cache_};
  try {
    send_json(res, store::import_files(store_, {path.string()}).to_json());
  } catch (const Error& e) {
    // The client knows its upload as the request body, not as the server's temporary file.
    std::string where = e.where(), value = e.value(), problem = e.problem();
    for (std::string* s : {&where, &value, &problem}) replace_all(*s, path.string(), "request body");
    throw Error(where, e.field(), value, problem);
  }
}

// The routes, as one table: every GET route (the JSON API, the same objects the CLI prints with --json; the HTML
// pages and plots) with what answers it, then the one POST.
void IndexServer::routes() {
  httplib::Server& s = *http_;
  s.set_payload_max_length(options_.max_body_bytes);
  install_guards();
  using Request = httplib::Request;
  using Response = httplib::Response;
  using Answer = void (*)(IndexServer&, const Request&, Response&);
  static const std::pair<const char*, Answer> kGetRoutes[] = {
      // JSON API
      {"/api/search",
       [](IndexServer& x, const Request& req, Response& res) {
         send_json(res, store::search(x.store_, param(req, "q")));
       }},
      {R"(/api/operations/([^/]+))",
       [](IndexServer& x, const Request& req, Response& res) {
         send_json(res, store::operation_view(x.store_, param(req, "operation"), param(req, "workload", 99)));
       }},
      {R"(/api/workloads/([^/]+))",
       [](IndexServer& x, const Request& req, Response& res) {
         send_json(res, store::workload_view(x.store_, param(req, "workload")));
       }},
      {R"(/api/implementations/([^/]+))",
       [](IndexServer& x, const Request& req, Response& res) {
         send_json(res, store::implementation_view(x.store_, param(req, "implementation")));
       }},
      {R"(/api/runs/([^/]+))",
       [](IndexServer& x, const Request& req, Response& res) {
         send_json(res, store::run_view(x.store_, param(req, "run")));
       }},
      {"/api/feed",
       [](IndexServer& x, const Request& req, Response& res) { send_json(res, store::feed(x.store_, feed_query(req))); }},
      {"/feed.xml",
       [](IndexServer& x, const Request& req, Response& res) {
         res.set_content(atom_feed(store::feed(x.store_, feed_query(req)), base_url(req), "/feed.xml", "kindex: followed"),
                         "application/atom+xml; charset=utf-8");
       }},
      {R"(/feeds/(operation|cohort|gpu|model|project)/([^/]+)\.xml)",
       [](IndexServer& x, const Request& req, Response& res) {
         store::FeedQuery q = feed_query(req);
         q.only = store::resolve_follow(x.store_, param(req, "kind"), param(req, "value", 2));
         res.set_content(atom_feed(store::feed(x.store_, q), base_url(req), req.path,
                                   "kindex: " + q.only->kind + " " + q.only->label),
                         "application/atom+xml; charset=utf-8");
       }},
      {R"(/api/attestations/([^/]+))",
       [](IndexServer& x, const Request& req, Response& res) {
         // The document as signed (one JSON line), for `kindex attest verify` elsewhere.
         res.set_content(store::attestation_document(x.store_, param(req, "attestation")) + "\n",
                         "application/json; charset=utf-8");
       }},
      {R"(/api/operations/([^/]+)/leaderboard)",
       [](IndexServer& x, const Request& req, Response& res) {
         send_json(res, store::leaderboard(x.store_, leaderboard_query(req)));
       }},
      {"/api/resolve",
       [](IndexServer& x, const Request& req, Response& res) {
         send_json(res, store::resolve(x.store_, resolve_query(req)));
       }},
      {"/api/records",
       [](IndexServer& x, const Request& req, Response& res) {
         send_json(res, store::records(x.store_, param(req, "operation")));
       }},
      {"/api/compare",
       [](IndexServer& x, const Request& req, Response& res) {
         send_json(res, store::compare(x.store_, param(req, "a"), param(req, "b")));
       }},
      {"/api/serving", [](IndexServer& x, const Request&, Response& res) { send_json(res, store::serving_overview(x.store_)); }},
      {R"(/api/serving/models/([^/]+))",
       [](IndexServer& x, const Request& req, Response& res) {
         send_json(res, store::serving_view(x.store_, param(req, "model"), param(req, "gpu", 99), param(req, "latency", 99)));
       }},
      {R"(/api/serving/runs/([^/]+))",
       [](IndexServer& x, const Request& req, Response& res) {
         send_json(res, store::serving_run_view(x.store_, param(req, "run")));
       }},
      {"/api/serving/resolve",
       [](IndexServer& x, const Request& req, Response& res) {
         send_json(res, store::resolve_serving(x.store_, serving_resolve_query(req)));
       }},
      // HTML pages and plots
      {"/serving",
       [](IndexServer& x, const Request&, Response& res) { send_html(res, serving_overview_page(store::serving_overview(x.store_))); }},
      {R"(/serving/models/([^/]+))",
       [](IndexServer& x, const Request& req, Response& res) {
         send_html(res, serving_page(store::serving_view(x.store_, param(req, "model"), param(req, "gpu", 99), param(req, "latency", 99))));
       }},
      {R"(/plots/serving/models/([^/]+)\.svg)",
       [](IndexServer& x, const Request& req, Response& res) {
         res.set_content(serving_plot_svg(store::serving_view(x.store_, param(req, "model"), param(req, "gpu", 99),
                                                              param(req, "latency", 99))),
                         "image/svg+xml");
       }},
      {R"(/serving/runs/([^/]+))",
       [](IndexServer& x, const Request& req, Response& res) {
         send_html(res, serving_run_page(store::serving_run_view(x.store_, param(req, "run"))));
       }},
      {"/serving/resolve",
       [](IndexServer& x, const Request& req, Response& res) {
         send_html(res, serving_resolve_page(store::resolve_serving(x.store_, serving_resolve_query(req))));
       }},
      {"/assets/search.js",
       [](IndexServer&, const Request&, Response& res) {
         res.set_content(search_script(), "text/javascript; charset=utf-8");
       }},
      {"/",
       [](IndexServer& x, const Request& req, Response& res) {
         const std::string q = param(req, "q");
         send_html(res, home_page(store::search(x.store_, q, 200), q));
       }},
      {R"(/operations/([^/]+))", [](IndexServer& x, const Request& req, Response& res) { x.operation_html(req, res); }},
      {R"(/operations/([^/]+)/leaderboard)",
       [](IndexServer& x, const Request& req, Response& res) {
         send_html(res, leaderboard_page(store::leaderboard(x.store_, leaderboard_query(req))));
       }},
      {R"(/plots/operations/([^/]+)/leaderboard\.svg)",
       [](IndexServer& x, const Request& req, Response& res) {
         res.set_content(leaderboard_plot_svg(store::leaderboard(x.store_, leaderboard_query(req))), "image/svg+xml");
       }},
      {R"(/plots/operations/([^/]+)/(latency|floors)\.svg)",
       [](IndexServer& x, const Request& req, Response& res) {
         json view = store::operation_view(x.store_, param(req, "operation"), param(req, "workload", 99));
         res.set_content(std::string(req.matches[2]) == "latency" ? latency_plot_svg(view) : floor_plot_svg(view),
                         "image/svg+xml");
       }},
      {R"(/runs/([^/]+))",
       [](IndexServer& x, const Request& req, Response& res) {
         send_html(res, run_page(store::run_view(x.store_, param(req, "run"))));
       }},
      {R"(/workloads/([^/]+))",
       [](IndexServer& x, const Request& req, Response& res) {
         send_html(res, workload_page(store::workload_view(x.store_, param(req, "workload"))));
       }},
      {R"(/implementations/([^/]+))",
       [](IndexServer& x, const Request& req, Response& res) {
         send_html(res, implementation_page(store::implementation_view(x.store_, param(req, "implementation"))));
       }},
      {"/compare",
       [](IndexServer& x, const Request& req, Response& res) {
         send_html(res, compare_page(store::compare(x.store_, param(req, "a"), param(req, "b"))));
       }},
      {"/resolve",
       [](IndexServer& x, const Request& req, Response& res) {
         send_html(res, resolve_page(store::resolve(x.store_, resolve_query(req))));
       }},
      {"/records",
       [](IndexServer& x, const Request& req, Response& res) {
         const std::string op = param(req, "operation");
         send_html(res, records_page(store::records(x.store_, op), op));
       }},
  };
  for (const auto& [pattern, answer] : kGetRoutes)
    s.Get(pattern, [this, answer = answer](const Request& req, Response& res) { answer(*this, req, res); });
  s.Post("/api/import", [this](const Request& req, Response& res, const httplib::ContentReader& read_body) {
    import_upload(req, res, read_body);
  });
}

// GET /operations/<operation>: the page; its plots (a third of a page's cost) are the same on every workload's page
// of the operation, so they are kept until the store changes.
void IndexServer::operation_html(const httplib::Request& req, httplib::Response& res) {
  const json view = store::operation_view(store_, param(req, "operation"), param(req, "workload", 99));
  const std::string key = "operation-plots:" + view["operation"]["id"].get<std::string>();
  auto plots = std::static_pointer_cast<const OperationPlots>(store_.remembered(key));
  if (!plots) {
    auto made = std::make_shared<const OperationPlots>(operation_plots(view));
    store_.remember(key, made);
    plots = std::move(made);
  }
  send_html(res, operation_page(view, plots.get()));
}

}  // namespace kindex::web
