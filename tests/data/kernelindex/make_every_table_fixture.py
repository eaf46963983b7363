#!/usr/bin/env python3
"""Writes export-every-table.jsonl: a small KernelIndex catalog export with every table KernelIndex's exporter
writes (apps/web/scripts/export-catalog.ts: sources, projects, operations, operation_aliases, workloads,
implementations, benchmark_runs, measurements, record_events, artifacts, and the serving tables model_revisions,
serving_stack_revisions, serving_configurations, serving_workloads, serving_runs, serving_measurements) and every kind of primary metric its
publication derives (apps/web/src/server/catalog/publication.ts): a GPU MODE leaderboard score in seconds over a
WorkloadSuite (measurements only: "score:geomean:s"), a latency run whose primary is the median with a 95%
interval, extra measurements and raw samples ("latency:median:ns", evidence "reproducible"), and a failed run
without a primary ("none").

Rows have the shape the public export of 2026-08-16 has (same columns, ISO timestamps in milliseconds); the
manifests follow KernelIndex's GPU MODE importer. Every digest is computed here, independently of kindex, the way
KernelIndex does: sha256 over the RFC 8785 (JCS) form of {apiVersion, kind, spec}; correctnessKey over
{"correctness": ...}; comparisonKey over {v, operation, workload, protocol, environment, correctness, metric}.
The values are illustrative, not real measurements. Run: python3 make_every_table_fixture.py > export-every-table.jsonl
"""
import hashlib
import json
import sys

API = "kernelindex.dev/v1alpha1"
CREATED = "2026-08-15T02:11:52.743Z"
PUBLISHED = "2026-08-15T02:20:00.000Z"


def jcs(value):
    # Every key here is ASCII and every number an integer or a float whose shortest form Python and ECMAScript
    # write alike (no exponents), so sorted compact JSON is the JCS form.
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha(value):
    return "sha256:" + hashlib.sha256(jcs(value).encode()).hexdigest()


def digest(manifest):
    return sha({"apiVersion": manifest["apiVersion"], "kind": manifest["kind"], "spec": manifest["spec"]})


def uid(name):
    h = hashlib.sha256(name.encode()).hexdigest()
    return f"01a0{h[4:8]}-{h[8:12]}-7{h[13:16]}-8{h[17:20]}-{h[20:32]}"


def manifest(kind, name, spec, title=None):
    metadata = {"name": name}
    if title:
        metadata["title"] = title
    return {"apiVersion": API, "kind": kind, "metadata": metadata, "spec": spec}


lines = []


def emit(table, row):
    lines.append(json.dumps({"table": table, "row": row}, ensure_ascii=False, separators=(",", ":")))


# sources and projects
gpumode = {"id": uid("source:gpumode"), "slug": "gpumode-kernelbot", "kind": "leaderboard", "name": "GPU MODE KernelBot",
           "policy": {"license": "June 9 Researcher Reciprocity License v1.0"}, "createdAt": CREATED}
emit("sources", gpumode)
projects = {}
for user in ("4242", "5151"):
    m = manifest("SoftwareProject", f"kernelbot-user-{user}",
                 {"name": f"KernelBot user {user}", "kind": "individual",
                  "host": {"kind": "other", "id": f"gpumode-kernelbot/user/{user}"}})
    projects[user] = {"id": uid("project:" + user), "slug": f"kernelbot-user-{user}", "name": m["spec"]["name"],
                      "normalizedName": m["spec"]["name"].lower(), "canonicalUrl": None, "licenseExpression": None,
                      "manifest": m, "createdAt": CREATED}
    emit("projects", projects[user])

# one operation, one alias
op = manifest("OperationSpec", "amd-fp8-mm", {
    "family": "gemm",
    "axes": {"m": {"role": "variable", "type": "integer"}, "n": {"role": "variable", "type": "integer"},
             "k": {"role": "variable", "type": "integer"}},
    "inputs": [{"name": "a", "tensor": {"shape": ["m", "k"], "dtype": "bf16"}},
               {"name": "b", "tensor": {"shape": ["n", "k"], "dtype": "bf16"}}],
    "outputs": [{"name": "c", "tensor": {"shape": ["m", "n"], "dtype": "bf16"}}],
    "semantics": {"mutation": "none", "determinism": "unspecified"}}, "AMD FP8 GEMM")
op_digest = digest(op)
op_row = {"id": uid("op"), "slug": "amd-fp8-mm", "family": "gemm", "name": "AMD FP8 GEMM", "schemaVersion": API,
          "semanticDigest": op_digest, "manifest": op, "tags": ["gemm"], "createdAt": CREATED, "supersedesId": None}
emit("operations", op_row)
emit("operation_aliases", {"operationId": op_row["id"], "alias": "amd-fp8-mm"})

# a leaderboard suite and one exact case
suite = manifest("WorkloadSuite", "amd-fp8-mm-suite", {
    "operationSpecDigest": op_digest,
    "cases": [{"externalId": "0", "axes": {"m": 1024, "n": 1536, "k": 7168}},
              {"externalId": "1", "axes": {"m": 6144, "n": 7168, "k": 2304}}],
    "correctness": {"comparator": "kernelbot_eval"},
    "aggregation": {"metric": "score", "statistic": "geomean"}}, "AMD FP8 GEMM · leaderboard suite")
case = manifest("WorkloadCase", "amd-fp8-mm-k7168-m1024-n1536", {
    "operationSpecDigest": op_digest, "axes": {"m": 1024, "n": 1536, "k": 7168},
    "tensors": {"a": {"shape": [1024, 7168], "dtype": "bf16"}, "b": {"shape": [1536, 7168], "dtype": "bf16"}},
    "correctness": {"comparator": "kernelbot_eval", "maxAbsoluteError": 0.02}}, "AMD FP8 GEMM · m=1024, n=1536, k=7168")
workloads = {}
for key, m, summary, dtypes in (("suite", suite, "suite of 2 cases", []), ("case", case, "[1024, 7168]", ["bf16"])):
    workloads[key] = {"id": uid("workload:" + key), "operationId": op_row["id"], "workloadDigest": digest(m),
                      "schemaVersion": API, "manifest": m, "shapeSummary": summary, "dtypes": dtypes,
                      "layoutKeys": [] if key == "suite" else ["contiguous"], "createdAt": CREATED}
    emit("workloads", workloads[key])

# implementations: two submissions with mirrored source (artifacts rows), one without source
codes = {"4242": "def custom_kernel(data):\n    a, b = data\n    return a @ b.T\n",
         "5151": "import torch\n\ndef custom_kernel(data):\n    a, b = data\n    return torch.mm(a, b.t())\n"}
impls = {}
artifacts = []
for user, submission in (("4242", "70001"), ("5151", "70002"), ("5151", "70003")):
    code = codes[user] if submission != "70003" else None
    spec = {"projectRevision": {"version": f"submission-{submission}"}, "operation": {"specDigest": op_digest},
            "callable": {"language": "python"},
            "support": {"hardwareArchitectures": ["gfx942"], "productsTested": ["AMD Instinct MI300X"], "dtypes": ["bf16"]},
            "licensing": {}}
    if code:
        code_digest = "sha256:" + hashlib.sha256(code.encode()).hexdigest()
        spec["source"] = {"contentDigest": code_digest, "fileName": "submission.py", "sizeBytes": len(code.encode())}
        artifacts.append({"id": uid("artifact:" + submission), "contentDigest": code_digest, "kind": "source",
                          "mediaType": "text/x-python", "sizeBytes": len(code.encode()), "storage": "inline",
                          "uri": "https://huggingface.co/datasets/GPUMODE/kernelbot-data",
                          "license": "LicenseRef-GPUMode-Reciprocity-1.0", "createdAt": CREATED})
    m = manifest("ImplementationRevision", f"kernelbot-submission-{submission}", spec,
                 f"amd-fp8-mm · submission {submission}")
    impls[submission] = {"id": uid("impl:" + submission), "projectId": projects[user]["id"], "operationId": op_row["id"],
                         "slug": f"kernelbot-amd-fp8-mm-{submission}", "implementationDigest": digest(m),
                         "sourceRevision": f"submission-{submission}", "language": "python", "framework": None,
                         "targetArchitectures": ["gfx942"], "licenseExpression": None,
                         "sourceAvailable": code is not None, "installable": False,
                         "title": m["metadata"]["title"], "installKind": None, "installCommand": None,
                         "licenseDeclared": None, "manifest": m, "createdAt": CREATED, "supersedesId": None}
    emit("implementations", impls[submission])

# protocols and the environment
ranked_protocol = manifest("BenchmarkProtocol", "gpumode-kernelbot-leaderboard-geomean", {
    "harness": {"name": "reference-kernels eval.py", "repository": "https://github.com/gpu-mode/reference-kernels"},
    "measurement": {"timer": "wall_clock", "primaryStatistic": "geomean"},
    "correctness": {"reference": "problem reference implementation", "comparator": "kernelbot_eval"},
    "comparability": {"family": "gpumode_kernelbot", "notes": "Aggregate leaderboard score in seconds."}},
    "GPU MODE KernelBot ranked leaderboard run")
case_protocol = manifest("BenchmarkProtocol", "gpumode-kernelbot-eval", {
    "harness": {"name": "reference-kernels eval.py", "repository": "https://github.com/gpu-mode/reference-kernels"},
    "measurement": {"timer": "wall_clock", "primaryStatistic": "median"},
    "correctness": {"reference": "problem reference implementation", "comparator": "kernelbot_eval"}},
    "GPU MODE KernelBot evaluation harness")
environment = manifest("ExecutionEnvironment", "gpumode-kernelbot-amd-instinct-mi300x", {
    "hardware": {"vendor": "amd", "product": "AMD Instinct MI300X", "architecture": "gfx942"},
    "software": {"framework": {"name": "pytorch", "version": "2.7.0"}}}, "KernelBot runner · AMD Instinct MI300X")
env_digest = digest(environment)


def correctness_key(workload):
    return sha({"correctness": workload["manifest"]["spec"]["correctness"]})


def comparison_key(workload, protocol, metric):
    return sha({"v": 1, "operation": op_digest, "workload": workload["workloadDigest"], "protocol": digest(protocol),
                "environment": env_digest, "correctness": correctness_key(workload), "metric": metric})


runs, measurements = [], []


def add_run(name, submission, workload, protocol, spec, primary, measured, observed, interval=None, samples=None,
            raw=False, native=False):
    spec = {"implementationDigest": impls[submission]["implementationDigest"],
            "workloadDigest": workload["workloadDigest"], "protocolDigest": digest(protocol),
            "environmentDigest": env_digest, **spec, "observedAt": observed}
    run = manifest("BenchmarkRun", name, spec)
    metric = ":".join(primary[:3]) if primary else "none"
    row = {"id": uid("run:" + name), "runDigest": digest(run), "implementationId": impls[submission]["id"],
           "workloadId": workload["id"], "sourceId": gpumode["id"], "status": spec["status"], "observedAt": observed,
           "publishedAt": PUBLISHED, "hardwareVendor": "amd", "hardwareModel": "AMD Instinct MI300X",
           "hardwareArchitecture": "gfx942", "driverMajor": None, "cudaMajor": None,
           "protocolKey": digest(protocol), "environmentKey": env_digest, "correctnessKey": correctness_key(workload),
           "comparisonKey": comparison_key(workload, protocol, metric),
           "primaryMetric": primary[0] if primary else "none", "primaryValue": primary[3] if primary else None,
           "primaryUnit": primary[2] if primary else None, "sampleCount": samples,
           "uncertaintyLow": interval[0] if interval else None, "uncertaintyHigh": interval[1] if interval else None,
           "reported": True, "reproducedByKernelindex": False, "independentReplicationCount": 0,
           "sourceAvailable": impls[submission]["sourceAvailable"], "installable": False, "licenseExpression": None,
           "primaryStatistic": primary[1] if primary else None, "hasRawEvidence": raw, "sourceNative": native,
           "environmentSummary": "pytorch 2.7.0 · reference-kernels eval.py", "supersedesId": None,
           "retractedAt": None, "retractionReason": None,
           "manifest": {"run": run, "protocol": protocol, "environment": environment}}
    runs.append(row)
    for metric_name, statistic, unit, value, count in measured:
        measurements.append({"id": uid(f"measurement:{name}:{statistic}"), "runId": row["id"], "metric": metric_name,
                             "statistic": statistic, "unit": unit, "value": value, "sampleCount": count})
    return row


def score_run(submission, score, observed):
    measured = [("score", "geomean", "s", score, None)]
    return add_run(f"kernelbot-{submission}-leaderboard", submission, workloads["suite"], ranked_protocol,
                   {"status": "passed",
                    "measurements": [{"metric": "score", "unit": "s", "statistic": "geomean", "value": score}],
                    "sourceNative": {"source": "gpumode-kernelbot", "benchmark": "amd-fp8-mm",
                                     "externalId": f"submission/{submission}",
                                     "metrics": {"leaderboard_score_s": score}}},
                   ("score", "geomean", "s", score), measured, observed, native=True)


first = score_run("70001", 0.00021875, "2026-06-02T10:15:00.125Z")
second = score_run("70002", 0.00018125, "2026-06-20T08:00:00.500Z")
case_run = add_run("kernelbot-70002-k7168-m1024-n1536", "70002", workloads["case"], case_protocol,
                   {"status": "passed",
                    "timing": {"primaryStatistic": "median", "samples": 100,
                               "latencyNs": {"median": 348254, "mean": 351020, "minimum": 340112,
                                             "confidence95": [346900, 349700]},
                               "rawSamples": {"uri": "https://example.org/kernelbot/70002/samples.json",
                                              "digest": "sha256:" + "ab" * 32}},
                    "measurements": [{"metric": "latency", "unit": "ns", "statistic": "std", "value": 2210.5,
                                      "sampleCount": 100}]},
                   ("latency", "median", "ns", 348254),
                   [("latency", "median", "ns", 348254, 100), ("latency", "mean", "ns", 351020, 100),
                    ("latency", "min", "ns", 340112, 100), ("latency", "std", "ns", 2210.5, 100)],
                   "2026-06-20T08:05:00.000Z", interval=(346900, 349700), samples=100, raw=True)
failed = add_run("kernelbot-70003-k7168-m1024-n1536", "70003", workloads["case"], case_protocol,
                 {"status": "runtime_error"}, None, [], "2026-06-21T09:00:00.000Z")
for row in runs:
    emit("benchmark_runs", row)
for row in measurements:
    emit("measurements", row)

# record events: the score cohort's running minimum (two holders) and the case cohort's one
events = [(first, None), (second, first), (case_run, None)]
for run, previous in events:
    emit("record_events", {"id": uid("event:" + run["id"]), "comparisonKey": run["comparisonKey"], "runId": run["id"],
                           "previousRunId": previous["id"] if previous else None, "policyVersion": "ranking-v1",
                           "cause": "new_run", "at": run["observedAt"], "createdAt": PUBLISHED})
for row in artifacts:
    emit("artifacts", row)

# Serving evidence: KernelIndex's serving example manifests (registry/examples: model, stack, configuration,
# workload, run; their digests here must be the ones the examples state for each other), with a second run of the
# same configuration on another workload (server scenario, throughput only) as MLPerf results are published.
model = manifest("ModelRevision", "example-meridian-8b", {
    "model": "meridian-8b-instruct",
    "repository": {"host": "huggingface", "id": "example/meridian-8b-instruct", "revision": "a1b2c3d"},
    "architecture": "decoder-only transformer", "parameterCount": 8000000000, "contextLength": 32768,
    "modality": "text", "license": "Apache-2.0"}, "Example served model (fictional)")
stack = manifest("ServingStackRevision", "example-meridian-serve-0.4.1", {
    "project": {"name": "meridian-serve", "repository": "https://example.com/meridian/meridian-serve"},
    "revision": {"version": "0.4.1", "commit": "9a3f2b8c1d4e5f60718293a4b5c6d7e8f901a2b3"},
    "backends": ["pytorch", "cuda"], "apiProtocol": "openai", "license": "Apache-2.0"}, "Example serving stack (fictional)")
configuration = manifest("ServingConfiguration", "example-meridian-serve-tp2-fp8", {
    "stackDigest": digest(stack), "dtype": "fp8", "parallelism": {"tensor": 2}, "attentionBackend": "flashinfer",
    "kvCache": {"dtype": "fp8"}, "limits": {"maxSequenceLength": 32768, "maxBatchSize": 256},
    "options": {"enable_chunked_prefill": "true"}}, "Example serving configuration (fictional)")
chat = manifest("ServingWorkload", "example-chat-open-loop", {
    "dataset": {"name": "example-chat-traces"},
    "tokens": {"prompt": {"distribution": "lognormal", "mean": 512, "maximum": 4096},
               "output": {"distribution": "lognormal", "mean": 256, "maximum": 2048}},
    "streaming": True, "loadGeneration": "open_loop", "arrival": "poisson", "requestRatePerSecond": 8,
    "slo": [{"metric": "ttft_ms", "statistic": "p99", "operator": "<=", "value": 2000, "unit": "ms"}],
    "sampling": {"temperature": 0, "seeded": True}, "durationSeconds": 600}, "Example chat serving workload (fictional)")
server = manifest("ServingWorkload", "example-server-scenario", {
    "dataset": {"name": "example-chat-traces"}, "streaming": True, "loadGeneration": "open_loop", "arrival": "poisson",
    "slo": [{"metric": "ttft_ms", "statistic": "p99", "operator": "<=", "value": 1000, "unit": "ms"},
            {"metric": "tpot_ms", "statistic": "p99", "operator": "<=", "value": 50, "unit": "ms"}]},
    "Example server scenario (fictional)")
assert digest(model) == "sha256:a8bee6f772dc4b4c35b199f27fe3e40f7b3b2266dc57e0da432a047a5d52e22d"
assert digest(stack) == "sha256:f00ca9e39835e6c1fa6e95d16904fbf633492ea3c61c63774943f0d83fb10717"
assert digest(configuration) == "sha256:8951b4b4c5edbcb2708cacf29f9936bdbc18584aae204ea710c30921c060a5ea"
assert digest(chat) == "sha256:48d84537ce32c83fade011934806f89f1585710e0235921a168a7fed96bb880d"
model_row = {"id": uid("model"), "slug": model["metadata"]["name"], "modelDigest": digest(model),
             "name": model["spec"]["model"], "parameterCount": 8000000000, "contextLength": 32768, "tokenizer": None,
             "license": "Apache-2.0", "schemaVersion": API, "manifest": model, "createdAt": CREATED}
stack_row = {"id": uid("stack"), "projectId": projects["4242"]["id"], "slug": stack["metadata"]["name"],
             "stackDigest": digest(stack), "name": "meridian-serve 0.4.1", "version": "0.4.1", "schemaVersion": API,
             "manifest": stack, "createdAt": CREATED}
configuration_row = {"id": uid("configuration"), "stackRevisionId": stack_row["id"],
                     "configurationDigest": digest(configuration), "dtype": "fp8", "quantization": None,
                     "tensorParallel": 2, "summary": "meridian-serve · TP2 · fp8", "schemaVersion": API,
                     "manifest": configuration, "createdAt": CREATED}
emit("model_revisions", model_row)
emit("serving_stack_revisions", stack_row)
emit("serving_configurations", configuration_row)
workload_rows = {}
for w in (chat, server):
    workload_rows[w["metadata"]["name"]] = {
        "id": uid("serving-workload:" + w["metadata"]["name"]), "workloadDigest": digest(w), "slug": w["metadata"]["name"],
        "name": w["metadata"]["title"], "streaming": True, "loadGeneration": "open_loop", "schemaVersion": API,
        "manifest": w, "createdAt": CREATED}
    emit("serving_workloads", workload_rows[w["metadata"]["name"]])
serving_runs = [
    (chat, manifest("ServingRun", "example-meridian-8b-tp2-b200", {
        "modelDigest": digest(model), "configurationDigest": digest(configuration), "workloadDigest": digest(chat),
        "topology": {"acceleratorVendor": "nvidia", "acceleratorModel": "NVIDIA B200", "acceleratorsPerNode": 2,
                     "nodeCount": 1, "interconnect": "NVLink"},
        "harness": {"name": "example_loadgen", "version": "1.2.0"}, "qualityPolicy": "exact_model", "status": "valid",
        "measurements": [{"metric": "output_token_throughput_tps", "unit": "tokens_per_second", "statistic": "reported",
                          "value": 14250},
                         {"metric": "ttft_ms", "unit": "ms", "statistic": "p99", "value": 1480, "sampleCount": 4800}],
        "caveats": ["Fictional example evidence for schema documentation only."],
        "observedAt": "2026-08-01T12:00:00Z"}, "Example serving run (fictional)")),
    (server, manifest("ServingRun", "example-meridian-8b-tp2-b200-server", {
        "modelDigest": digest(model), "configurationDigest": digest(configuration), "workloadDigest": digest(server),
        "topology": {"acceleratorVendor": "nvidia", "acceleratorModel": "NVIDIA B200", "acceleratorsPerNode": 8,
                     "nodeCount": 2},
        "harness": {"name": "example_loadgen", "version": "1.2.0"}, "qualityPolicy": "exact_model", "status": "valid",
        "measurements": [{"metric": "output_token_throughput_tps", "unit": "tokens_s", "statistic": "reported",
                          "value": 51000.5}],
        "sourceNative": {"source": "example-bench", "benchmark": "meridian-8b", "scenario": "server",
                         "division": "closed", "category": "datacenter", "externalId": "example/0001"},
        "observedAt": "2026-08-02T08:30:00.250Z"}, "Example server run (fictional)")),
]
for w, run in serving_runs:
    spec = run["spec"]
    topology = spec["topology"]
    row = {"id": uid("serving-run:" + run["metadata"]["name"]), "runDigest": digest(run), "modelRevisionId": model_row["id"],
           "configurationId": configuration_row["id"], "workloadId": workload_rows[w["metadata"]["name"]]["id"],
           "sourceId": gpumode["id"], "status": "valid",
           "observedAt": spec["observedAt"].replace("Z", ".000Z") if "." not in spec["observedAt"] else spec["observedAt"],
           "publishedAt": PUBLISHED, "cohortKey": sha({"serving": run["metadata"]["name"]}),
           "protocolKey": "example_loadgen/1.2.0/unspecified/streaming/open_loop", "qualityPolicy": "exact_model",
           "metricSetKey": "·".join(m["metric"] + "·" + m["statistic"] for m in spec["measurements"]),
           "scenario": spec.get("sourceNative", {}).get("scenario"), "acceleratorVendor": "nvidia",
           "acceleratorModel": "NVIDIA B200", "acceleratorCount": topology["acceleratorsPerNode"],
           "nodeCount": topology["nodeCount"], "totalAccelerators": topology["acceleratorsPerNode"] * topology["nodeCount"],
           "reported": True, "schemaVersion": API, "manifest": run, "supersedesId": None, "retractedAt": None,
           "retractionReason": None, "createdAt": CREATED}
    emit("serving_runs", row)
    for m in spec["measurements"]:
        emit("serving_measurements", {"id": uid("serving-measurement:" + row["id"] + m["metric"]), "runId": row["id"],
                                      "metric": m["metric"], "statistic": m["statistic"], "unit": m["unit"],
                                      "value": m["value"], "sampleCount": m.get("sampleCount")})

sys.stdout.write("\n".join(lines) + "\n")
