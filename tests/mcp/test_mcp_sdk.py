"""`kindex mcp` driven by the official MCP Python SDK (PyPI `mcp`) as a coding agent's client would: initialize,
tools/list, every tool with good and bad arguments (a bad argument is a JSON-RPC error naming it), a 10 MB request
on the raw pipe, and a closed stdin. Usage: test_mcp_sdk.py KINDEX_BINARY DATA_DIR (tests/data)."""

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
try:  # the revision the initialize handshake offers (2.x also speaks the handshake-less 2026-07-28)
    from mcp_types.version import LATEST_HANDSHAKE_VERSION
except ImportError:
    from mcp.types import LATEST_PROTOCOL_VERSION as LATEST_HANDSHAKE_VERSION

try:  # the SDK's exception for JSON-RPC errors (McpError in 1.x, MCPError in 2.x)
    from mcp.shared.exceptions import McpError as RpcError
except ImportError:
    from mcp.shared.exceptions import MCPError as RpcError

KINDEX, DATA = sys.argv[1], sys.argv[2]
failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def text_of(result):
    is_error = getattr(result, "is_error", getattr(result, "isError", None))
    check(is_error is False, f"tool result is not an error: {is_error}")
    return json.loads(result.content[0].text)


async def expect_error(session, tool, arguments, naming):
    """A bad argument is the tool's error: a result with isError true whose text names the argument (MCP 2025-11-25,
    as KernelIndex's server answers); an unknown tool is a JSON-RPC error naming it."""
    try:
        result = await session.call_tool(tool, arguments)
    except RpcError as e:
        message = str(e)
        check(tool == "no_such_tool", f"{tool} {arguments}: a tool error (isError), not the JSON-RPC error {message}")
        check(naming in message, f"{tool}: the error names {naming!r}: {message}")
        return message
    is_error = getattr(result, "is_error", getattr(result, "isError", None))
    message = result.content[0].text if result.content else ""
    check(is_error is True and tool != "no_such_tool", f"{tool} {arguments}: an error expected, got {message[:200]}")
    check(naming in message, f"{tool}: the error names {naming!r}: {message}")
    return message


async def run_tools(store):
    params = StdioServerParameters(command=KINDEX, args=["mcp", "--store", store])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            server_info = getattr(init, "server_info", None) or getattr(init, "serverInfo")
            negotiated = getattr(init, "protocol_version", None) or getattr(init, "protocolVersion")
            check(negotiated == LATEST_HANDSHAKE_VERSION, f"the SDK's revision {LATEST_HANDSHAKE_VERSION} negotiated, got {negotiated}")
            check(server_info.name == "kindex", f"server name {server_info.name}")
            listed = (await session.list_tools()).tools
            tools = {t.name for t in listed}
            schemas = {t.name: (getattr(t, "input_schema", None) or getattr(t, "inputSchema")) for t in listed}
            check(schemas["get_implementation"]["properties"]["includeSource"].get("default") is False, "includeSource defaults to false")
            check(schemas["validate_manifest"]["properties"]["format"].get("default") == "yaml", "format defaults to yaml")
            check(schemas["search_catalog"]["required"] == ["q"], "search_catalog requires q")
            expected = {"search_catalog", "resolve_kernel", "resolve_kernels", "get_operation", "get_implementation",
                        "get_benchmark_evidence", "compare_runs", "list_records", "list_changes", "list_runs",
                        "list_hardware", "list_models", "resolve_serving", "get_serving_run", "validate_manifest",
                        "get_manifest_schema"}
            check(tools == expected, f"tools/list: {sorted(tools ^ expected)} differ")

            latency = {}

            async def call(tool, arguments):
                start = time.perf_counter()
                answer = text_of(await session.call_tool(tool, arguments))
                latency[tool] = max(latency.get(tool, 0.0), time.perf_counter() - start)
                return answer

            op = "gqa_paged_decode_h24_kv4_d128_ps64"
            found = await call("search_catalog", {"q": "gqa_paged_decode"})
            check(any(o.get("name") == op for o in found), "search_catalog finds the ps64 operation")
            decision = await call("resolve_kernel", {"request": {
                "operation": {"name": op, "axes": {"batch_size": 1, "num_pages": 425}},
                "environment": {"hardwareProduct": "B200"}, "policy": {"minimumTrust": "reported"}}})
            check(decision["exact"] is not None and decision["exact"]["cohorts"], "resolve_kernel: an exact workload")
            run_id = decision["exact"]["cohorts"][0]["runs"][0]["id"]
            both = await call("resolve_kernels", {"requests": [{"operation": {"name": op}}, {"operation": {"name": "nope"}}]})
            check(len(both["results"]) == 2 and both["results"][1]["error"]["value"] == "nope", "resolve_kernels: per request")
            view = await call("get_operation", {"idOrSlug": op})
            check(view["operation"]["name"] == op, "get_operation")
            impl = view["implementations"][0]["slug"]
            check((await call("get_implementation", {"idOrSlug": impl, "includeSource": True}))["sourceCode"] is None,
                  "get_implementation: no source kept")
            run = await call("get_benchmark_evidence", {"idOrDigest": run_id})
            check(run["run"]["id"] == run_id, "get_benchmark_evidence")
            other = decision["exact"]["cohorts"][0]["runs"][-1]["id"]
            compared = await call("compare_runs", {"runs": [run_id, other]})
            check(len(compared["comparisons"]) == 1, "compare_runs")
            records = await call("list_records", {"limit": 3})
            check(len(records["records"]) == 3 and records["nextCursor"] == "3", "list_records pages")
            page2 = await call("list_records", {"limit": 3, "cursor": records["nextCursor"]})
            check(page2["records"][0] != records["records"][0], "list_records: the next page")
            check("days" in await call("list_changes", {"since": "2026-01-01T00:00:00Z"}), "list_changes")
            runs = await call("list_runs", {"operation": op, "hardware": "b200", "status": "passed", "limit": 5})
            check(len(runs["runs"]) == 5 and all(r["status"] == "passed" for r in runs["runs"]), "list_runs filters")
            hardware = await call("list_hardware", {})
            check(any(h["servingRuns"] > 0 for h in hardware["hardware"]), "list_hardware counts serving runs")
            models = await call("list_models", {})
            check(len(models["serving"]) == 6 and all(m["runs"] > 0 for m in models["serving"]), "list_models: six serving models")
            serving = await call("resolve_serving", {"request": {
                "model": "mlperf-llama2-70b", "hardware": {"model": "B200"},
                "constraints": [{"metric": "ttft_ms", "statistic": "p99", "operator": "<=", "value": 2000}]}})
            check(serving["best"] is not None, "resolve_serving: a configuration meets 2 s TTFT on B200")
            served = await call("get_serving_run", {"id": serving["best"]["id"]})
            check(served["run"]["id"] == serving["best"]["id"], "get_serving_run")
            with open(os.path.join(DATA, "kernelindex/examples/serving-run.yaml")) as f:
                valid = await call("validate_manifest", {"content": f.read()})
            check(valid["valid"] and valid["kind"] == "ServingRun" and valid["specDigest"].startswith("sha256:"), "validate_manifest")
            invalid = await call("validate_manifest", {"content": "{\"kind\": \"ServingRun\"}", "format": "json"})
            check(invalid["valid"] is False and invalid["errors"], "validate_manifest: errors listed")
            schema = await call("get_manifest_schema", {"kind": "ServingWorkload"})
            check(schema["title"] == "ServingWorkload", "get_manifest_schema")

            # Bad arguments: JSON-RPC errors naming the argument, and the server goes on answering.
            await expect_error(session, "search_catalog", {}, "q")
            await expect_error(session, "search_catalog", {"q": 5}, "q")
            await expect_error(session, "search_catalog", {"q": "x", "extra": 1}, "extra")
            await expect_error(session, "resolve_kernel", {"request": {"operation": {"name": op, "axes": {"batch_size": 1.5}}}}, "batch_size")
            await expect_error(session, "resolve_kernel", {"request": {"operation": {"axes": {"batch_size": 1}}}}, "request.operation.name")
            await expect_error(session, "resolve_kernel", {"request": {"operation": {"name": "no_such_op"}}}, "no_such_op")
            await expect_error(session, "resolve_kernels", {"requests": []}, "requests")
            await expect_error(session, "get_operation", {"idOrSlug": "x" * 201}, "idOrSlug")
            await expect_error(session, "get_implementation", {"idOrSlug": impl, "includeSource": "yes"}, "includeSource")
            await expect_error(session, "get_benchmark_evidence", {"idOrDigest": "sha256:" + "0" * 64}, "run")
            await expect_error(session, "compare_runs", {"runs": [run_id]}, "runs")
            await expect_error(session, "list_records", {"limit": 0}, "limit")
            await expect_error(session, "list_records", {"cursor": "abc"}, "cursor")
            await expect_error(session, "list_changes", {"since": "yesterday"}, "since")
            await expect_error(session, "list_runs", {"status": "great"}, "status")
            await expect_error(session, "list_hardware", {"x": 1}, "x")
            await expect_error(session, "list_models", {"x": 1}, "x")
            await expect_error(session, "resolve_serving", {"request": {"hardware": {"model": "B200"}}}, "request.model")
            await expect_error(session, "resolve_serving", {"request": {"model": "mlperf-llama2-70b", "constraints": [
                {"metric": "e2e_ms", "operator": "<=", "value": 1}]}}, "metric")
            await expect_error(session, "get_serving_run", {"id": 7}, "id")
            await expect_error(session, "validate_manifest", {"content": "x", "format": "toml"}, "format")
            await expect_error(session, "get_manifest_schema", {"kind": "Pizza"}, "Pizza")
            await expect_error(session, "no_such_tool", {}, "no_such_tool")
            check((await call("list_models", {}))["serving"], "still answering after the bad calls")
            return latency


async def modern_client(store):
    """The SDK's default client (mode "auto"): probes server/discover and, as kindex speaks 2026-07-28, uses the
    stateless revision (no initialize; each request names its revision in _meta)."""
    from mcp.client.client import Client
    params = StdioServerParameters(command=KINDEX, args=["mcp", "--store", store])
    async with Client(params, mode="auto") as client:
        check(client.protocol_version == "2026-07-28", f"the 2026-07-28 revision adopted, got {client.protocol_version}")
        check(len((await client.list_tools()).tools) == 16, "tools/list at 2026-07-28")
        models = text_of(await client.call_tool("list_models", {}))
        check(len(models["serving"]) == 6, "list_models at 2026-07-28")
        bad = await client.call_tool("search_catalog", {"q": 5})
        check(bad.is_error is True and "argument q" in bad.content[0].text, f"a bad argument at 2026-07-28: {bad}")


def raw_pipe(store):
    """A 10 MB request and a closed stdin, on the raw stdio pipe."""
    big = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"name": "search_catalog", "arguments": {"q": "x" * (10 << 20)}}})
    ping = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"})
    proc = subprocess.run([KINDEX, "mcp", "--store", store], input=(big + "\n" + ping + "\n").encode(),
                          capture_output=True, timeout=120)
    lines = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    check(proc.returncode == 0, f"exit status {proc.returncode} after stdin closed")
    check(len(lines) == 2, f"two replies, got {len(lines)}")
    refused = lines[0].get("result", {})
    check(lines[0]["id"] == 1 and refused.get("isError") is True and "argument q" in refused["content"][0]["text"],
          f"the 10 MB argument refused naming q: {str(lines[0])[:300]}")
    check(lines[1] == {"jsonrpc": "2.0", "id": 2, "result": {}}, "ping answered after it")
    # initialize: the client's revision where the server speaks it, else the server's latest; none is invalid params.
    def initialize(version):
        params = {"capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        if version is not None:
            params["protocolVersion"] = version
        message = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
        out = subprocess.run([KINDEX, "mcp", "--store", store], input=(message + "\n").encode(), capture_output=True, timeout=60)
        return json.loads(out.stdout.decode().splitlines()[0])
    check(initialize("2024-11-05")["result"]["protocolVersion"] == "2024-11-05", "an older revision the server speaks is kept")
    check(initialize("2099-01-01")["result"]["protocolVersion"] == "2025-11-25", "an unknown revision gets the latest")
    check(initialize(None)["error"]["code"] == -32602, "no protocolVersion: invalid params")
    # 2026-07-28: a request naming a revision the server does not speak is -32022 naming those it does.
    unsupported = json.dumps({"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2099-01-01", "io.modelcontextprotocol/clientCapabilities": {}}}})
    out = subprocess.run([KINDEX, "mcp", "--store", store], input=(unsupported + "\n").encode(), capture_output=True, timeout=60)
    error = json.loads(out.stdout.decode().splitlines()[0])["error"]
    check(error["code"] == -32022 and error["data"] == {"supported": ["2026-07-28"], "requested": "2099-01-01"},
          f"-32022 for an unknown revision: {error}")
    closed = subprocess.run([KINDEX, "mcp", "--store", store], input=b"", capture_output=True, timeout=60)
    check(closed.returncode == 0 and closed.stdout == b"", "a closed stdin ends the server cleanly")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        store = os.path.join(tmp, "index.db")
        subprocess.run([KINDEX, "import", "--store", store,
                        os.path.join(DATA, "kernelindex/export-slice-gqa.jsonl.zst"),
                        os.path.join(DATA, "kernelindex/export-slice-serving.jsonl.zst")],
                       check=True, capture_output=True, timeout=300)
        latency = asyncio.run(run_tools(store))
        asyncio.run(modern_client(store))
        raw_pipe(store)
    print("tool latency (s, slowest call):", json.dumps({k: round(v, 4) for k, v in sorted(latency.items())}))
    if failures:
        print(f"{len(failures)} checks failed", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
