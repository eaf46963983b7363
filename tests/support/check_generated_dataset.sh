#!/usr/bin/env bash
# A committed generated dataset (definitions/model_suite, definitions/decode_variants) is exactly what its generate.py
# writes: the script, its rule and the data cannot drift apart.   check_generated_dataset.sh PYTHON SOURCE_DIR DATASET
set -euo pipefail
python=$1
dataset=$2/definitions/$3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$python" "$dataset/generate.py" --out "$out" >/dev/null
diff -r -x generate.py -x read_export.py -x __pycache__ "$out" "$dataset"
