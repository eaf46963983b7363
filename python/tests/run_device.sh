#!/usr/bin/env bash
# The Python package's tests on a GPU host without network: installs kindex from this checkout with pip (no build
# isolation, no dependencies, no index: the host's torch, scikit-build-core, CMake and pytest are used as they
# are) into a scratch folder, optionally installs FlashInfer from carried wheels, and runs python/tests
# (CPU and GPU tests) against the installed package. Results go to $OUT (default: ./python-device-results):
# python-tests.log, python-tests.xml (JUnit), python-env.txt. Exit status: pytest's.
#
#   bash python/tests/run_device.sh --library DIR/lib/libkindex.so [--flashinfer DIR]
#
#   --library FILE     package this libkindex.so (built elsewhere, e.g. scripts/device-build.sh <tag> kindex_shared:
#                      .devcarry/<tag>/lib/libkindex.so) instead of building one. Without it pip builds
#                      libkindex.so here with nvcc (KINDEX_CUDA=ON, KINDEX_CUDA_ARCHS, default 90a), which needs the
#                      project's build dependencies (scripts/install-deps.sh) on this host.
#   --flashinfer DIR   FlashInfer for the wrapper comparison: DIR/install.sh is sourced if present (it sets up
#                      the JIT environment), otherwise the wheels DIR/*.whl are installed into a scratch folder.
#                      Without it, or if flashinfer does not import, the comparison tests are skipped (and say so).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
library="" flashinfer=""
while (($#)); do
  case $1 in
    --library) library=$(realpath "$2"); shift 2 ;;
    --flashinfer) flashinfer=$(realpath "$2"); shift 2 ;;
    *) echo "run_device.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
out=${OUT:-$PWD/python-device-results}
mkdir -p "$out"
python=${PYTHON:-python3}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

{
  echo "date: $(date -u +%FT%TZ)"
  echo "commit: $(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)"
  "$python" - <<'EOF'
import importlib, platform
print("python:", platform.python_version())
for name in ("torch", "triton", "scikit_build_core", "pytest", "cmake"):
    try:
        m = importlib.import_module(name)
        print(f"{name}: {getattr(m, '__version__', '?')}")
    except Exception as e:  # noqa: BLE001
        print(f"{name}: not importable ({type(e).__name__})")
import torch
print("cuda:", torch.version.cuda, "| device:", torch.cuda.get_device_name() if torch.cuda.is_available() else "none")
EOF
  nvcc --version 2>/dev/null | tail -1 || echo "nvcc: none"
} | tee "$out/python-env.txt"

site="$scratch/site"
defines=()
if [[ -n $library ]]; then
  [[ -f $library ]] || { echo "run_device.sh: --library $library: no such file" >&2; exit 2; }
  defines=(-C "cmake.define.KINDEX_PYTHON_PREBUILT_LIBRARY=$library")
else
  defines=(-C cmake.define.KINDEX_CUDA=ON -C "cmake.define.KINDEX_CUDA_ARCHS=${KINDEX_CUDA_ARCHS:-90a}")
fi
echo "== pip install kindex ${library:+(prebuilt $library)}" | tee -a "$out/python-env.txt"
start=$SECONDS
"$python" -m pip install --no-index --no-build-isolation --no-deps --disable-pip-version-check --target "$site" \
  -C build-dir="$scratch/build" "${defines[@]}" "$repo" 2>&1 | tail -n 5 | tee -a "$out/python-env.txt"
echo "pip install: $((SECONDS - start)) s" | tee -a "$out/python-env.txt"
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
env -u KINDEX_LIBRARY "$python" -c "import kindex; print('kindex', kindex.__file__, kindex.version())" \
  | tee -a "$out/python-env.txt"

if [[ -n $flashinfer ]]; then
  echo "== FlashInfer from $flashinfer" | tee -a "$out/python-env.txt"
  if [[ -f $flashinfer/install.sh ]]; then
    # shellcheck disable=SC1091
    FISITE="$scratch/fisite" FIWS="$scratch/fiws" PYTHON="$python" source "$flashinfer/install.sh" 2>&1 \
      | tee -a "$out/python-env.txt"
    # install.sh exports its environment when sourced, but not through the pipe above: source its env file.
    # shellcheck disable=SC1091
    [[ -f $scratch/fisite/env.sh ]] && source "$scratch/fisite/env.sh"
  else
    "$python" -m pip install -q --no-index --no-deps --no-compile --target "$scratch/fisite" "$flashinfer"/*.whl
    export PYTHONPATH="$scratch/fisite:$PYTHONPATH"
  fi
fi

echo "== pytest" | tee -a "$out/python-env.txt"
cd "$repo"
# A hung test fails alone rather than taking the device call's whole time limit (pytest-timeout, where installed).
timeout=()
"$python" -c "import pytest_timeout" 2>/dev/null && timeout=(--timeout "${KINDEX_TEST_TIMEOUT:-240}")
set +e
env -u KINDEX_LIBRARY KINDEX_TEST_INSTALLED=1 PYTHONUNBUFFERED=1 "$python" -m pytest -p no:cacheprovider -rs \
  "${timeout[@]}" --durations=10 --junitxml="$out/python-tests.xml" python/tests/test_cpu.py \
  python/tests/test_gpu.py 2>&1 | tee "$out/python-tests.log"
status=${PIPESTATUS[0]}
echo "pytest exit status: $status" | tee -a "$out/python-env.txt"
exit "$status"
