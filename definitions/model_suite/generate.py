#!/usr/bin/env python3
"""Writes kindex's model-shaped decode suite: a FlashInfer-Bench dataset of gqa_paged_decode definitions and workloads
whose head counts are those of public models' config.json files after tensor parallelism.

Run from anywhere: python3 definitions/model_suite/generate.py [--out DIR]   (stdlib only; rewrites definitions/,
workloads/ and README.md beside this file, or under DIR; the output depends on nothing but this script and the
upstream definitions it copies).

The rule (also in the README it writes):
- configurations: each model at TP 1, 2, 4, 8 where TP divides the query heads and the kv heads divide by TP or TP by
  them (fewer kv heads than GPUs: each GPU holds one, replicated); per GPU H = heads / TP, K = max(1, kv heads / TP);
  identical (H, K, D) merged; numbered in (D, H, K) order;
- grid: batch {1, 4, 16, 64, 256} x mean context {512, 4k, 32k, 128k} tokens, keeping the points whose K and V caches
  (num_pages x page_size x K x D bf16, twice) fit in 8 GiB;
- configuration i: its grid points sorted by tokens (batch x context), then batch, cut into four quarters; quarter t
  is run at page size PAGE_SIZES[(t + i) % 3], at the quarter's point (i + t) mod its length: every configuration gets
  every page size and a point in each quarter, and consecutive configurations take consecutive points;
- a grid point no pick reached (only a few configurations hold the largest ones) goes to the configuration holding it
  with the fewest picks, at page size 16;
- each picked point with all three length distributions (equal, long_tail, one_long) over the same pages; batch 1 only
  `equal` (with one sequence they coincide);
- num_kv_indices = batch x context / page_size (contexts are multiples of every page size), num_pages =
  ceil(1.25 x num_kv_indices) + 64, so ids scatter over a cache a quarter larger than what is read;
- uuid = stable_uuid("<definition>/b<batch>/p<num_pages>/i<num_kv_indices>/<lengths>"), as generate_workloads.py
  computes it for the bundled workloads (src/catalog/builtin.cpp stable_uuid).
"""
import json
import math
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
UPSTREAM = HERE.parent / "flashinfer-trace" / "definitions" / "gqa_paged"

# One model a line: name, the Hugging Face repository whose config.json gives the numbers, num_attention_heads,
# num_key_value_heads, head_dim (config's head_dim where it has one, else hidden_size / num_attention_heads), and
# where head_dim comes from. Phi-3-mini (32 / 32, head_dim 96) has a head_dim kindex does not support (64, 128,
# 256): Phi-3-medium instead.
MODEL_TABLE = """
Llama-3.2-1B     meta-llama/Llama-3.2-1B             32  8  64   hidden_size 2048
Llama-3.2-3B     meta-llama/Llama-3.2-3B             24  8  128  hidden_size 3072
Llama-3.1-8B     meta-llama/Llama-3.1-8B             32  8  128  hidden_size 4096
Llama-3.1-70B    meta-llama/Llama-3.1-70B            64  8  128  hidden_size 8192
Qwen2.5-7B       Qwen/Qwen2.5-7B                     28  4  128  hidden_size 3584
Qwen2.5-32B      Qwen/Qwen2.5-32B                    40  8  128  hidden_size 5120
Qwen2.5-72B      Qwen/Qwen2.5-72B                    64  8  128  hidden_size 8192
Mistral-7B-v0.3  mistralai/Mistral-7B-v0.3           32  8  128  head_dim 128
Gemma-2-2B       google/gemma-2-2b                   8   4  256  head_dim 256
Gemma-2-9B       google/gemma-2-9b                   16  8  256  head_dim 256
Gemma-2-27B      google/gemma-2-27b                  32  16 128  head_dim 128
Phi-3-medium     microsoft/Phi-3-medium-4k-instruct  40  10 128  hidden_size 5120
"""
MODELS = [(name, repo, int(hq), int(hkv), int(d))
          for name, repo, hq, hkv, d, *_ in (line.split() for line in MODEL_TABLE.strip().splitlines())]
TPS = (1, 2, 4, 8)
PAGE_SIZES = (1, 16, 64)
BATCHES = (1, 4, 16, 64, 256)
CONTEXTS = (512, 4096, 32768, 131072)
DISTRIBUTIONS = ("equal", "long_tail", "one_long")
CACHE_LIMIT = 8 << 30  # bytes of K and V together
SLACK_PAGES = 64

# The bundled workloads' uuid rule (definitions/generate_workloads.py; src/catalog/builtin.cpp agrees, tested).
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from generate_workloads import stable_uuid  # noqa: E402


def name_of(h, k, d, p):
    return f"gqa_paged_decode_h{h}_kv{k}_d{d}_ps{p}"


def configurations():
    """{(H, K, D): [(model, repository, tp), ...]} over every model and TP."""
    configs = {}
    for model, repo, heads, kv, dim in MODELS:
        for tp in TPS:
            if heads % tp or (kv % tp and tp % kv):
                continue
            configs.setdefault((heads // tp, max(1, kv // tp), dim), []).append((model, repo, tp))
    return dict(sorted(configs.items(), key=lambda c: (c[0][2], c[0][0], c[0][1])))


def pages(batch, context, page_size):
    indices = batch * context // page_size
    return indices, math.ceil(indices * 1.25) + SLACK_PAGES


def cache_bytes(num_pages, page_size, kv_heads, head_dim):
    return 2 * num_pages * page_size * kv_heads * head_dim * 2  # K and V, bf16


def fits(batch, context, page_size, kv_heads, head_dim):
    return cache_bytes(pages(batch, context, page_size)[1], page_size, kv_heads, head_dim) <= CACHE_LIMIT


def grid(k, d):
    """The feasible (batch, context) points of a configuration, by tokens then batch."""
    points = [(b, c) for b in BATCHES for c in CONTEXTS if all(fits(b, c, p, k, d) for p in PAGE_SIZES)]
    return sorted(points, key=lambda x: (x[0] * x[1], x[0]))


def cases():
    """[(config, page_size, batch, context, distribution)] by the rule in the docstring."""
    picks = []  # (config index, config, page_size, batch, context)
    configs = list(configurations())
    for i, (h, k, d) in enumerate(configs):
        points = grid(k, d)
        quarters = [points[len(points) * t // 4:len(points) * (t + 1) // 4] for t in range(4)]
        for t, quarter in enumerate(quarters):
            picks.append((i, (h, k, d), PAGE_SIZES[(t + i) % 3]) + quarter[(i + t) % len(quarter)])
    # Every grid point some configuration can hold is run at least once: a point no pick reached goes to the
    # configuration holding it with the fewest picks (the first such), at page size 16.
    for b in BATCHES:
        for c in CONTEXTS:
            holders = [i for i, (h, k, d) in enumerate(configs) if (b, c) in grid(k, d)]
            if holders and not any(p[3:] == (b, c) for p in picks):
                i = min(holders, key=lambda j: (sum(1 for p in picks if p[0] == j), j))
                picks.append((i, configs[i], 16, b, c))
    out = []
    for _, config, page_size, batch, context in sorted(picks):
        for dist in DISTRIBUTIONS if batch > 1 else ("equal",):
            out.append((config, page_size, batch, context, dist))
    return out


def slug(model):
    return model.lower()


def definition_text(h, k, d, p, models):
    """The upstream file where FlashInfer-Bench has one of this name; else the upstream file of the same page-size
    form (ps1, or paged) with the constants, name, description and tags changed: the family kindex generates
    (decode_definition), in the upstream files' JSON form."""
    name = name_of(h, k, d, p)
    if (UPSTREAM / f"{name}.json").is_file():
        return (UPSTREAM / f"{name}.json").read_text()
    template = "gqa_paged_decode_h32_kv8_d128_ps1" if p == 1 else "gqa_paged_decode_h32_kv8_d128_ps64"
    doc = json.loads((UPSTREAM / f"{template}.json").read_text())
    doc["name"] = name
    used_by = ", ".join(f"{m} at TP={tp}" for m, _, tp in models)
    doc["description"] = (f"Batched Grouped Query Attention decode with a paged KV cache (page_size={p}). "
                          f"{h} q-heads, {k} kv-heads, head_dim={d} per device: {used_by}. kindex model suite.")
    tags = ["stage:decode", "status:generated"]
    tags += sorted({f"model:{slug(m)}" for m, _, _ in models})
    tags += ["fi_api:flashinfer.decode.BatchDecodeWithPagedKVCacheWrapper"]
    tags += [f"tp:{tp}" for tp in sorted({tp for _, _, tp in models})]
    doc["tags"] = tags
    for axis, value in (("num_qo_heads", h), ("num_kv_heads", k), ("head_dim", d), ("page_size", p)):
        doc["axes"][axis]["value"] = value
    ref = doc["reference"]
    for old, new in (("num_qo_heads == 32", f"num_qo_heads == {h}"), ("num_kv_heads == 8", f"num_kv_heads == {k}"),
                     ("head_dim == 128", f"head_dim == {d}"), ("page_size == 64", f"page_size == {p}")):
        assert old in ref or (p == 1 and old.startswith("page_size")), old
        ref = ref.replace(old, new)
    doc["reference"] = ref
    return json.dumps(doc, indent=2) + "\n"


def workload_line(definition, h, k, d, p, batch, context, dist):
    indices, num_pages = pages(batch, context, p)
    inputs = {}
    for input_name in definition["inputs"]:
        if input_name == "sm_scale":
            continue
        inputs[input_name] = {"type": "random"}
        if input_name == "kv_indptr":
            inputs[input_name]["lengths"] = dist  # kindex's extension: the page-table length distribution
    inputs["sm_scale"] = {"type": "scalar", "value": 1.0 / math.sqrt(d)}
    name = definition["name"]
    uuid = stable_uuid(f"{name}/b{batch}/p{num_pages}/i{indices}/{dist}")
    axes = {"batch_size": batch, "num_pages": num_pages, "len_indptr": batch + 1, "num_kv_indices": indices}
    workload = {"uuid": uuid, "axes": axes, "inputs": inputs}
    return json.dumps({"definition": name, "solution": None, "workload": workload, "evaluation": None})


def context_text(tokens):
    return f"{tokens // 1024}k" if tokens >= 1024 else str(tokens)


def gib(x):
    return f"{x / (1 << 30):.2f}"


def readme(configs, chosen):
    by_config = {}
    for c in chosen:
        by_config.setdefault(c[0], []).append(c)
    lines = [README_HEAD.format(cases=len(chosen), definitions=len({(c[0], c[1]) for c in chosen}),
                                configs=len(configs))]
    lines.append("| # | H | K | D | group | models (TP) | cases: page size, batch x mean context |")
    lines.append("| --- | --- | --- | --- | --- | --- | --- |")
    for i, ((h, k, d), models) in enumerate(configs.items()):
        picks = []
        for p in PAGE_SIZES:
            for b, ctx in sorted({(c[2], c[3]) for c in by_config[(h, k, d)] if c[1] == p}):
                n = sum(1 for c in by_config[(h, k, d)] if c[1:4] == (p, b, ctx))
                picks.append(f"ps{p}: {b} x {context_text(ctx)} ({n})")
        used_by = ", ".join(f"{m} ({tp})" for m, _, tp in models)
        lines.append(f"| {i} | {h} | {k} | {d} | {h // k} | {used_by} | {'; '.join(picks)} |")
    lines.append("")
    lines.append("Cases by batch (rows) and mean context (columns), all configurations and page sizes together:")
    lines.append("")
    lines.append("| batch | " + " | ".join(context_text(c) for c in CONTEXTS) + " |")
    lines.append("| --- |" + " --- |" * len(CONTEXTS))
    for b in BATCHES:
        counts = [sum(1 for c in chosen if c[2] == b and c[3] == ctx) for ctx in CONTEXTS]
        lines.append(f"| {b} | " + " | ".join(str(n) if n else "-" for n in counts) + " |")
    lines.append("")
    per_ps = ", ".join(f"ps{p} {sum(1 for c in chosen if c[1] == p)}" for p in PAGE_SIZES)
    per_dist = ", ".join(f"{d} {sum(1 for c in chosen if c[4] == d)}" for d in DISTRIBUTIONS)
    per_d = ", ".join(f"d{d} {sum(1 for c in chosen if c[0][2] == d)}" for d in sorted({c[0][2] for c in chosen}))
    largest = max(cache_bytes(pages(c[2], c[3], c[1])[1], c[1], c[0][1], c[0][2]) for c in chosen)
    lines.append(f"By page size: {per_ps}. By distribution: {per_dist}. By head_dim: {per_d}. Largest K+V cache: "
                 f"{gib(largest)} GiB.")
    lines.append("")
    lines.append("Models (numbers from each repository's `config.json` on huggingface.co):")
    lines.append("")
    lines.append("| model | config.json | heads | kv heads | head_dim |")
    lines.append("| --- | --- | --- | --- | --- |")
    for model, repo, heads, kv, dim in MODELS:
        lines.append(f"| {model} | https://huggingface.co/{repo}/blob/main/config.json | {heads} | {kv} | {dim} |")
    lines.append(README_TAIL)
    return "\n".join(lines)


README_HEAD = """# Model-shaped decode suite

Written by `generate.py` (do not edit: change the script and run `python3 definitions/model_suite/generate.py`).

A FlashInfer-Bench dataset of batched GQA paged decode (`gqa_paged_decode_h{{H}}_kv{{K}}_d{{D}}_ps{{P}}`) at the
attention shapes public models have on one GPU after tensor parallelism, at batch 1-256, mean contexts of 512 to
128k tokens, page sizes 1, 16, 64, and three page-table length distributions: {cases} workloads over {definitions}
definitions ({configs} (H, K, D) configurations x 3 page sizes). It is not bundled into kindex: it is read from disk
(`kindex bench --problem definitions/model_suite`).

- `definitions/gqa_paged/<name>.json`: FlashInfer-Bench's own file where it has one of that name, else that file's
  form for these constants (name, description, tags, the reference's asserts changed). Either way the definition
  kindex generates for the name (`decode_definition`: axes, inputs, outputs, constraints, and the reference where
  the file is not FlashInfer-Bench's; `tests/catalog/test_model_suite.cpp` checks it).
- `workloads/gqa_paged/<name>.jsonl`: every input `random` and `sm_scale` 1/sqrt(head_dim), with kindex's
  page-table extension on `kv_indptr`: `{{"type": "random", "lengths": "equal" | "long_tail" | "one_long"}}`
  (`docs/catalog.md`, "Page tables"). `equal`: every sequence the same context; `long_tail`: lognormal (sigma 2)
  lengths, the longest tenth of the batch holds most tokens; `one_long`: one sequence holds half the tokens, the
  others share the rest. Page tables are generated by kindex (seeded by the workload), never stored here.

## Rule

- Configurations: each model below at TP 1, 2, 4, 8 where TP divides its query heads and its kv heads divide by TP
  (or TP by them: each GPU then holds one replicated kv head). Per GPU H = heads / TP, K = max(1, kv heads / TP).
  Identical (H, K, D) are one configuration (the table says which models share it), numbered in (D, H, K) order.
  Phi-3-mini (32 / 32 heads, head_dim 96) is left out, as kindex supports head_dim 64, 128 and 256; Phi-3-medium
  (40 / 10, 128) stands for the Phi-3 family.
- Grid: batch {{1, 4, 16, 64, 256}} x mean context {{512, 4k, 32k, 128k}}, without the points whose K and V caches
  (num_pages x page_size x K x head_dim bf16 values each) exceed 8 GiB together.
- Configuration i: its grid points, sorted by tokens (batch x context) then batch, in four quarters (smallest to
  largest); quarter t runs at page size (1, 16, 64)[(t + i) mod 3], at the quarter's point number (i + t) mod its
  length. So every configuration has every page size and a case in each quarter of its grid, and consecutive
  configurations take consecutive points. A grid point no configuration got this way (only a few hold the largest)
  goes to the one holding it with the fewest picks, at page size 16: every point some configuration can hold is run.
- Each picked point comes with the three distributions over the same pages (only `equal` at batch 1, where they
  coincide): distributions compare at equal work.
- num_kv_indices = batch x context / page_size, num_pages = ceil(1.25 x num_kv_indices) + 64 (ids scattered over a
  cache a quarter larger than what is read). Partial last pages make the mean context up to half a page shorter.
- uuid = `stable_uuid("<definition>/b<batch>/p<num_pages>/i<num_kv_indices>/<lengths>")` (as the bundled workloads'
  uuids, `definitions/generate_workloads.py`).

Not modelled: only the attention shapes are the models'. sm_scale is 1/sqrt(head_dim) for all (Gemma-2 scales by
query_pre_attn_scalar, 144 for 27B, and soft-caps logits; its sliding-window layers are not separate cases).

## Configurations
"""

README_TAIL = """
## Use

Check every workload's page table against the definitions' constraints (draws the index tensors only; about 30 s):

```
build/bin/kindex catalog check definitions/model_suite
```

Benchmark on a GPU, the whole folder or one definition file of it:

```
build/bin/kindex bench --problem definitions/model_suite --impl kindex
build/bin/kindex bench --problem definitions/model_suite/definitions/gqa_paged/gqa_paged_decode_h8_kv2_d64_ps16.json
```

Without a GPU only the CPU reference runs, and in reasonable time only on the `small` workloads (about 40 s):
`kindex bench --problem definitions/model_suite --workloads small --impl cpu-reference --reference cpu-reference`.

Export for FlashInfer-Bench, which fills a `random` int32 input with noise, so the page tables go out as files
(about 35 s and 290 MB for the whole suite; names after `--out` pick definitions):

```
build/bin/kindex catalog export --dataset definitions/model_suite --out model-suite-fib
python3 definitions/model_suite/read_export.py model-suite-fib    # reads every table back with the stdlib alone
flashinfer-bench run --local model-suite-fib
```

The export writes `definitions/gqa_paged/<name>.json` (these files), `workloads/gqa_paged/<name>.jsonl` (page-table
inputs as `{"type": "safetensors", "path": ..., "tensor_key": <input>}`) and one file per workload,
`blob/kindex-page-tables/<name>/<lengths>/<uuid>.safetensors`, holding int32 tensors `kv_indptr`, `kv_indices` and
(page size > 1) `kv_last_page_len`, with metadata `generator`, `definition`, `uuid`, `lengths`. A trace FlashInfer-Bench
writes for such a workload imports into the same WorkloadCase as kindex's own run of it (`docs/evidence.md`).
"""


def main():
    # --out DIR writes the dataset there instead (the test that the committed files are the script's output).
    root = pathlib.Path(sys.argv[sys.argv.index("--out") + 1]) if "--out" in sys.argv else HERE
    defs, workloads = root / "definitions" / "gqa_paged", root / "workloads" / "gqa_paged"
    configs = configurations()
    chosen = cases()
    for folder in (defs, workloads):
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.iterdir():
            old.unlink()
    for (h, k, d), models in configs.items():
        for p in PAGE_SIZES:
            text = definition_text(h, k, d, p, models)
            definition = json.loads(text)
            (defs / f"{definition['name']}.json").write_text(text)
            rows = [workload_line(definition, h, k, d, p, b, c, dist) for cfg, ps, b, c, dist in chosen
                    if cfg == (h, k, d) and ps == p]
            (workloads / f"{definition['name']}.jsonl").write_text("\n".join(rows) + "\n")
    (root / "README.md").write_text(readme(configs, chosen))
    print(f"{len(configs)} configurations, {len(configs) * len(PAGE_SIZES)} definitions, {len(chosen)} workloads")


if __name__ == "__main__":
    main()
