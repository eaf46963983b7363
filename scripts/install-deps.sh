#!/usr/bin/env bash
# Installs every build and test dependency of kindex: Debian's packages, and four PyPI packages for the Python tests.
# The CUDA toolkit (nvcc) is optional: without it the CPU parts build and run.
set -euo pipefail
packages=(
  build-essential cmake ninja-build ccache pkg-config
  nlohmann-json3-dev libcli11-dev libcpp-httplib-dev libssl-dev
  libsqlite3-dev libzstd-dev libyaml-dev libpq-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev zstd sqlite3
  chromium postgresql
  libopenblas-dev
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# The Python package's test runner and build backend (python/tests under ctest: pytest, and `pip install .` with
# scikit-build-core), numpy for the decode suite's CPU tests (benchmarks/gpu/test_decode_suite_cpu.py), feedparser,
# the feed reader the Atom feed's test parses it with (tests/web/test_feed_atom.py), and the official MCP Python SDK,
# the client of `kindex mcp`'s tests (tests/mcp/test_mcp_sdk.py), from PyPI, for the python3 that CMake finds first on
# PATH.
if ! python3 -c "import pytest, scikit_build_core, numpy, feedparser, mcp" 2>/dev/null; then
  python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore "pytest>=7" \
    "scikit-build-core>=0.10" numpy "feedparser>=6" "mcp>=1.10"
fi
