#pragma once
// `kindex mcp`: a Model Context Protocol server over stdio, so coding agents can ask the index which kernel (or
// serving configuration) to use for their exact workload. JSON-RPC 2.0 messages, one per line (the MCP stdio
// transport). Both protocol eras: the initialize handshake (revisions 2024-11-05 to 2025-11-25) and the stateless
// 2026-07-28 revision (server/discover; each request names its revision in params._meta). tools/list and tools/call
// serve KernelIndex's 16 tools (apps/mcp: same names and argument shapes), each answered from the store as one JSON
// text block.
//
// Any input is answered, never crashes or stops the server: a line that is not JSON is a parse error (-32700), a
// message that is not a request -32600, an unknown method -32601, an unknown tool -32602, a revision this server does
// not speak -32022, anything unexpected -32603. An argument the tool's input schema refuses (or the index refuses: no
// such operation) is the tool's error, a result with isError true naming the argument (MCP 2025-11-25 on).
// A line longer than kMaxMessageBytes is refused unread past that size.
#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

#include "store/store.hpp"

namespace kindex::mcp {

inline constexpr std::size_t kMaxMessageBytes = 16u << 20;

class Server {
 public:
  explicit Server(store::Store& store);
  // The reply to one message (one line, without its newline); nullopt for a notification.
  std::optional<std::string> handle(std::string_view message);
  // Reads messages from `in` until it closes, writing each reply as one line to `out` (flushed).
  void serve(std::FILE* in, std::FILE* out);
  // The tools/list answer's tools: name, description, inputSchema.
  static const nlohmann::json& tools();

 private:
  nlohmann::json dispatch(const std::string& method, const nlohmann::json& params);
  nlohmann::json call_tool(const std::string& name, const nlohmann::json& arguments);
  store::Store& store_;
};

}  // namespace kindex::mcp
