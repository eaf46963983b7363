#pragma once
// `kindex serve`: the JSON API and HTML pages over one store. Read-only unless a token is configured; the only
// write endpoint (POST /api/import) needs "Authorization: Bearer <token>", checked before any of the body is read.
// No request can stop the server or hold it up for others: every connection gets its own thread (started on
// demand, up to `threads`), a request's head must arrive within `head_timeout_s`, idle keep-alive connections
// are closed after `keep_alive_timeout_s`, bodies are refused unless authorised and size-limited, clients are
// rate-limited per address, parameters must be valid UTF-8, and no response names a server file path. Answers to
// GET requests are kept until the store changes (SQLite's data_version, or an import through this server).
#include <atomic>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "store/store.hpp"

namespace httplib {
struct Request;
struct Response;
class ContentReader;
}  // namespace httplib

namespace kindex::web {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                      // 0: an ephemeral port (see IndexServer::port)
  std::string token;                    // empty: write endpoints disabled
  size_t max_body_bytes = 64u << 20;    // larger requests get 413
  int requests_per_minute = 1200;       // per client address; beyond it 429
  int threads = 256;                    // connections served at once (one thread each); half per client address
  int head_timeout_s = 10;              // a request line and headers must arrive within this
  int keep_alive_timeout_s = 5;         // an idle keep-alive connection is closed after this
};

class IndexServer {
 public:
  IndexServer(store::Store& store, ServerOptions options);
  ~IndexServer();
  // Binds the socket; returns the port (useful with port 0). A port in use is an error (no port sharing).
  int bind();
  // Serves until stop(); call bind() first.
  void listen();
  // Ends listen() (from any thread), also one that has not started its accept loop yet; later listen() calls
  // return at once.
  void stop();
  int port() const { return port_; }
  // Runs raw request bytes (one or more pipelined requests) through the same routing as a connection and
  // returns the raw response bytes: the door of the fuzz target and of tests that send malformed requests.
  std::string serve_bytes(std::string_view request);

 private:
  class Http;
  void routes();
  void install_guards();
  std::optional<std::pair<int, std::string>> import_refusal(const httplib::Request& req) const;
  void import_upload(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& read_body);
  void operation_html(const httplib::Request& req, httplib::Response& res);
  store::Store& store_;
  ServerOptions options_;
  std::unique_ptr<Http> http_;
  int port_ = 0;
  // listen()/stop() handshake: httplib's own stop() does nothing until its accept loop runs.
  std::atomic<bool> listen_entered_{false}, listen_done_{false}, stop_requested_{false};
  struct RateLimiter;
  std::unique_ptr<RateLimiter> limiter_;
  struct ImportGate;
  std::unique_ptr<ImportGate> import_gate_;
  struct ResponseCache;
  std::unique_ptr<ResponseCache> cache_;
};

}  // namespace kindex::web
