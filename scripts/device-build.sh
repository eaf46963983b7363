#!/usr/bin/env bash
# Builds binaries for the lent GPU machine (Ubuntu 24.04, CUDA 13 driver, no -dev packages): CUDA on,
# SQLite/zstd/libyaml/OpenSSL linked statically, libstdc++ static, PostgreSQL off. Stages the named targets'
# binaries (stripped) into .devcarry/<tag>/ so a device run can carry just that folder.
#   scripts/device-build.sh <tag> <target>...      e.g. scripts/device-build.sh decode test_gpu bench_decode
set -euo pipefail
cd "$(dirname "$0")/.."
tag=$1; shift
build=build-device-$tag
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKINDEX_CUDA=ON -DKINDEX_STATIC_DEPS=ON \
  -DKINDEX_POSTGRES=OFF -DCMAKE_EXE_LINKER_FLAGS="-static-libstdc++ -static-libgcc" \
  -DCMAKE_SHARED_LINKER_FLAGS="-static-libstdc++ -static-libgcc" >/dev/null
cmake --build "$build" -j "${KINDEX_JOBS:-2}" --target "$@"
mkdir -p ".devcarry/$tag"
for t in "$@"; do
  name=$t; [ "$t" = kindex_cli ] && name=kindex; [ "$t" = kindex_shared ] && name=kindex
  if [ "$t" = kindex_shared ]; then pattern="lib$name.so"; else pattern="$name"; fi
  f=$(find "$build" -maxdepth 3 -type f -name "$pattern" -perm -u+x | head -n1)
  [ -n "$f" ] || { echo "device-build: no binary for target $t" >&2; exit 1; }
  cp "$f" ".devcarry/$tag/"
  strip -g ".devcarry/$tag/$(basename "$f")"
done
du -sh ".devcarry/$tag"
