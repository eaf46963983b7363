#!/usr/bin/env python3
"""Writes the bundled FlashInfer-Bench workload files under flashinfer-trace/workloads/gqa_paged/.

- gqa_paged_decode_h32_kv4_d128_ps1: the 48 upstream cases, uuids and axes kept; the index tensors become
  "random" (kindex's page-table generator) because the captured safetensors blobs are not public.
- gqa_paged_decode_h24_kv4_d128_ps64: the 20 (batch, num_pages, num_kv_indices) cases of docs/protocols.md section 1.
- every other upstream decode definition: three generated cases (batch 1, 4, 16).
New uuids are kindex's stable uuid of "<definition>/b<batch>/p<num_pages>/i<num_kv_indices>" (stable_uuid in
src/catalog/builtin.cpp; a test checks both agree). Run from this folder: python3 generate_workloads.py UPSTREAM_JSONL
"""
import json
import math
import pathlib
import sys

MASK = (1 << 64) - 1
HERE = pathlib.Path(__file__).resolve().parent
DEFS = HERE / "flashinfer-trace" / "definitions" / "gqa_paged"
OUT = HERE / "flashinfer-trace" / "workloads" / "gqa_paged"

PS64_CASES = [(2, 1348, 130), (4, 1610, 247), (4, 1729, 275), (1, 425, 361), (8, 6458, 471), (8, 6785, 527),
              (1, 1266, 882), (16, 14913, 993), (32, 20673, 1954), (32, 21889, 2178), (8, 8888, 3176),
              (64, 22913, 3939), (64, 25089, 4387), (4, 6180, 4583), (16, 14977, 6068), (128, 27201, 7865),
              (8, 14271, 7941), (128, 31809, 8761), (32, 20737, 12162), (16, 19713, 16593)]
GENERATED_CASES = [(1, 193, 96), (4, 701, 256), (16, 1409, 512)]


def mix64(x):
    x = (x + 0x9E3779B97F4A7C15) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def stable_uuid(key):
    h = 1469598103934665603
    for b in key.encode():
        h = ((h ^ b) * 1099511628211) & MASK
    hi = mix64(h)
    lo = mix64(hi)
    hi = (hi & ~0xF000 & MASK) | 0x8000  # version 8 (custom)
    lo = (lo & 0x3FFFFFFFFFFFFFFF) | 0x8000000000000000  # RFC 4122 variant
    s = f"{hi:016x}{lo:016x}"
    return f"{s[0:8]}-{s[8:12]}-{s[12:16]}-{s[16:20]}-{s[20:32]}"


def line(definition, uuid, axes, inputs):
    workload = {"uuid": uuid, "axes": axes, "inputs": inputs}
    return json.dumps({"definition": definition, "solution": None, "workload": workload, "evaluation": None})


def decode_case(definition, batch, pages, indices, inputs):
    key = f"{definition['name']}/b{batch}/p{pages}/i{indices}"
    axes = {"batch_size": batch, "num_pages": pages, "len_indptr": batch + 1, "num_kv_indices": indices}
    return line(definition["name"], stable_uuid(key), axes, inputs)


def default_inputs(definition):
    head_dim = definition["axes"]["head_dim"]["value"]
    inputs = {name: {"type": "random"} for name in definition["inputs"] if name != "sm_scale"}
    inputs["sm_scale"] = {"type": "scalar", "value": 1.0 / math.sqrt(head_dim)}
    return inputs


def main():
    upstream_ps1 = pathlib.Path(sys.argv[1])
    OUT.mkdir(parents=True, exist_ok=True)
    for path in sorted(DEFS.glob("*.json")):
        definition = json.loads(path.read_text())
        name = definition["name"]
        lines = []
        if name == "gqa_paged_decode_h32_kv4_d128_ps1":
            for raw in upstream_ps1.read_text().splitlines():
                if not raw.strip():
                    continue
                w = json.loads(raw)["workload"]
                inputs = {k: ({"type": "random"} if v["type"] == "safetensors" else v) for k, v in w["inputs"].items()}
                lines.append(line(name, w["uuid"], w["axes"], inputs))
        else:
            cases = PS64_CASES if name == "gqa_paged_decode_h24_kv4_d128_ps64" else GENERATED_CASES
            lines = [decode_case(definition, *c, default_inputs(definition)) for c in cases]
        (OUT / f"{name}.jsonl").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
