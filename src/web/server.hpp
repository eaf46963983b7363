#pragma once
// `kindex serve`: the JSON API and HTML pages over one store. Read-only unless a token is configured; the only
// write endpoint (POST /api/import) needs "Authorization: Bearer <token>". Request bodies are size-limited,
// clients are rate-limited per address, and no request names a file path.
#include <cstddef>
#include <memory>
#include <string>

#include "store/store.hpp"

namespace httplib { class Server; }

namespace kindex::web {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                      // 0: an ephemeral port (see IndexServer::port)
  std::string token;                    // empty: write endpoints disabled
  size_t max_body_bytes = 64u << 20;    // larger requests get 413
  int requests_per_minute = 1200;       // per client address; beyond it 429
  int threads = 8;
};

class IndexServer {
 public:
  IndexServer(store::Store& store, ServerOptions options);
  ~IndexServer();
  // Binds the socket; returns the port (useful with port 0).
  int bind();
  // Serves until stop(); call bind() first.
  void listen();
  void stop();
  int port() const { return port_; }

 private:
  void routes();
  store::Store& store_;
  ServerOptions options_;
  std::unique_ptr<httplib::Server> http_;
  int port_ = 0;
  struct RateLimiter;
  std::unique_ptr<RateLimiter> limiter_;
};

}  // namespace kindex::web
