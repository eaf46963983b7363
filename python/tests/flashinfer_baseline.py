#!/usr/bin/env python3
"""FlashInfer's own paged decode as a FlashInfer-Bench solution for each seed decode definition: the baseline
kindex's solution is compared with inside the harness, same inputs, same timing, same reported environment (so
both land in one cohort when imported). Each call plans and runs a BatchDecodeWithPagedKVCacheWrapper (NHD, the
default CUDA-core kernel), as a caller with a fresh page table does; the plan's host work is inside the harness's
interval, as kindex's argument checks are.

    python3 python/tests/flashinfer_baseline.py DATASET     # DATASET/solutions/gqa_paged/<def>/flashinfer_decode_<def>.json
"""

import json
import sys
from pathlib import Path

try:
    from kindex import solutions
except ImportError:  # not installed: the source tree's (kindex.solutions needs no library)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from kindex import solutions


def entry_source(definition: dict) -> str:
    inputs, outputs = list(definition["inputs"]), list(definition["outputs"])
    if outputs != list(solutions.DECODE_OUTPUTS) or not set(inputs) <= set(solutions.DECODE_INPUTS):
        raise solutions.ExportError(f"definition {definition['name']}: not a gqa_paged_decode signature")
    # page_size 1 has no kv_last_page_len input: every last page holds its one token.
    last = ("kv_last_page_len" if "kv_last_page_len" in inputs
            else "torch.ones(q.shape[0], dtype=torch.int32, device=q.device)")
    return (f'"""FlashInfer\'s BatchDecodeWithPagedKVCacheWrapper for FlashInfer-Bench {definition["name"]}."""\n'
            f"import flashinfer\n"
            f"import torch\n\n"
            f"_workspace = {{}}\n\n\n"
            f"def run({', '.join(inputs + outputs)}):\n"
            f"    _, num_qo_heads, head_dim = q.shape\n"
            f"    _, page_size, num_kv_heads, _ = k_cache.shape\n"
            f"    workspace = _workspace.get(q.device)\n"
            f"    if workspace is None:\n"
            f"        workspace = _workspace[q.device] = torch.zeros(128 << 20, dtype=torch.uint8, device=q.device)\n"
            f'    wrapper = flashinfer.BatchDecodeWithPagedKVCacheWrapper(workspace, "NHD")\n'
            f"    wrapper.plan(kv_indptr, kv_indices, {last}, num_qo_heads, num_kv_heads, head_dim,\n"
            f"                 page_size, q_data_type=q.dtype, kv_data_type=k_cache.dtype, sm_scale=sm_scale)\n"
            f"    out, out_lse = wrapper.run(q, (k_cache, v_cache), return_lse=True)  # lse base 2, as defined\n"
            f"    output.copy_(out)\n"
            f"    lse.copy_(out_lse)\n")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    dataset = Path(argv[0])
    for name in solutions.SEEDS:
        definition = json.loads((dataset / "definitions" / "gqa_paged" / f"{name}.json").read_text())
        doc = solutions.fib_python_solution(f"flashinfer_decode_{name}", name, "flashinfer", entry_source(definition),
                                            "FlashInfer BatchDecodeWithPagedKVCacheWrapper, plan and run per call "
                                            "(kindex's baseline in run_harnesses.sh)")
        target = dataset / "solutions" / "gqa_paged" / name / f"{doc['name']}.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(doc, indent=2) + "\n")
        print(target)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
