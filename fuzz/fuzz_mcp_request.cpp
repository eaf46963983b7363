// libFuzzer target for `kindex mcp`'s request path: the input is one message (a stdin line) given to
// mcp::Server::handle, which parses it, dispatches the method and runs the tool over the store. Whatever the bytes,
// the reply must be one JSON-RPC 2.0 object on one line (or none, for a notification), and nothing may crash,
// hang or read out of bounds.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "mcp/server.hpp"
#include "slice_store.hpp"

namespace {

kindex::mcp::Server& server() {
  static kindex::mcp::Server server(kindex::fuzz::slice_store());
  return server;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto reply = server().handle(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!reply) return 0;
  if (reply->find('\n') != std::string::npos) __builtin_trap();
  const nlohmann::json r = nlohmann::json::parse(*reply, nullptr, /*allow_exceptions=*/false);
  if (!r.is_object() || r.value("jsonrpc", "") != "2.0" || (r.contains("result") == r.contains("error"))) __builtin_trap();
  return 0;
}
