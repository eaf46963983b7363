#!/usr/bin/env bash
# The runner reaches kindex's kernels, the GPU references and the CPU references only through their declared C ABIs
# in the public include tree (include/kindex/: kindex.h, gpu_reference.h, cpu_reference.h): no file under
# src/runner includes a header of src/kernels, src/gpu_reference or src/reference (docs/architecture.md).
#
#   check_layering.sh ROOT         list every such include under ROOT/src/runner; exit 1 if any
#   check_layering.sh --self-test  run the check on a scratch tree holding known findings and known look-alikes,
#                                  and fail unless exactly the findings are reported
set -euo pipefail
# shellcheck source=SCRIPTDIR/findings.sh
source "$(dirname "$0")/findings.sh"

readonly forbidden='kernels|gpu_reference|reference'
# An include directive (either quote style, any spacing) whose path starts with a forbidden folder.
readonly pattern="^[[:space:]]*#[[:space:]]*include[[:space:]]*[\"<](${forbidden})/"

check() {
  local root=$1
  if [[ ! -d $root/src/runner ]]; then
    echo "check_layering: $root/src/runner: no such folder" >&2
    return 2
  fi
  local found
  found=$(cd "$root" && grep -rnE --include='*.cpp' --include='*.hpp' --include='*.h' --include='*.cu' \
    --include='*.cuh' -- "$pattern" src/runner || true)
  report_findings check_layering "$found" \
    "include(s) above reach into src/{${forbidden//|/,}} from src/runner; go through the C ABI in include/kindex/ instead" \
    "src/runner includes nothing of src/{${forbidden//|/,}}"
}

self_test() (
  local dir
  dir=$(mktemp -d)
  trap 'rm -rf "$dir"' EXIT
  mkdir -p "$dir/src/runner/execute" "$dir/src/reference"
  # Each line that must be reported ends in "FINDING".
  cat >"$dir/src/runner/execute/bad.cpp" <<'CPP'
#include "reference/reference.hpp"  // FINDING
#include "gpu_reference/gpu_reference.hpp"  // FINDING
#include <kernels/capi.hpp>  // FINDING
  #  include "kernels/decode/paged_decode.hpp"  // FINDING
CPP
  printf '#include "gpu_reference/c_abi.h"  // FINDING\n' >"$dir/src/runner/x.h"
  cat >"$dir/src/runner/good.cpp" <<'CPP'
#include "kindex/kindex.h"
#include "kindex/gpu_reference.h"
#include "kindex/cpu_reference.h"
#include "runner/execute/reference_inputs.hpp"
#include "measure/timer.hpp"
// the old "reference/reference.hpp" is named in this comment only
const char* s = "#include \"kernels/capi.hpp\"";
CPP
  printf '#include "reference/reference.hpp"\n' >"$dir/src/reference/ok.cpp"  # outside src/runner
  printf '#include "reference/reference.hpp"\n' >"$dir/src/runner/notes.md"   # not a source file

  local out rc=0
  out=$(check "$dir" 2>/dev/null) || rc=$?
  local expected
  expected=$(cd "$dir" && grep -rn 'FINDING' src | cut -d: -f1,2 | sort)
  compare_findings check_layering "$expected" "$out" "$rc"
)

check_main "$@"
