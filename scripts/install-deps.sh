#!/usr/bin/env bash
# Installs every build and test dependency of kindex from Debian's packages.
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
