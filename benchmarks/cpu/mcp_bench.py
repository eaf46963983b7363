#!/usr/bin/env python3
"""Import time of the KernelIndex export slices and per-tool latency of `kindex mcp`, on this machine's CPU.

Import: `kindex import` of each slice (tests/data/kernelindex/export-slice-{gqa,serving}.jsonl.zst) and of both into
a fresh SQLite store, timed as the command's wall clock (process start included), median of --repeats. It also
checks that nothing was skipped ("already present 0").

MCP: one `kindex mcp --store` process over a store holding both slices, driven on its raw stdio pipe (JSON-RPC 2.0,
one line per message; the client's own cost is a write and a read), after the 2025-11-25 initialize handshake. Each
of the 16 tools is called --calls times with realistic arguments (rotating over the store's operations, runs and
serving runs); the round trip of each call is timed (write the request line, read the reply line) and every reply
must be a result with isError false. Median, p99 and max per tool, in milliseconds.

Usage: benchmarks/cpu/mcp_bench.py [--kindex build/bin/kindex] [--out results/index/mcp_bench.json]
"""

import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SLICES = {name: os.path.join(ROOT, "tests/data/kernelindex", f"export-slice-{name}.jsonl.zst") for name in ("gqa", "serving")}


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(p / 100.0 * len(ordered) + 0.5)) - 1))]


def time_imports(kindex, repeats):
    out = {}
    for name, files in (("gqa", [SLICES["gqa"]]), ("serving", [SLICES["serving"]]), ("both", list(SLICES.values()))):
        seconds = []
        for _ in range(repeats):
            with tempfile.TemporaryDirectory() as tmp:
                store = os.path.join(tmp, "index.db")
                start = time.perf_counter()
                done = subprocess.run([kindex, "import", "--store", store, *files], capture_output=True, text=True, check=True)
                seconds.append(time.perf_counter() - start)
                present = re.search(r"already present (\d+)", done.stdout)
                # Each slice alone skips nothing; both together share their sources rows.
                if name != "both" and (present is None or present.group(1) != "0"):
                    sys.exit(f"import of {name} skipped rows: {done.stdout}")
                inserted = int(re.search(r"inserted (\d+) rows", done.stdout).group(1))
        out[name] = {"files": [os.path.relpath(f, ROOT) for f in files], "rowsInserted": inserted,
                     "medianMs": round(statistics.median(seconds) * 1e3, 1), "minMs": round(min(seconds) * 1e3, 1),
                     "maxMs": round(max(seconds) * 1e3, 1), "repeats": repeats}
    return out


class Pipe:
    def __init__(self, kindex, store):
        self.proc = subprocess.Popen([kindex, "mcp", "--store", store], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, bufsize=0)
        self.next_id = 0

    def ask(self, method, params):
        self.next_id += 1
        line = json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}).encode() + b"\n"
        start = time.perf_counter()
        self.proc.stdin.write(line)
        reply = self.proc.stdout.readline()
        elapsed = time.perf_counter() - start
        return json.loads(reply), elapsed

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def tool_answer(pipe, name, arguments):
    reply, elapsed = pipe.ask("tools/call", {"name": name, "arguments": arguments})
    result = reply.get("result")
    if result is None or result.get("isError"):
        sys.exit(f"{name} {arguments}: {json.dumps(reply)[:400]}")
    return json.loads(result["content"][0]["text"]), elapsed


def time_tools(kindex, calls):
    with tempfile.TemporaryDirectory() as tmp:
        store = os.path.join(tmp, "index.db")
        subprocess.run([kindex, "import", "--store", store, *SLICES.values()], capture_output=True, check=True)
        pipe = Pipe(kindex, store)
        pipe.ask("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}})
        # Realistic arguments: what the store holds, rotated so the calls are not one cached answer.
        operations = [o["name"] for o in tool_answer(pipe, "search_catalog", {"q": "gqa"})[0]]
        runs = [r["id"] for r in tool_answer(pipe, "list_runs", {"limit": 200})[0]["runs"]]
        impls = sorted({s for o in operations[:4] for s in [i["slug"] for i in tool_answer(pipe, "get_operation", {"idOrSlug": o})[0]["implementations"]]})
        serving = [r["id"] for r in tool_answer(pipe, "resolve_serving", {"request": {"model": "mlperf-llama2-70b"}})[0]["configurations"]]
        models = [m["slug"] for m in tool_answer(pipe, "list_models", {})[0]["serving"]]
        with open(os.path.join(ROOT, "tests/data/kernelindex/examples/serving-run.yaml")) as f:
            manifest = f.read()
        hardware = ["B200", "H100", "H200", "b200"]
        argument_makers = {
            "search_catalog": lambda i: {"q": ["gqa", "paged decode", "rmsnorm", "attention"][i % 4]},
            "resolve_kernel": lambda i: {"request": {"operation": {"name": operations[i % len(operations)], "axes": {"batch_size": 1 + i % 4}},
                                                     "environment": {"hardwareProduct": hardware[i % 3]}, "policy": {"minimumTrust": "reported"}}},
            "resolve_kernels": lambda i: {"requests": [{"operation": {"name": operations[(i + k) % len(operations)]}} for k in range(4)]},
            "get_operation": lambda i: {"idOrSlug": operations[i % len(operations)]},
            "get_implementation": lambda i: {"idOrSlug": impls[i % len(impls)]},
            "get_benchmark_evidence": lambda i: {"idOrDigest": runs[i % len(runs)]},
            "compare_runs": lambda i: {"runs": [runs[i % len(runs)], runs[(i + 1) % len(runs)], runs[(i + 2) % len(runs)]]},
            "list_records": lambda i: {"limit": 50, **({"cursor": "50"} if i % 2 else {})},
            "list_changes": lambda i: {"since": "2026-01-01T00:00:00Z"} if i % 2 else {},
            "list_runs": lambda i: {"operation": operations[i % len(operations)], "hardware": hardware[i % 4], "limit": 50},
            "list_hardware": lambda i: {},
            "list_models": lambda i: {},
            "resolve_serving": lambda i: {"request": {"model": models[i % len(models)], "constraints": [
                {"metric": "ttft_ms", "statistic": "p99", "operator": "<=", "value": 2000 + 100 * (i % 5)}]}},
            "get_serving_run": lambda i: {"id": serving[i % len(serving)]},
            "validate_manifest": lambda i: {"content": manifest},
            "get_manifest_schema": lambda i: {"kind": ["BenchmarkRun", "ServingRun", "OperationSpec", "ServingWorkload"][i % 4]},
        }
        listed = {t["name"] for t in pipe.ask("tools/list", {})[0]["result"]["tools"]}
        if listed != set(argument_makers):
            sys.exit(f"tools differ: {sorted(listed ^ set(argument_makers))}")
        out = {}
        for name, make in argument_makers.items():
            for i in range(5):  # warm-up
                tool_answer(pipe, name, make(i))
            ms = [tool_answer(pipe, name, make(i))[1] * 1e3 for i in range(calls)]
            out[name] = {"calls": calls, "medianMs": round(statistics.median(ms), 3), "p99Ms": round(percentile(ms, 99), 3),
                         "maxMs": round(max(ms), 3)}
        pipe.close()
        return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kindex", default=os.path.join(ROOT, "build/bin/kindex"))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--out", default=os.path.join(ROOT, "results/index/mcp_bench.json"))
    args = parser.parse_args()
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), platform.processor())
    report = {
        "command": "benchmarks/cpu/mcp_bench.py " + " ".join(sys.argv[1:]),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": {"cpu": cpu, "cores": os.cpu_count(), "note": "shared build machine (other jobs running)"},
        "commit": commit,
        "store": "SQLite (a temporary file)",
        "import": time_imports(args.kindex, args.repeats),
        "mcp": {"transport": "stdio, raw JSON-RPC lines, protocol 2025-11-25", "tools": time_tools(args.kindex, args.calls)},
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
