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

env_log="$out/python-env.txt"
# shellcheck source=python/tests/device_install.sh
source "$repo/python/tests/device_install.sh"
: >"$env_log"
print_env scikit_build_core pytest cmake
install_kindex "$scratch" "$library"
[[ -n $flashinfer ]] && install_flashinfer "$flashinfer" "$scratch"

echo "== pytest" | tee -a "$out/python-env.txt"
cd "$repo"
# A hung test fails alone rather than taking the device call's whole time limit (pytest-timeout, where installed).
timeout=()
"$python" -c "import pytest_timeout" 2>/dev/null && timeout=(--timeout "${KINDEX_TEST_TIMEOUT:-240}")
# PYTEST_ARGS: more pytest arguments, e.g. "-n 4" (pytest-xdist, where installed) to share the GPU among workers.
read -r -a extra <<< "${PYTEST_ARGS:-}"
set +e
env -u KINDEX_LIBRARY KINDEX_TEST_INSTALLED=1 PYTHONUNBUFFERED=1 "$python" -m pytest -p no:cacheprovider -rs \
  "${timeout[@]}" "${extra[@]}" --durations=10 --junitxml="$out/python-tests.xml" python/tests/test_cpu.py \
  python/tests/test_gpu.py 2>&1 | tee "$out/python-tests.log"
status=${PIPESTATUS[0]}
echo "pytest exit status: $status" | tee -a "$out/python-env.txt"
exit "$status"
