// The MCP server's JSON-RPC handling (src/mcp): the handshake, tools/list, tools/call answering from the store, and
// every kind of bad message answered with its JSON-RPC error (never a crash, never silence for a request).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <string>

#include "mcp/server.hpp"
#include "store/import.hpp"
#include "store/store.hpp"
#include "support/paths.hpp"

namespace kindex::mcp {
namespace {

using nlohmann::json;

class Mcp : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    store_ = store::Store::open(":memory:").release();
    store::import_files(*store_, {test::data_dir() + "/kernelindex/export-slice-gqa.jsonl.zst",
                                  test::data_dir() + "/kernelindex/export-slice-serving.jsonl.zst"});
  }
  static void TearDownTestSuite() { delete store_; }
  json ask(const std::string& message) {
    const auto reply = Server(*store_).handle(message);
    if (!reply) return nullptr;
    return json::parse(*reply);
  }
  json call(const std::string& tool, const json& arguments, int id = 1) {
    return ask(json{{"jsonrpc", "2.0"}, {"id", id}, {"method", "tools/call"}, {"params", {{"name", tool}, {"arguments", arguments}}}}.dump());
  }
  // The tool's answer (its one text block, parsed); fails the test on an error reply.
  json answer(const std::string& tool, const json& arguments) {
    const json reply = call(tool, arguments);
    EXPECT_TRUE(reply.contains("result")) << reply.dump();
    if (!reply.contains("result")) return nullptr;
    EXPECT_EQ(reply["result"]["isError"], false);
    return json::parse(reply["result"]["content"][0]["text"].get<std::string>());
  }
  static store::Store* store_;
};
store::Store* Mcp::store_ = nullptr;

TEST_F(Mcp, HandshakeNegotiatesTheClientsRevisionOrTheLatest) {
  const json r = ask(R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18",
    "capabilities":{},"clientInfo":{"name":"t","version":"1"}}})");
  EXPECT_EQ(r["result"]["protocolVersion"], "2025-06-18");
  EXPECT_EQ(r["result"]["serverInfo"]["name"], "kindex");
  EXPECT_EQ(r["result"]["capabilities"]["tools"]["listChanged"], false);
  EXPECT_EQ(ask(R"({"jsonrpc":"2.0","id":"a","method":"initialize","params":{"protocolVersion":"1999-01-01"}})")["result"]["protocolVersion"],
            "2025-11-25");
  EXPECT_TRUE(ask(R"({"jsonrpc":"2.0","method":"notifications/initialized"})").is_null());  // a notification: no reply
  EXPECT_EQ(ask(R"({"jsonrpc":"2.0","id":7,"method":"ping"})"), (json{{"jsonrpc", "2.0"}, {"id", 7}, {"result", json::object()}}));
}

TEST_F(Mcp, ToolsListHasKernelIndexsSixteenToolsWithObjectSchemas) {
  const json tools = ask(R"({"jsonrpc":"2.0","id":1,"method":"tools/list"})")["result"]["tools"];
  ASSERT_EQ(tools.size(), 16u);
  for (const auto& t : tools) {
    EXPECT_EQ(t["inputSchema"]["type"], "object") << t["name"];
    EXPECT_FALSE(t["description"].get<std::string>().empty());
  }
}

TEST_F(Mcp, ToolsAnswerFromTheStoreAsTheIndexDoes) {
  const std::string op = "gqa_paged_decode_h24_kv4_d128_ps64";
  EXPECT_EQ(answer("get_operation", {{"idOrSlug", op}})["operation"]["name"], op);
  const json decision = answer("resolve_kernel", {{"request", {{"operation", {{"name", op}, {"axes", {{"batch_size", 1}, {"num_pages", 425}}}}},
                                                               {"environment", {{"hardwareProduct", "B200"}}},
                                                               {"policy", {{"minimumTrust", "verified"}, {"license", "MIT"}}}}}});
  ASSERT_TRUE(decision["exact"].is_object());
  EXPECT_TRUE(decision["exact"]["ranked"].empty());  // the slice's runs are reported, none verified
  EXPECT_EQ(decision["policy"]["notApplied"], json::array({"license"}));
  const json serving = answer("resolve_serving", {{"request", {{"model", "mlperf-llama2-70b"}, {"hardware", {{"model", "B200"}, {"countMaximum", 8}}},
                                                               {"constraints", {{{"metric", "ttft_ms"}, {"operator", "<"}, {"value", 450}}}}}}});
  EXPECT_EQ(serving["slo"][0]["operator"], "<");
  for (const auto& c : serving["configurations"]) {
    EXPECT_LT(c["latency"]["ttft_ms"]["ms"].get<double>(), 450);
    EXPECT_LE(c["accelerators"].get<double>(), 8);
  }
  const json runs = answer("list_runs", {{"operation", op}, {"limit", 2}});
  EXPECT_EQ(runs["runs"].size(), 2u);
  EXPECT_EQ(runs["nextCursor"], "2");
  EXPECT_EQ(answer("list_runs", {{"operation", op}, {"limit", 2}, {"cursor", "2"}})["runs"][0]["id"],
            answer("list_runs", {{"operation", op}, {"limit", 3}})["runs"][2]["id"]);
  EXPECT_EQ(answer("get_manifest_schema", {{"kind", "ServingRun"}})["title"], "ServingRun");
}

// Each bad message gets its JSON-RPC error; the server answers the next one.
TEST_F(Mcp, BadMessagesAreAnsweredWithTheirJsonRpcError) {
  const struct {
    std::string message;
    int code;
  } cases[] = {
      {"not json", -32700},
      {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"id\":2}", -32700},  // duplicate key
      {"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]", -32600},        // a batch
      {"{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"ping\"}", -32600},
      {"{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"ping\"}", -32600},
      {"{\"jsonrpc\":\"2.0\",\"id\":1}", -32600},
      {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":5}", -32600},
      {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"resources/list\"}", -32601},
      {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":[]}", -32602},
      {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{}}", -32602},
      {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"list_models\",\"arguments\":[]}}", -32602},
      {std::string(100000, '['), -32700},
      {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"x\":\"\xff\"}}", -32700},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.message.substr(0, 80));
    const json r = ask(c.message);
    ASSERT_TRUE(r.contains("error")) << r.dump();
    EXPECT_EQ(r["error"]["code"], c.code) << r.dump();
    EXPECT_EQ(r["jsonrpc"], "2.0");
  }
}

TEST_F(Mcp, BadArgumentsAreInvalidParamsNamingTheArgument) {
  const struct {
    std::string tool;
    json arguments;
    std::string argument;
  } cases[] = {
      {"search_catalog", json::object(), "q"},
      {"search_catalog", {{"q", 1}}, "q"},
      {"search_catalog", {{"q", std::string(501, 'x')}}, "q"},
      {"list_runs", {{"limit", 201}}, "limit"},
      {"list_runs", {{"since", "last week"}}, "since"},
      {"list_runs", {{"operation", "no_such_operation"}}, "operation"},
      {"compare_runs", {{"runs", json::array({"a", "b", "c", "d", "e", "f", "g", "h", "i"})}}, "runs"},
      {"resolve_kernel", {{"request", {{"operation", {{"name", "x"}, {"axes", {{"n", "1"}}}}}}}}, "request/operation/axes/n"},
      {"resolve_serving", {{"request", {{"model", "mlperf-llama2-70b"}, {"objective", {{"direction", "minimize"}, {"metric", "ttft_ms"}}}}}},
       "request.objective"},
      {"get_serving_run", {{"id", "nope"}}, "serving run"},
      {"validate_manifest", {{"content", 3}}, "content"},
      {"no_such_tool", json::object(), "name"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.tool + " " + c.arguments.dump().substr(0, 80));
    const json r = call(c.tool, c.arguments);
    ASSERT_TRUE(r.contains("error")) << r.dump().substr(0, 300);
    EXPECT_EQ(r["error"]["code"], -32602);
    EXPECT_EQ(r["error"]["data"]["argument"], c.argument) << r["error"]["message"];
    EXPECT_EQ(r["id"], 1);
  }
}

// The stdio loop: one reply line per request, none for notifications or blank lines, an overlong line refused
// without holding it, a last line without its newline answered, and a clean end when stdin closes.
TEST_F(Mcp, ServeAnswersEachLineAndEndsWhenStdinCloses) {
  std::string input = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\r\n\n   \n"
                      "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n";
  input += std::string(kMaxMessageBytes + 10, 'x') + "\n";
  input += "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}";
  std::FILE* in = std::tmpfile();
  std::FILE* out = std::tmpfile();
  std::fwrite(input.data(), 1, input.size(), in);
  std::rewind(in);
  Server(*store_).serve(in, out);
  std::rewind(out);
  std::string text;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, out)) > 0;) text.append(buf, n);
  std::fclose(in);
  std::fclose(out);
  std::vector<json> replies;
  for (std::size_t start = 0, end; (end = text.find('\n', start)) != std::string::npos; start = end + 1)
    replies.push_back(json::parse(text.substr(start, end - start)));
  ASSERT_EQ(replies.size(), 3u) << text.substr(0, 500);
  EXPECT_EQ(replies[0]["id"], 1);
  EXPECT_EQ(replies[1]["error"]["code"], -32600);
  EXPECT_EQ(replies[2]["id"], 2);
}

}  // namespace
}  // namespace kindex::mcp
