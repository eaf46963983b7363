#!/usr/bin/env bash
# Issue #27's device calls (decode variants for real models), from the repository root. Everything is written under
# $OUT, one folder per stage packed as $OUT/<stage>.tar.xz (a call returns at most 8 files), plus a few lines per
# stage on stdout. STAGES picks and orders the stages (default: all, more than one 10-minute call holds); each is
# bounded by its *_TIMEOUT (seconds). A split that fits:
#   STAGES=pytests                                   (TESTS_TIMEOUT 480)
#   STAGES="loop_llama loop_gemma"                   (LOOP_TIMEOUT 280 each)
#   STAGES=suite FEATURES="--kv-dtype fp8_e4m3;--layout HND;--q-len 4"        (SUITE_TIMEOUT 200 per set)
#   STAGES=suite FEATURES="--window 127 --soft-cap 50;--sinks --window 127;--rope"
#   STAGES=fp8
#
# Carried under $CARRY (default .devcarry, ignored by git):
#   features/lib/libkindex.so  scripts/device-build.sh <tag> kindex_shared (KINDEX_CUDA_ARCHS=90a), or LIB=path
#   flashinfer/                FlashInfer's install.sh and wheels (as benchmarks/gpu/run_decode_suite_device.sh takes
#                              them); without it the FlashInfer comparisons skip and the loops run kindex alone
#   suite/seeds/ (DATASETS)    `kindex catalog export --out .devcarry/suite/seeds` (the suite and fp8 stages)
#
# Stages:
#   pytests     python/tests/run_device.sh: test_cpu.py and test_gpu.py against the installed package (every variant
#               against the float64 reference and against FlashInfer; NOT_SUPPORTED variants xfail with the library's
#               message): python-tests.log, python-tests.xml, python-env.txt
#   loop_llama  benchmarks/gpu/decode_loop.py --model llama-3-8b --backends flashinfer,kindex (LOOP_ARGS, default
#               --batch 16 --steps 64): decode_loop_llama.json / .log: kindex teacher-forced on FlashInfer's
#               tokens, logits compared per step (argmax agreements, near-ties, unexplained disagreements), tokens/s
#               and per-step latency after an untimed warm-up step, the one-time set-up apart
#   loop_gemma  the same for gemma-2-9b (soft-cap 50, 4096-token window on even layers, head_dim 256)
#   suite       benchmarks/gpu/decode_suite.py (IMPLS, default kindex,flashinfer_tc,flashinfer_cuda) once per variant
#               of FEATURES (';'-separated flag sets), QUICK, MAX_CASES (default 12) per set: suite_<n>.tar.xz with
#               decode_suite.json / .log, report.md
#   fp8         decode_suite.py --fp8-vs-bf16 (kindex,flashinfer_tc): every case with bf16 then fp8 e4m3 KV, and the
#               goal (kindex fp8 >= 1.7x bf16 from 64 MB of KV): fp8.tar.xz with decode_suite.json ("fp8_vs_bf16"),
#               report.md. The goal needs cases of 64 MB and more: DATASETS with the model-shaped suite.
set -uo pipefail
final=${OUT:?set OUT (the device call does)}
carry=${CARRY:-.devcarry}
lib=$(realpath "${LIB:-$carry/features/lib/libkindex.so}")
fi_dir=$carry/flashinfer
python=${PYTHON:-python3}
scratch=${SCRATCH:-${TMPDIR:-/tmp}}/features
mkdir -p "$scratch"
stage_out() { tar cJf "$final/$1.tar.xz" -C "$2" . && echo "$1: packed $final/$1.tar.xz"; }

# kindex (the prebuilt library) and FlashInfer installed once for the loop stages: python/tests/device_install.sh
env_log=$scratch/install.txt
# shellcheck source=python/tests/device_install.sh
source python/tests/device_install.sh
loop_env_ready=
loop_env() {
  [[ -n $loop_env_ready ]] && return
  : >"$env_log"
  install_kindex "$scratch/loop" "$lib" >/dev/null
  [[ -d $fi_dir ]] && install_flashinfer "$(realpath "$fi_dir")" "$scratch/loop" >/dev/null
  loop_env_ready=1
}

run_loop() {  # run_loop MODEL NAME
  local w=$scratch/$2 backends=flashinfer,kindex
  mkdir -p "$w"
  loop_env
  "$python" -c "import flashinfer" 2>/dev/null || backends=kindex
  read -r -a extra <<< "${LOOP_ARGS:---batch 16 --steps 64}"
  env -u KINDEX_LIBRARY PYTHONUNBUFFERED=1 timeout "${LOOP_TIMEOUT:-280}" "$python" benchmarks/gpu/decode_loop.py \
    --model "$1" --backends "$backends" "${extra[@]}" --out "$w/decode_$2.json" > "$w/decode_$2.log" 2>&1
  echo "$2 ($1, $backends) exit $?"
  tail -n 4 "$w/decode_$2.log"
  cp "$env_log" "$w/install.txt" 2>/dev/null
  stage_out "$2" "$w"
}

run_suite() {  # run_suite NAME FLAGS...
  local name=$1 w=$scratch/$1
  shift
  mkdir -p "$w"
  OUT=$w LIB=$lib CARRY=$carry DATASETS="${DATASETS:-$carry/suite/seeds}" QUICK=${QUICK:-1} \
    MAX_CASES=${MAX_CASES:-12} SUITE_ARGS="$*" TIMEOUT_MAIN=${SUITE_TIMEOUT:-200} \
    bash benchmarks/gpu/run_decode_suite_device.sh 2>&1 | tail -n 12
  stage_out "$name" "$w"
}

for s in ${STAGES:-pytests loop_llama loop_gemma suite fp8}; do
  case $s in
    pytests)
      w=$scratch/pytests; mkdir -p "$w"
      fi_args=(); [[ -d $fi_dir ]] && fi_args=(--flashinfer "$fi_dir")
      OUT=$w timeout "${TESTS_TIMEOUT:-480}" bash python/tests/run_device.sh --library "$lib" "${fi_args[@]}" \
        > "$w/run_device.txt" 2>&1
      echo "pytests exit $?"
      grep -E "passed|failed|xfailed|error" "$w/python-tests.log" 2>/dev/null | tail -n 3
      stage_out pytests "$w" ;;
    loop_llama) run_loop llama-3-8b loop_llama ;;
    loop_gemma) run_loop gemma-2-9b loop_gemma ;;
    suite)
      n=0
      all="--kv-dtype fp8_e4m3;--layout HND;--q-len 4;--window 127 --soft-cap 50;--sinks --window 127;--rope"
      IFS=';' read -r -a sets <<< "${FEATURES:-$all}"
      for flags in "${sets[@]}"; do
        echo "suite_$n: $flags"
        # shellcheck disable=SC2086  # the flags split into words
        IMPLS=${IMPLS:-kindex,flashinfer_tc,flashinfer_cuda} run_suite "suite_$n" $flags
        n=$((n + 1))
      done ;;
    fp8)
      IMPLS=${FP8_IMPLS:-kindex,flashinfer_tc} MAX_CASES=${FP8_MAX_CASES:-${MAX_CASES:-12}} \
        run_suite fp8 --fp8-vs-bf16 ;;
    *) echo "unknown stage $s (pytests loop_llama loop_gemma suite fp8)" ;;
  esac
done
