// The MCP server's JSON-RPC handling (src/mcp): the handshake, tools/list, tools/call answering from the store, and
// every kind of bad message answered with its JSON-RPC error (never a crash, never silence for a request).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
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
  // protocolVersion is required (a string): without one the request is invalid params naming it.
  for (const char* bad : {R"({"jsonrpc":"2.0","id":3,"method":"initialize","params":{}})",
                          R"({"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":20250618}})"}) {
    const json e = ask(bad);
    EXPECT_EQ(e["error"]["code"], -32602) << e.dump();
    EXPECT_EQ(e["error"]["data"]["argument"], "protocolVersion") << e.dump();
  }
  EXPECT_TRUE(ask(R"({"jsonrpc":"2.0","method":"notifications/initialized"})").is_null());  // a notification: no reply
  EXPECT_EQ(ask(R"({"jsonrpc":"2.0","id":7,"method":"ping"})"), (json{{"jsonrpc", "2.0"}, {"id", 7}, {"result", json::object()}}));
}

// The stateless revision (2026-07-28): server/discover names every revision this server speaks; a request naming its
// revision in params._meta is answered with resultType "complete" (tools/list with its cache hints); a revision the
// server does not speak is -32022 naming those it does; an envelope without the client's capabilities is -32602.
TEST_F(Mcp, StatelessRevisionIsServedPerRequest) {
  const json discover = ask(R"({"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{
    "io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}})");
  ASSERT_TRUE(discover.contains("result")) << discover.dump();
  EXPECT_EQ(discover["result"]["supportedVersions"], json::array({"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"}));
  EXPECT_EQ(discover["result"]["resultType"], "complete");
  EXPECT_EQ(discover["result"]["capabilities"]["tools"]["listChanged"], false);
  EXPECT_EQ(discover["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "kindex");
  const std::string envelope = R"("_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}})";
  const json list = ask(R"({"jsonrpc":"2.0","id":2,"method":"tools/list","params":{)" + envelope + "}}");
  EXPECT_EQ(list["result"]["tools"].size(), 16u);
  EXPECT_EQ(list["result"]["resultType"], "complete");
  EXPECT_EQ(list["result"]["cacheScope"], "public");
  EXPECT_GT(list["result"]["ttlMs"].get<int64_t>(), 0);
  const json called = ask(R"({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"list_models","arguments":{},)" + envelope + "}}");
  EXPECT_EQ(called["result"]["resultType"], "complete");
  EXPECT_EQ(called["result"]["isError"], false);
  // A handshake-era request gets no resultType: the older revisions do not have it.
  EXPECT_FALSE(ask(R"({"jsonrpc":"2.0","id":4,"method":"tools/list"})")["result"].contains("resultType"));
  const json unsupported = ask(R"({"jsonrpc":"2.0","id":5,"method":"tools/list","params":{"_meta":{
    "io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}}}})");
  EXPECT_EQ(unsupported["error"]["code"], -32022) << unsupported.dump();
  EXPECT_EQ(unsupported["error"]["data"], (json{{"supported", {"2026-07-28"}}, {"requested", "2099-01-01"}}));
  for (const char* bad : {R"({"jsonrpc":"2.0","id":6,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}})",
                          R"({"jsonrpc":"2.0","id":6,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":7,
                              "io.modelcontextprotocol/clientCapabilities":{}}}})"}) {
    const json e = ask(bad);
    EXPECT_EQ(e["error"]["code"], -32602) << e.dump();
    EXPECT_NE(e["error"]["message"].get<std::string>().find("io.modelcontextprotocol/"), std::string::npos) << e.dump();
  }
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

// The answers KernelIndex's API gives for the same question, field for field, where kindex answers it the same way.
TEST_F(Mcp, ListAnswersHaveKernelIndexsShapes) {
  const json hardware = answer("list_hardware", json::object());
  ASSERT_FALSE(hardware["hardware"].empty());
  EXPECT_TRUE(hardware["generatedAt"].is_string());
  bool serving = false;
  for (const auto& h : hardware["hardware"]) {
    for (const char* key : {"slug", "model", "vendor", "architecture", "kernelRuns", "servingRuns", "operations", "families", "lastObservedAt"})
      EXPECT_TRUE(h.contains(key)) << key << " in " << h.dump();
    EXPECT_TRUE(h["families"].is_number_integer()) << h.dump();
    EXPECT_EQ(h["slug"].get<std::string>().find_first_of(" ABCDEFGHIJKLMNOPQRSTUVWXYZ"), std::string::npos) << h["slug"];
    serving = serving || h["servingRuns"].get<int>() > 0;
    if (h["kernelRuns"].get<int>() > 0) {
      EXPECT_GE(h["operations"].get<int>(), h["families"].get<int>()) << h.dump();
    }
  }
  EXPECT_TRUE(serving);
  // Counts of the runs KernelIndex's listings count: passed, published, not retracted, not superseded (serving:
  // valid, published, not retracted).
  for (const auto& h : hardware["hardware"]) {
    const std::string gpu = h["model"];
    EXPECT_EQ(h["kernelRuns"], store_->db().query("SELECT COUNT(*) FROM benchmark_runs r WHERE r.hardware_model = ? AND "
                                                  "r.status = 'passed' AND r.retracted_at IS NULL AND NOT EXISTS (SELECT 1 "
                                                  "FROM benchmark_runs n WHERE n.supersedes_id = r.id)", {gpu})[0].integer(0)) << gpu;
    EXPECT_EQ(h["servingRuns"], store_->db().query("SELECT COUNT(*) FROM serving_runs WHERE accelerator_model = ? AND "
                                                   "status = 'valid'", {gpu})[0].integer(0)) << gpu;
  }
  const int64_t all_runs = store_->db().query("SELECT COUNT(*) FROM benchmark_runs")[0].integer(0);
  int64_t counted = 0;
  for (const auto& h : hardware["hardware"]) counted += h["kernelRuns"].get<int64_t>();
  EXPECT_LT(counted, all_runs);  // the slice has runs that did not pass: they are not counted
  const json models = answer("list_models", json::object());
  ASSERT_EQ(models["serving"].size(), 6u) << models.dump().substr(0, 300);
  for (std::size_t i = 0; i < models["serving"].size(); ++i) {
    const json& m = models["serving"][i];
    for (const char* key : {"slug", "name", "parameterCount", "runs"}) EXPECT_TRUE(m.contains(key)) << key;
    if (i > 0) {
      EXPECT_GE(models["serving"][i - 1]["runs"].get<int>(), m["runs"].get<int>());  // most runs first
    }
  }
  for (const auto& k : models["kernel"]) EXPECT_NE(k["model"].get<std::string>().rfind("model:", 0), 0u) << k.dump();
  const json changes = answer("list_changes", {{"since", "2020-01-01T00:00:00Z"}});
  ASSERT_FALSE(changes["days"].empty());
  EXPECT_EQ(changes["days"][0]["date"].get<std::string>().size(), 10u);
  int with_previous = 0;
  for (const auto& day : changes["days"])
    for (const auto& e : day["entries"]) {
      // KernelIndex's feed "record" entry (the slice's record events are all new record holders).
      for (const char* key : {"at", "match", "kind", "runId", "operation", "workloadId", "workloadSummary", "hardware",
                              "implementation", "project", "value", "previous", "improvementPct", "cohortKey"})
        ASSERT_TRUE(e.contains(key)) << key << " in " << e.dump();
      EXPECT_EQ(e["kind"], "record");
      EXPECT_EQ(e["at"].get<std::string>().substr(0, 10), day["date"]);
      EXPECT_EQ(e["match"]["cohort"], e["cohortKey"]);
      EXPECT_EQ(e["match"]["operation"], e["operation"]["slug"]);
      EXPECT_EQ(e["value"]["unit"], "ns");
      if (e["previous"].is_object()) {
        ++with_previous;
        // A new record is faster than the one it displaced: the improvement is the cut in latency, in percent.
        const double now = e["value"]["value"], before = e["previous"]["value"]["value"];
        EXPECT_NEAR(e["improvementPct"].get<double>(), (before - now) / before * 100, 1e-9);
        EXPECT_GE(e["improvementPct"].get<double>(), 0) << e.dump();
      }
    }
  EXPECT_GT(with_previous, 0);
  EXPECT_TRUE(changes["generatedAt"].is_string());
  const json runs = answer("list_runs", {{"limit", 20}, {"hardware", "B200"}});
  EXPECT_TRUE(runs["generatedAt"].is_string());
  ASSERT_EQ(runs["runs"].size(), 20u);
  for (const auto& r : runs["runs"]) {
    for (const char* key : {"id", "digest", "operation", "implementation", "hardware", "status", "primary", "evidence",
                            "sourceAvailable", "source", "observedAt"})
      EXPECT_TRUE(r.contains(key)) << key << " in " << r.dump();
    EXPECT_EQ(r["digest"], r["runDigest"]);
    EXPECT_NE(r["hardware"].get<std::string>().find("B200"), std::string::npos);
    EXPECT_TRUE(r["sourceAvailable"].is_boolean());
    ASSERT_TRUE(r["primary"].is_object()) << r.dump();
    EXPECT_EQ(r["primary"]["value"], r["latencyNs"]);
    EXPECT_EQ(r["primary"]["unit"], "ns");
  }
  EXPECT_EQ(answer("get_operation", {{"idOrSlug", runs["runs"][0]["operation"]}})["operation"]["slug"], runs["runs"][0]["operation"]);
  // Every status KernelIndex's /runs filter takes is a filter here too (none of the slice's runs has this one).
  EXPECT_TRUE(answer("list_runs", {{"status", "incorrect_shape"}})["runs"].empty());
  const json records = answer("list_records", {{"limit", 200}});
  EXPECT_TRUE(records["generatedAt"].is_string());
  ASSERT_FALSE(records["records"].empty());
  for (const auto& r : records["records"]) {
    for (const char* key : {"cohortKey", "operation", "workloadId", "workloadSummary", "hardware", "environmentSummary",
                            "current", "since", "indexedAt", "history"})
      ASSERT_TRUE(r.contains(key)) << key << " in " << r.dump().substr(0, 300);
    EXPECT_EQ(r["current"]["runId"], r["record"]["id"]);
    EXPECT_EQ(r["current"]["value"]["value"], r["record"]["latencyNs"]);
    EXPECT_TRUE(r["operation"]["slug"].is_string() && r["operation"]["name"].is_string());
    ASSERT_TRUE(r["since"].is_string()) << r.dump().substr(0, 300);  // the holder's own record event
    EXPECT_LE(r["since"].get<std::string>(), records["generatedAt"].get<std::string>());
  }
  const json batch = answer("resolve_kernels", {{"requests", {{{"operation", {{"name", "gqa_paged_decode_h24_kv4_d128_ps64"}}}}}}});
  EXPECT_EQ(batch["results"].size(), 1u);
  EXPECT_TRUE(batch["generatedAt"].is_string());
  // Axis values are numbers as KernelIndex takes them: 1.0 is the axis value 1, 1.5 is refused naming the axis.
  const json whole = answer("resolve_kernel", {{"request", {{"operation", {{"name", "gqa_paged_decode_h24_kv4_d128_ps64"},
                                                                           {"axes", {{"batch_size", 1.0}, {"num_pages", 425}}}}}}}});
  EXPECT_EQ(whole["query"]["axes"]["batch_size"], 1);
}

TEST_F(Mcp, ValidateManifestAnswersAsKernelIndexDoes) {
  const json bad = answer("validate_manifest", {{"content", R"({"kind": "OperationSpec", "spec": {}})"}, {"format", "json"}});
  EXPECT_EQ(bad["valid"], false);
  EXPECT_EQ(bad["kind"], "OperationSpec");
  ASSERT_FALSE(bad["errors"].empty());
  for (const auto& e : bad["errors"]) EXPECT_EQ(e.get<std::string>().front(), '/') << e;  // "<pointer>: <rule>"
  EXPECT_EQ(answer("validate_manifest", {{"content", "{}"}, {"format", "json"}})["errors"], json::array({"missing kind"}));
  std::ifstream example(test::data_dir() + "/kernelindex/examples/serving-run.yaml");
  const std::string yaml((std::istreambuf_iterator<char>(example)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(yaml.empty());
  const json good = answer("validate_manifest", {{"content", yaml}});
  EXPECT_EQ(good["valid"], true) << good.dump();
  EXPECT_EQ(good["kind"], "ServingRun");
  EXPECT_EQ(good["errors"], json::array());
  EXPECT_EQ(good["specDigest"].get<std::string>().size(), 71u) << good.dump();
  EXPECT_EQ(good["specDigest"].get<std::string>().rfind("sha256:", 0), 0u);
  // Text that is not YAML/JSON at all is the tool's error (isError), as KernelIndex's parse error is.
  const json r = call("validate_manifest", {{"content", "{"}, {"format", "json"}});
  EXPECT_EQ(r["result"]["isError"], true) << r.dump();
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

// A bad argument is the tool's error (MCP 2025-11-25: input validation errors are tool execution errors, so the agent
// can correct itself; KernelIndex's server does the same): a result with isError true whose text names the argument
// (and the value). Only an unknown tool is a JSON-RPC error (-32602).
TEST_F(Mcp, BadArgumentsAreToolErrorsNamingTheArgument) {
  const struct {
    std::string tool;
    json arguments;
    std::vector<std::string> named;
  } cases[] = {
      {"search_catalog", json::object(), {"argument q"}},
      {"search_catalog", {{"q", 1}}, {"argument q"}},
      {"search_catalog", {{"q", std::string(501, 'x')}}, {"argument q"}},
      {"list_runs", {{"limit", 201}}, {"argument limit", "201"}},
      {"list_runs", {{"since", "last week"}}, {"since", "last week"}},
      {"list_runs", {{"operation", "no_such_operation"}}, {"operation", "no_such_operation"}},
      {"compare_runs", {{"runs", json::array({"a", "b", "c", "d", "e", "f", "g", "h", "i"})}}, {"argument runs"}},
      {"resolve_kernel", {{"request", {{"operation", {{"name", "x"}, {"axes", {{"n", "1"}}}}}}}}, {"request/operation/axes/n"}},
      {"resolve_kernel", {{"request", {{"operation", {{"name", "gqa_paged_decode_h24_kv4_d128_ps64"}, {"axes", {{"batch_size", 1.5}}}}}}}},
       {"request.operation.axes.batch_size", "1.5"}},
      {"resolve_serving", {{"request", {{"model", "mlperf-llama2-70b"}, {"objective", {{"direction", "minimize"}, {"metric", "ttft_ms"}}}}}},
       {"request.objective", "ttft_ms"}},
      {"get_serving_run", {{"id", "nope"}}, {"nope"}},
      {"validate_manifest", {{"content", 3}}, {"argument content"}},
      {"validate_manifest", {{"content", "x: ["}}, {"content"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.tool + " " + c.arguments.dump().substr(0, 80));
    const json r = call(c.tool, c.arguments);
    ASSERT_TRUE(r.contains("result")) << r.dump().substr(0, 300);
    EXPECT_EQ(r["id"], 1);
    EXPECT_EQ(r["result"]["isError"], true);
    const std::string text = r["result"]["content"][0]["text"];
    EXPECT_EQ(r["result"]["content"][0]["type"], "text");
    for (const auto& n : c.named) EXPECT_NE(text.find(n), std::string::npos) << n << " not in: " << text;
  }
  const json unknown = call("no_such_tool", json::object());
  ASSERT_TRUE(unknown.contains("error")) << unknown.dump();
  EXPECT_EQ(unknown["error"]["code"], -32602);
  EXPECT_EQ(unknown["error"]["data"]["argument"], "name");
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
