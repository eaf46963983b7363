// libFuzzer target for `kindex serve`'s request path: the input is raw HTTP bytes (one or more requests) given to
// IndexServer::serve_bytes, which runs the same parsing, guards, routes, queries and pages as a connection. The
// store holds the kernel and serving export slices; the server has an import token (the seed corpus holds an
// authorised import) and a 64 KB body limit. Whatever the bytes, it must answer with HTTP responses or nothing,
// and never crash, hang or read out of bounds.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "slice_store.hpp"
#include "web/server.hpp"

namespace {

kindex::web::IndexServer& server() {
  static kindex::web::IndexServer server(kindex::fuzz::slice_store(), [] {
    kindex::web::ServerOptions o;
    o.token = "fuzz-token";
    o.requests_per_minute = 1 << 30;
    o.max_body_bytes = 1 << 16;
    return o;
  }());
  return server;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string response = server().serve_bytes(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!response.empty() && response.rfind("HTTP/1.1 ", 0) != 0) __builtin_trap();
  return 0;
}
