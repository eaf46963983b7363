#include "mcp/server.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cerrno>
#include <functional>
#include <iostream>
#include <map>
#include <set>
#include <vector>

#include "core/error.hpp"
#include "evidence/digest.hpp"
#include "evidence/manifest.hpp"
#include "evidence/reader.hpp"
#include "evidence/schema.hpp"
#include "store/query.hpp"

namespace kindex::mcp {

using nlohmann::json;

namespace {

// The protocol revisions the initialize handshake negotiates, oldest first.
const std::vector<std::string> kProtocolVersions = {"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"};
// The stateless revisions (2026-07-28 on): no handshake; each request names its revision and the client's
// capabilities in params._meta, and server/discover tells the client what this server speaks.
const std::vector<std::string> kModernVersions = {"2026-07-28"};
const char* const kVersionKey = "io.modelcontextprotocol/protocolVersion";
const char* const kCapabilitiesKey = "io.modelcontextprotocol/clientCapabilities";
const char* const kServerInfoKey = "io.modelcontextprotocol/serverInfo";
constexpr int kUnsupportedProtocolVersion = -32022;

// A JSON-RPC error reply's code, message and data.
struct RpcError {
  int code;
  std::string message;
  json data;
};

// A value as an error may show it: scalars (at most 80 characters), never a whole object or array.
std::string brief(const json& v) {
  if (v.is_object()) return "an object";
  if (v.is_array()) return "an array";
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  return s.size() > 80 ? s.substr(0, 80) + "..." : s;
}

// The tools' input schemas (KernelIndex's apps/mcp argument shapes), checked with kindex's JSON Schema validator.
const json& request_schemas() {
  static const json defs = json::parse(R"JSON({
    "kernelRequest": {
      "type": "object", "additionalProperties": false,
      "properties": {
        "query": {"type": "string", "maxLength": 500, "description": "Free-text query (used when no operation.name is given)"},
        "operation": {"type": "object", "additionalProperties": false, "properties": {
          "family": {"type": "string", "maxLength": 100},
          "name": {"type": "string", "maxLength": 200, "description": "Operation or definition name, slug or alias"},
          "axes": {"type": "object", "additionalProperties": {"type": "number"}, "description": "Axis values, e.g. {\"batch_size\": 1}"}}},
        "environment": {"type": "object", "additionalProperties": false, "properties": {
          "hardwareProduct": {"type": "string", "maxLength": 100, "description": "Part of the GPU's name, e.g. H200"},
          "dtype": {"type": "string", "maxLength": 50}}},
        "policy": {"type": "object", "additionalProperties": false, "properties": {
          "minimumTrust": {"enum": ["reported", "reproducible", "verified", "replicated"]},
          "sourceRequired": {"type": "boolean"}, "installableRequired": {"type": "boolean"},
          "license": {"type": "string", "maxLength": 100}}}}},
    "servingRequest": {
      "type": "object", "additionalProperties": false,
      "properties": {
        "model": {"type": "string", "maxLength": 200, "description": "Model slug, name or a unique part of either"},
        "workload": {"type": "string", "maxLength": 200, "description": "Serving workload slug or id"},
        "hardware": {"type": "object", "additionalProperties": false, "properties": {
          "model": {"type": "string", "maxLength": 200, "description": "GPU: exact name, else every GPU containing it"},
          "countMaximum": {"type": "integer", "minimum": 1}}},
        "objective": {"type": "object", "additionalProperties": false, "required": ["direction", "metric"], "properties": {
          "direction": {"enum": ["maximize", "minimize"]}, "metric": {"type": "string", "maxLength": 60},
          "statistic": {"type": "string", "maxLength": 30}}},
        "constraints": {"type": "array", "maxItems": 8, "items": {"type": "object", "additionalProperties": false,
          "required": ["metric", "operator", "value"], "properties": {
            "metric": {"type": "string", "maxLength": 60}, "statistic": {"type": "string", "maxLength": 30},
            "operator": {"enum": ["<=", "<"]}, "value": {"type": "number", "exclusiveMinimum": 0}}}}}}
  })JSON");
  return defs;
}

json object_schema(json properties, std::vector<std::string> required = {}, bool with_defs = false) {
  json s = {{"type", "object"}, {"properties", std::move(properties)}, {"additionalProperties", false}};
  if (!required.empty()) s["required"] = required;
  if (with_defs) s["$defs"] = request_schemas();
  return s;
}
json text(int max) { return {{"type", "string"}, {"maxLength", max}}; }
json page_limit() { return {{"type", "integer"}, {"minimum", 1}, {"maximum", 200}}; }

struct Tool {
  std::string name, description;
  json schema;
  std::function<json(store::Store&, const json&)> answer;
};

std::string str(const json& args, const char* key) {
  const auto it = args.find(key);
  return it == args.end() ? std::string() : it->get<std::string>();
}
const json& member(const json& j, const char* key) {
  static const json none = json::object();
  const auto it = j.find(key);
  return it == j.end() ? none : *it;
}

int trust_rank(const std::string& level) {
  static const std::map<std::string, int> ranks = {{"reported", 0}, {"reproducible", 1}, {"verified", 2}, {"replicated", 3}};
  const auto it = ranks.find(level);
  return it == ranks.end() ? 0 : it->second;
}

// resolve_kernel's decision for one request: the ranked implementations of the exact workload (store::resolve), or
// the operations a free-text query matches when no operation is named.
json resolve_kernel(store::Store& s, const json& request) {
  const json& operation = member(request, "operation");
  const std::string name = str(operation, "name");
  if (name.empty()) {
    const std::string q = !str(request, "query").empty() ? str(request, "query") : str(operation, "family");
    if (q.empty()) throw Error("resolve_kernel", "request.operation.name", "", "name an operation (or give a query to search for one)");
    return {{"decision", nullptr}, {"matches", store::search(s, q)},
            {"note", "no operation named: these operations match; resolve one with request.operation.name"}};
  }
  store::ResolveQuery q;
  q.operation = name;
  for (const auto& [axis, value] : member(operation, "axes").items()) {
    // KernelIndex's request takes numbers; a workload's axis values are whole numbers.
    const double v = value.get<double>();
    if (!value.is_number_integer() && !value.is_number_unsigned() && (v != std::floor(v) || std::fabs(v) > 9.0e15))
      throw Error("resolve_kernel", "request.operation.axes." + axis, brief(value), "an axis value is a whole number");
    q.axes[axis] = value.is_number_integer() ? value.get<int64_t>() : static_cast<int64_t>(v);
  }
  const json& environment = member(request, "environment");
  q.gpu = str(environment, "hardwareProduct");
  q.dtype = str(environment, "dtype");
  json answer = store::resolve(s, q);
  // The policy: a minimum trust filters the exact workload's ranked runs; the rest is not known to this index.
  const json& policy = member(request, "policy");
  json applied = json::array(), not_applied = json::array();
  for (const auto& [key, value] : policy.items()) {
    if (key != "minimumTrust") {
      not_applied.push_back(key);
      continue;
    }
    applied.push_back(key);
    if (!answer["exact"].is_object()) continue;
    json kept = json::array();
    for (const auto& r : answer["exact"]["ranked"])
      if (trust_rank(r.value("evidence", "reported")) >= trust_rank(value.get<std::string>())) kept.push_back(r);
    answer["exact"]["ranked"] = std::move(kept);
  }
  answer["policy"] = {{"applied", applied}, {"notApplied", not_applied}};
  return answer;
}

// resolve_serving's request as kindex's serving resolver takes it.
store::ServingResolveQuery serving_query(const json& request) {
  store::ServingResolveQuery q;
  q.model = str(request, "model");
  if (q.model.empty()) throw Error("resolve_serving", "request.model", "", "name the model (slug, name or a unique part of either)");
  q.workload = str(request, "workload");
  const json& hardware = member(request, "hardware");
  q.gpu = str(hardware, "model");
  if (hardware.contains("countMaximum")) q.max_accelerators = hardware["countMaximum"].get<int64_t>();
  const json& objective = member(request, "objective");
  if (!objective.empty() && (objective["direction"] != "maximize" || objective["metric"] != "output_token_throughput_tps"))
    throw Error("resolve_serving", "request.objective", brief(objective["metric"]),
                "this index ranks by output_token_throughput_tps, maximized (per accelerator)");
  const json& constraints = member(request, "constraints");
  for (std::size_t i = 0; i < constraints.size(); ++i) {
    const json& c = constraints[i];
    const std::string metric = c["metric"], field = "request.constraints[" + std::to_string(i) + "]";
    if (metric != "ttft_ms" && metric != "tpot_ms")
      throw Error("resolve_serving", field + ".metric", metric, "this index resolves p99 ttft_ms and tpot_ms limits");
    if (str(c, "statistic") != "" && str(c, "statistic") != "p99")
      throw Error("resolve_serving", field + ".statistic", str(c, "statistic"), "this index resolves p99 limits");
    q.slo_ms[metric] = c["value"].get<double>();
    if (c["operator"] == "<") q.strict.insert(metric);
  }
  return q;
}

// validate_manifest's answer as KernelIndex gives it: {valid, kind, errors} with each error "<JSON pointer>: <rule>"
// ("/" for the document), and the canonical digest of {apiVersion, kind, spec} as specDigest when valid. Text that
// does not parse is an error of the tool (isError), as it is KernelIndex's.
json validate_manifest_text(const json& args) {
  const std::string format = args.value("format", "yaml");
  const std::string content = args["content"];
  const json document = format == "json" ? evidence::parse_json_strict(content, "content") : evidence::parse_yaml(content, "content");
  if (!document.is_object()) throw Error("validate_manifest", "content", brief(document), "not a manifest document (an object)");
  const json kind = document.contains("kind") && document["kind"].is_string() ? document["kind"] : json("");
  auto line = [](const std::string& pointer, const std::string& rule, const std::string& value) {
    return (pointer.empty() ? std::string("/") : pointer) + ": " + rule + (value.empty() ? "" : " (" + value + ")");
  };
  json errors = json::array();
  if (kind == "") errors.push_back("missing kind");
  for (const auto& p : errors.empty() ? evidence::check_manifest_schema(document) : std::vector<evidence::SchemaViolation>{})
    errors.push_back(line(p.pointer, p.rule, p.value));
  if (errors.empty()) {
    try {
      evidence::validate_manifest(document, "content");  // the normalisations (durations) too
    } catch (const Error& e) {
      errors.push_back(line(e.field(), e.problem(), e.value()));
    }
  }
  if (!errors.empty()) return {{"valid", false}, {"kind", kind}, {"errors", errors}};
  return {{"valid", true}, {"kind", kind}, {"errors", json::array()}, {"specDigest", evidence::manifest_digest(document, "content")}};
}

// A record as KernelIndex's /records lists it — cohortKey, operation {name, slug}, workloadId, workloadSummary,
// hardware, environmentSummary, current {runId, implementation, value}, since and indexedAt (when the holder became
// the record, and when that was written) — with kindex's own members beside (record, history, members).
json with_kernelindex_members(json r) {
  r["cohortKey"] = r["comparisonKey"];
  r["operation"] = {{"name", r.contains("operationName") ? r["operationName"] : r["operation"]}, {"slug", r["operation"]}};
  r["workloadSummary"] = r["workload"];
  const json& holder = r["record"];
  if (!holder.is_object()) return r;
  r["hardware"] = holder["gpu"];
  r["environmentSummary"] = holder["environmentSummary"];
  const json& interval = holder["intervalNs"];
  r["current"] = {{"runId", holder["id"]},
                  {"implementation", {{"name", holder["implementation"]}, {"slug", holder["implementationSlug"]}}},
                  {"value", {{"metric", "latency"}, {"unit", "ns"}, {"statistic", holder["statistic"]}, {"value", holder["latencyNs"]},
                             {"sampleCount", holder["sampleCount"]},
                             {"uncertainty", interval.is_array() ? json{{"low", interval[0]}, {"high", interval[1]}} : json()}}}};
  json since, indexed;
  for (const auto& h : r["history"])
    if (h.value("runId", json()) == holder["id"] && (since.is_null() || h.value("at", "") > since.get<std::string>()))
      since = h.value("at", json()), indexed = h.value("createdAt", json());
  r["since"] = since;
  r["indexedAt"] = indexed;
  return r;
}

const std::vector<Tool>& tool_table() {
  static const std::vector<Tool> tools = {
      {"search_catalog", "Operations whose name, slug, alias, family or description matches a text query.",
       object_schema({{"q", text(500)}}, {"q"}), [](store::Store& s, const json& a) { return store::search(s, str(a, "q")); }},
      {"resolve_kernel",
       "Resolver decision for a structured kernel request: the ranked implementations for the exact workload "
       "(operation name and axis values) on a GPU and dtype, and the nearest other workloads and GPUs.",
       object_schema({{"request", {{"$ref", "#/$defs/kernelRequest"}}}}, {"request"}, true),
       [](store::Store& s, const json& a) { return resolve_kernel(s, a["request"]); }},
      {"resolve_kernels",
       "Resolve up to twenty kernel requests in one call (every operation of a model, say); one decision per "
       "request, in order (a request the index cannot answer gives {error}).",
       object_schema({{"requests", {{"type", "array"}, {"minItems", 1}, {"maxItems", 20}, {"items", {{"$ref", "#/$defs/kernelRequest"}}}}}},
                     {"requests"}, true),
       [](store::Store& s, const json& a) {
         json out = json::array();
         for (const auto& r : a["requests"]) {
           try {
             out.push_back(resolve_kernel(s, r));
           } catch (const Error& e) {
             out.push_back({{"error", {{"field", e.field()}, {"value", e.value()}, {"problem", e.problem()}}}});
           }
         }
         return json{{"results", out}, {"generatedAt", evidence::utc_timestamp_now()}};
       }},
      {"get_operation", "Operation dossier by slug, name, alias or id: semantics, workloads, records, implementations.",
       object_schema({{"idOrSlug", text(200)}}, {"idOrSlug"}),
       [](store::Store& s, const json& a) { return store::operation_view(s, str(a, "idOrSlug")); }},
      {"get_implementation", "Implementation dossier by slug or id (kindex keeps no kernel source: includeSource adds none).",
       object_schema({{"idOrSlug", text(200)}, {"includeSource", {{"type", "boolean"}, {"default", false}}}}, {"idOrSlug"}),
       [](store::Store& s, const json& a) {
         json v = store::implementation_view(s, str(a, "idOrSlug"));
         if (a.value("includeSource", false)) v["sourceCode"] = nullptr;
         return v;
       }},
      {"get_benchmark_evidence",
       "Run dossier by id, id prefix or sha256 runDigest: measurement, rank, correctness, protocol, environment, manifest.",
       object_schema({{"idOrDigest", text(200)}}, {"idOrDigest"}),
       [](store::Store& s, const json& a) { return store::run_view(s, str(a, "idOrDigest")); }},
      {"compare_runs", "Compare 2-8 runs by id: each later run side by side with the first (differing facets, latency ratio).",
       object_schema({{"runs", {{"type", "array"}, {"minItems", 2}, {"maxItems", 8}, {"items", text(200)}}}}, {"runs"}),
       [](store::Store& s, const json& a) {
         json comparisons = json::array();
         for (std::size_t i = 1; i < a["runs"].size(); ++i)
           comparisons.push_back(store::compare(s, a["runs"][0].get<std::string>(), a["runs"][i].get<std::string>()));
         return json{{"runs", a["runs"]}, {"comparisons", comparisons}};
       }},
      {"list_records",
       "Current record holders across comparison groups, newest first, cursor-paginated; each with its record history.",
       object_schema({{"cursor", text(500)}, {"limit", page_limit()}}),
       [](store::Store& s, const json& a) {
         json all = store::records(s);
         std::stable_sort(all.begin(), all.end(), [](const json& x, const json& y) {
           auto at = [](const json& r) { return r["record"].is_object() ? r["record"].value("observedAt", "") : ""; };
           return at(x) > at(y);
         });
         const std::string cursor = str(a, "cursor");
         if (!cursor.empty() && (cursor.size() > 12 || cursor.find_first_not_of("0123456789") != std::string::npos))
           throw Error("list_records", "cursor", cursor, "not a cursor this index gave (expected a previous page's nextCursor)");
         const std::size_t offset = cursor.empty() ? 0 : std::stoull(cursor), limit = a.value("limit", 50);
         json page = json::array();
         for (std::size_t i = offset; i < all.size() && page.size() < limit; ++i) page.push_back(with_kernelindex_members(all[i]));
         const bool more = offset + limit < all.size();
         return json{{"records", page}, {"nextCursor", more ? json(std::to_string(offset + limit)) : json()},
                     {"generatedAt", evidence::utc_timestamp_now()}};
       }},
      {"list_changes",
       "Record changes over the trailing 30 days (or after `since`, an ISO instant), newest first by UTC day.",
       object_schema({{"since", text(40)}}), [](store::Store& s, const json& a) { return store::list_changes(s, str(a, "since")); }},
      {"list_runs",
       "Benchmark runs, newest first, cursor-paginated; filter by operation, hardware (part of the GPU name), source "
       "slug, run status or observed-since instant.",
       object_schema({{"operation", text(200)}, {"hardware", text(200)}, {"source", text(200)}, {"status", text(40)},
                      {"since", text(40)}, {"cursor", text(200)}, {"limit", page_limit()}}),
       [](store::Store& s, const json& a) {
         store::RunsQuery q{str(a, "operation"), str(a, "hardware"), str(a, "source"), str(a, "status"),
                            str(a, "since"), str(a, "cursor"), a.value("limit", 50)};
         json page = store::list_runs(s, q);
         page["generatedAt"] = evidence::utc_timestamp_now();
         return page;
       }},
      {"list_hardware", "Per GPU: kernel and serving run counts and the operation families measured (counts, not a ranking).",
       object_schema(json::object()), [](store::Store& s, const json&) { return store::list_hardware(s); }},
      {"list_models", "Serving model revisions with run counts, and the operations' model: tags with operation counts.",
       object_schema(json::object()), [](store::Store& s, const json&) { return store::list_models(s); }},
      {"resolve_serving",
       "For a model (and GPU, workload, accelerator count), the serving configurations whose valid runs meet the p99 "
       "TTFT/TPOT constraints, highest output tokens/s per accelerator first.",
       object_schema({{"request", {{"$ref", "#/$defs/servingRequest"}}}}, {"request"}, true),
       [](store::Store& s, const json& a) { return store::resolve_serving(s, serving_query(a["request"])); }},
      {"get_serving_run", "Serving run dossier by id, id prefix or runDigest: configuration, topology, measurements, manifests.",
       object_schema({{"id", text(200)}}, {"id"}), [](store::Store& s, const json& a) { return store::serving_run_view(s, str(a, "id")); }},
      {"validate_manifest",
       "Schema-validate a KernelIndex manifest (YAML or JSON text) and give its canonical digest when valid.",
       object_schema({{"content", text(1048576)}, {"format", {{"enum", {"yaml", "json"}}, {"default", "yaml"}}}}, {"content"}),
       [](store::Store&, const json& a) { return validate_manifest_text(a); }},
      {"get_manifest_schema", "The JSON Schema of a manifest kind (BenchmarkRun, OperationSpec, ServingRun, ...).",
       object_schema({{"kind", text(80)}}, {"kind"}),
       [](store::Store&, const json& a) { return evidence::schema_for_kind(str(a, "kind")); }},
  };
  return tools;
}

const Tool* find_tool(const std::string& name) {
  for (const auto& t : tool_table())
    if (t.name == name) return &t;
  return nullptr;
}

json error_reply(const json& id, const RpcError& e) {
  json error = {{"code", e.code}, {"message", e.message}};
  if (!e.data.is_null()) error["data"] = e.data;
  return {{"jsonrpc", "2.0"}, {"id", id}, {"error", error}};
}

std::string line_of(const json& reply) { return reply.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace

Server::Server(store::Store& store) : store_(store) {}

const json& Server::tools() {
  static const json list = [] {
    json out = json::array();
    for (const auto& t : tool_table()) out.push_back({{"name", t.name}, {"description", t.description}, {"inputSchema", t.schema}});
    return out;
  }();
  return list;
}

// A tool's error as MCP reports it (the 2025-11-25 revision, and KernelIndex's server): a result with isError true
// and the message as its one text block, so the agent sees what to correct. Only an unknown tool (and a malformed
// tools/call) is a JSON-RPC error.
static json tool_error(const std::string& message) {
  return {{"content", json::array({{{"type", "text"}, {"text", message}}})}, {"isError", true}};
}

json Server::call_tool(const std::string& name, const json& arguments) {
  const Tool* tool = find_tool(name);
  if (!tool) throw RpcError{-32602, "unknown tool: " + brief(name), {{"argument", "name"}, {"value", name.substr(0, 80)}}};
  const auto problems = evidence::check_schema(tool->schema, arguments);
  if (!problems.empty()) {
    const auto& p = problems.front();
    const std::string argument = p.pointer.empty() ? "arguments" : p.pointer.substr(1);
    return tool_error("invalid arguments for tool " + name + ": argument " + argument + ": " + p.rule +
                      (p.value.empty() ? "" : " (" + p.value + ")"));
  }
  try {
    const json answer = tool->answer(store_, arguments);
    return {{"content", json::array({{{"type", "text"}, {"text", answer.dump(2, ' ', false, json::error_handler_t::replace)}}})},
            {"isError", false}};
  } catch (const Error& e) {
    const std::string what = e.what();
    return tool_error(what.rfind(name + ":", 0) == 0 ? what : name + ": " + what);
  }
}

static json server_info() { return {{"name", "kindex"}, {"version", KINDEX_MCP_VERSION}}; }
static const char* const kInstructions =
    "kindex's evidence index: which kernel implementation is fastest for an exact workload on a GPU "
    "(resolve_kernel), and which serving configuration meets a latency SLO at the highest throughput "
    "(resolve_serving). Answers come from the local store.";

json Server::dispatch(const std::string& method, const json& params) {
  if (method == "server/discover") {
    json versions = kProtocolVersions;
    for (const auto& v : kModernVersions) versions.push_back(v);
    return {{"supportedVersions", versions}, {"capabilities", {{"tools", {{"listChanged", false}}}}},
            {"serverInfo", server_info()}, {"instructions", kInstructions}};
  }
  if (method == "initialize") {
    // The client's revision if this server speaks it, else the latest this server speaks (the client then decides).
    const json& requested = member(params, "protocolVersion");
    if (!requested.is_string())
      throw RpcError{-32602, "initialize: params.protocolVersion must be a protocol revision (a string), e.g. \"" + kProtocolVersions.back() + "\"",
                     {{"argument", "protocolVersion"}, {"value", brief(requested)}}};
    std::string version = kProtocolVersions.back();
    if (
        std::find(kProtocolVersions.begin(), kProtocolVersions.end(), requested.get<std::string>()) != kProtocolVersions.end())
      version = requested.get<std::string>();
    return {{"protocolVersion", version},
            {"capabilities", {{"tools", {{"listChanged", false}}}}},
            {"serverInfo", server_info()}, {"instructions", kInstructions}};
  }
  if (method == "ping") return json::object();
  if (method == "tools/list") return {{"tools", tools()}};
  if (method == "tools/call") {
    const json& name = member(params, "name");
    if (!name.is_string()) throw RpcError{-32602, "tools/call: params.name must be a tool name", {{"argument", "name"}}};
    const json& arguments = params.contains("arguments") ? params["arguments"] : json::object();
    if (!arguments.is_object())
      throw RpcError{-32602, "tools/call: params.arguments must be an object", {{"argument", "arguments"}}};
    return call_tool(name.get<std::string>(), arguments);
  }
  throw RpcError{-32601, "method not found: " + brief(method), nullptr};
}

std::optional<std::string> Server::handle(std::string_view message) {
  json request;
  try {
    request = evidence::parse_json_strict(message, "message");
  } catch (const std::exception& e) {
    return line_of(error_reply(nullptr, {-32700, std::string("parse error: ") + e.what(), nullptr}));
  }
  if (!request.is_object())
    return line_of(error_reply(nullptr, {-32600, "invalid request: a message is one JSON-RPC 2.0 object (batches are not used by MCP)", nullptr}));
  const bool notification = !request.contains("id");
  const json id = notification ? json() : request["id"];
  if (!notification && !id.is_string() && !id.is_number_integer())
    return line_of(error_reply(nullptr, {-32600, "invalid request: id must be a string or an integer", nullptr}));
  try {
    if (request.value("jsonrpc", json()) != "2.0") throw RpcError{-32600, "invalid request: jsonrpc must be \"2.0\"", nullptr};
    if (!request.contains("method")) {
      if (request.contains("result") || request.contains("error")) return std::nullopt;  // a reply: this server asks nothing
      throw RpcError{-32600, "invalid request: no method", nullptr};
    }
    if (!request["method"].is_string()) throw RpcError{-32600, "invalid request: method must be a string", nullptr};
    const json& params = request.contains("params") ? request["params"] : json::object();
    if (!params.is_object()) throw RpcError{-32602, "invalid params: params must be an object", {{"argument", "params"}}};
    const std::string method = request["method"];
    if (notification) return std::nullopt;  // notifications/initialized, cancelled, ...: nothing to answer
    // A 2026-07-28 request carries its revision and the client's capabilities in params._meta: a revision this
    // server does not speak is -32022 naming the ones it does; the result says it is complete (resultType).
    const json& meta = member(params, "_meta");
    const bool modern = method != "initialize" && meta.is_object() && meta.contains(kVersionKey);
    if (modern) {
      const json& version = meta[kVersionKey];
      if (!version.is_string())
        throw RpcError{-32602, std::string("invalid params: params._meta[\"") + kVersionKey + "\"] must be a protocol revision (a string)",
                       {{"argument", std::string("_meta.") + kVersionKey}, {"value", brief(version)}}};
      if (!meta.contains(kCapabilitiesKey) || !meta[kCapabilitiesKey].is_object())
        throw RpcError{-32602, std::string("invalid params: params._meta must carry \"") + kCapabilitiesKey + "\" (an object)",
                       {{"argument", std::string("_meta.") + kCapabilitiesKey}}};
      if (std::find(kModernVersions.begin(), kModernVersions.end(), version.get<std::string>()) == kModernVersions.end())
        throw RpcError{kUnsupportedProtocolVersion, "Unsupported protocol version: " + brief(version),
                       {{"supported", kModernVersions}, {"requested", version.get<std::string>().substr(0, 80)}}};
    }
    json result = dispatch(method, params);
    if (modern || method == "server/discover") {
      result["resultType"] = "complete";
      result["_meta"][kServerInfoKey] = server_info();
      // Cacheable results (2026-07-28): the tools and what this server speaks are fixed for the binary's life and
      // the same for every client.
      if (method == "tools/list" || method == "server/discover") {
        result["ttlMs"] = 3600000;
        result["cacheScope"] = "public";
      }
    }
    return line_of({{"jsonrpc", "2.0"}, {"id", id}, {"result", result}});
  } catch (const RpcError& e) {
    if (notification) return std::nullopt;
    return line_of(error_reply(id, e));
  } catch (const Error& e) {
    if (notification) return std::nullopt;
    return line_of(error_reply(id, {-32602, e.what(), {{"argument", e.field()}, {"value", e.value()}}}));
  } catch (const std::exception& e) {
    std::cerr << "kindex mcp: internal error: " << e.what() << std::endl;  // the detail stays on the server's stderr
    if (notification) return std::nullopt;
    return line_of(error_reply(id, {-32603, "internal error", nullptr}));
  }
}

void Server::serve(std::FILE* in, std::FILE* out) {
  std::string line;
  bool too_long = false;  // the current line passed kMaxMessageBytes: dropped up to its newline
  char buffer[1 << 16];
  auto finish = [&] {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::optional<std::string> reply;
    if (too_long) {
      reply = line_of(error_reply(nullptr, {-32600, "invalid request: a message is at most " + std::to_string(kMaxMessageBytes) + " bytes", nullptr}));
    } else if (line.find_first_not_of(" \t") != std::string::npos) {
      reply = handle(line);
    }
    if (reply) {
      std::fwrite(reply->data(), 1, reply->size(), out);
      std::fputc('\n', out);
      std::fflush(out);
    }
    line.clear();
    too_long = false;
  };
  // read(2), not fread: a message must be answered as soon as its line is in, not once a buffer is full.
  const int fd = ::fileno(in);
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    std::string_view chunk(buffer, static_cast<std::size_t>(n));
    while (!chunk.empty()) {
      const auto newline = chunk.find('\n');
      const std::string_view part = chunk.substr(0, newline);
      if (!too_long) {
        if (line.size() + part.size() > kMaxMessageBytes) {
          too_long = true;
          line.clear();
          line.shrink_to_fit();
        } else {
          line.append(part);
        }
      }
      if (newline == std::string_view::npos) break;
      finish();
      chunk.remove_prefix(newline + 1);
    }
  }
  if (!line.empty() || too_long) finish();  // a last message without its newline
}

}  // namespace kindex::mcp
