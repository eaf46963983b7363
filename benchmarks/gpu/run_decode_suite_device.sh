#!/usr/bin/env bash
# The decode suite on the GPU host: one device call, from the repository root.
#   DATASETS="DIR [DIR ...]" [IMPLS=kindex,flashinfer_tc,...] [FILTER=REGEX] [QUICK=1] [MAX_CASES=N] [SEED=1]
#   [LIB=path/libkindex.so] [RESUME=earlier.json] [SUITE_ARGS="--spin-us 300 ..."] \
#   benchmarks/gpu/run_decode_suite_device.sh
# DATASETS: folders written by `kindex catalog export --out DIR` (carried in an ignored folder, e.g. .devcarry/).
# Carried under $CARRY (default .devcarry, ignored by git): decode/lib/libkindex.so (default LIB);
# flashinfer/ (install.sh, the slim wheel, apache-tvm-ffi's wheel, the -xqa tarball for flashinfer_xqa);
# fa3/fa3-sm90-bf16-paged.tar.xz; tileops/tileops-0.1.0-site.tar.xz (41 MB: often a call of its own).
# Writes to $OUT: decode_suite.json/.log (kindex, FlashInfer, FA3: one process, --prebuild first),
# decode_suite_tileops.json/.log (TileOPs alone: its tvm-ffi conflicts with FlashInfer's; same seeds, same inputs),
# report.md (decode_suite.py --report over both), device.txt, flashinfer_setup.log. RESUME: a decode_suite.json of an
# earlier call whose finished cases are kept (a suite larger than one call's 10 minutes).
set -uo pipefail
carry=${CARRY:-.devcarry}
scratch=${SCRATCH:-${TMPDIR:-/tmp}}  # where the peers are unpacked (kept between calls on a warm machine)
out=${OUT:-$scratch/decode-suite-out}
export FISITE=$scratch/fisite FIWS=$scratch/fiws  # FlashInfer's install.sh: site folder, JIT workspace
lib=${LIB:-$carry/decode/lib/libkindex.so}
impls=${IMPLS:-kindex,flashinfer_tc,flashinfer_cuda,flashinfer_xqa,fa3,tileops}
mkdir -p "$out"
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} PYTHONUNBUFFERED=1
export PATH=$CUDA_HOME/bin:$PATH
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv > "$out/device.txt" 2>&1
read -r -a dirs <<< "${DATASETS:?set DATASETS to the dataset folders (kindex catalog export --out DIR)}"
args=(--seed "${SEED:-1}")
for d in "${dirs[@]}"; do args+=(--dataset "$d"); done
[ -n "${FILTER:-}" ] && args+=(--filter "$FILTER")
[ -n "${QUICK:-}" ] && args+=(--quick)
[ -n "${MAX_CASES:-}" ] && args+=(--max-cases "$MAX_CASES")
read -r -a extra <<< "${SUITE_ARGS:-}"
base_path=${PYTHONPATH:-}
main_impls=$(tr , '\n' <<< "$impls" | grep -vx tileops | paste -sd, -)
reports=()

if [ -n "$main_impls" ]; then
  path=$base_path
  if [[ $main_impls == *flashinfer* ]]; then
    [ -d "$FISITE" ] || bash "$carry/flashinfer/install.sh" > "$out/flashinfer_setup.log" 2>&1
    # shellcheck disable=SC1091
    source "$FISITE/env.sh"  # FlashInfer's JIT folders and arch (9.0a); PYTHONPATH gains $FISITE
    path=$PYTHONPATH
    xqa=
    for f in "$carry"/flashinfer/*-xqa.tar.xz; do [ -f "$f" ] && xqa=$f; done
    if [ -n "$xqa" ]; then  # the build that keeps XQA (folder fixqa/), ahead of the slim one (tvm-ffi from $FISITE)
      [ -d "$scratch/fixqa/flashinfer" ] || tar xJf "$xqa" -C "$scratch"
      path=$scratch/fixqa:$path
    fi
  fi
  if [[ $main_impls == *fa3* ]] && [ -f "$carry/fa3/fa3-sm90-bf16-paged.tar.xz" ]; then
    [ -f "$scratch/fa3/flash_attn_interface.py" ] ||
      { mkdir -p "$scratch/fa3" && tar xJf "$carry/fa3/fa3-sm90-bf16-paged.tar.xz" -C "$scratch/fa3"; }
    path=$scratch/fa3${path:+:$path}
  fi
  [ -n "${RESUME:-}" ] && cp "$RESUME" "$out/decode_suite.json"
  PYTHONPATH=$path timeout "${TIMEOUT_MAIN:-420}" python3 benchmarks/gpu/decode_suite.py --impls "$main_impls" \
    --lib "$lib" --prebuild --resume --out "$out/decode_suite.json" "${args[@]}" "${extra[@]}" \
    > "$out/decode_suite.log" 2>&1
  echo "decode_suite ($main_impls) exit $?"
  grep -E '^\[[0-9]+/|ERROR|COMPARATOR|prebuild|: (ok|not installed)' "$out/decode_suite.log" | tail -n 40
  reports+=("$out/decode_suite.json")
fi

if [[ ,$impls, == *,tileops,* ]]; then
  tl=$carry/tileops/tileops-0.1.0-site.tar.xz
  if [ -f "$tl" ]; then
    [ -d "$scratch/tlsite" ] || tar xJf "$tl" -C "$scratch"  # folder tlsite/
    # FlashInfer's environment (env.sh) left out: TileOPs has its own tvm-ffi and caches
    env -u TVM_FFI_CACHE_DIR -u FLASHINFER_JIT_DIR -u FLASHINFER_WORKSPACE_BASE \
      "PYTHONPATH=$scratch/tlsite${base_path:+:$base_path}" timeout "${TIMEOUT_TILEOPS:-150}" python3 \
      benchmarks/gpu/decode_suite.py --impls tileops --resume --out "$out/decode_suite_tileops.json" "${args[@]}" \
      "${extra[@]}" > "$out/decode_suite_tileops.log" 2>&1
    echo "decode_suite (tileops) exit $?"
    grep -E '^\[[0-9]+/|ERROR|COMPARATOR|: (ok|not installed)' "$out/decode_suite_tileops.log" | tail -n 20
    reports+=("$out/decode_suite_tileops.json")
  else
    echo "tileops: $tl not carried: not run"
  fi
fi

existing=()
for f in "${reports[@]}"; do [ -f "$f" ] && existing+=("$f"); done
if ((${#existing[@]})); then
  python3 benchmarks/gpu/decode_suite.py --report "${existing[@]}" > "$out/report.md" 2>&1
  sed -n '/^### Summary/,$p' "$out/report.md"
fi
