#!/usr/bin/env bash
# The committed model suite (definitions/model_suite) is exactly what its generate.py writes: the script, its rule and
# the data cannot drift apart.   check_model_suite.sh PYTHON SOURCE_DIR
set -euo pipefail
python=$1
suite=$2/definitions/model_suite
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$python" "$suite/generate.py" --out "$out" >/dev/null
diff -r -x generate.py -x read_export.py -x __pycache__ "$out" "$suite"
