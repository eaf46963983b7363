#!/usr/bin/env bash
# Builds binaries for the lent GPU machine (Ubuntu 24.04, CUDA 13 driver, no -dev packages): CUDA on, the build
# type of scripts/build.sh (so ccache shares its objects; device code is optimised the same either way),
# SQLite/zstd/libyaml/OpenSSL linked statically, libstdc++ static, PostgreSQL off. Stages the named targets
# (stripped) into .devcarry/<tag>/ in the build tree's layout, bin/ and lib/, so that the CLI, the tests and the
# bench programs find kindex's libraries as ../lib, and the CLI finds the one shared library Debian builds only
# as such (cpp-httplib) there too (RPATH $ORIGIN/../lib). A device run carries just that folder.
#   scripts/device-build.sh <tag> <target>...      e.g. scripts/device-build.sh decode test_gpu bench_decode
# KINDEX_CUDA_ARCHS (environment) overrides the architecture list, e.g. 90a, or 80-virtual for a PTX-only build.
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
tag=$1; shift
build=build-device-$tag
# shellcheck disable=SC2016
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKINDEX_CUDA=ON -DKINDEX_STATIC_DEPS=ON \
  -DKINDEX_POSTGRES=OFF -DCMAKE_EXE_LINKER_FLAGS="-static-libstdc++ -static-libgcc" \
  -DCMAKE_SHARED_LINKER_FLAGS="-static-libstdc++ -static-libgcc" -DCMAKE_BUILD_RPATH='$ORIGIN/../lib' \
  -DKINDEX_CUDA_ARCHS="${KINDEX_CUDA_ARCHS:-80;90a;100a}" >/dev/null
cmake --build "$build" -j "${KINDEX_JOBS:-2}" --target "$@"
out=".devcarry/$tag"
rm -rf "$out" && mkdir -p "$out/bin" "$out/lib"
stage() {  # stage FILE DIR
  cp "$1" "$2/" && strip -g "$2/$(basename "$1")"
}
for t in "$@"; do
  case $t in
    kindex_cli) f="$build/bin/kindex" ;;
    kindex_shared) f="$build/lib/libkindex.so" ;;
    kindex_gpu_reference_shared) f="$build/lib/libkindex_gpu_reference.so" ;;
    *) f=$(find "$build/tests" "$build/benchmarks" "$build/examples" -maxdepth 1 -type f -name "$t" 2>/dev/null | head -n1) ;;
  esac
  [ -n "$f" ] && [ -f "$f" ] || { echo "device-build: no binary for target $t" >&2; exit 1; }
  case $f in *.so) stage "$f" "$out/lib" ;; *) stage "$f" "$out/bin" ;; esac
done
# The runner and the GPU tests load kindex's libraries from ../lib: stage them whenever they were built.
for lib in "$build"/lib/libkindex.so "$build"/lib/libkindex_gpu_reference.so; do
  [ -f "$lib" ] && [ ! -f "$out/lib/$(basename "$lib")" ] && stage "$lib" "$out/lib"
done
if [ -f "$out/bin/kindex" ]; then
  httplib=$(ldd "$out/bin/kindex" | awk '/libcpp-httplib/ {print $3}')
  [ -n "$httplib" ] && cp -L "$httplib" "$out/lib/"
fi
du -sh "$out"
