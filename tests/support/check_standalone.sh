#!/usr/bin/env bash
# The repository stands alone: no file it ships names a path outside its own tree.
#
#   check_standalone.sh ROOT       list every finding in ROOT's tracked (and new, unignored) files; exit 1 if any
#   check_standalone.sh --self-test  run the check on a scratch repository holding known findings and known
#                                    look-alikes, and fail unless exactly the findings are reported
#
# A finding is
#   - the sibling folder `shared` reached through `..` (the reference material kindex was built beside), or
#   - an absolute path that starts at one of a build machine's own roots: work, home, root, Users, mnt, tmp,
#     var/tmp. It counts only where a path starts (after a space, quote, `=`, `:`, a bracket, ...), so URLs,
#     relative paths (build/tmp/x) and paths under a variable ($HOME/work, ${TMPDIR}/x) are not findings, and
#     system locations (the include, lib and bin folders under usr, the null device, proc, etc, opt) never are.
# Exempt: files under results/ other than its READMEs. They are device records kept as they came back (a
# command line with the device's scratch folders, a log naming the binary's path there); the READMEs describing
# them must follow the rule.
set -euo pipefail
# shellcheck source=SCRIPTDIR/findings.sh
source "$(dirname "$0")/findings.sh"

readonly pattern='\.\./shared(?![\w.-])|(?<![\w.~/$}-])/(?:work|home|root|Users|mnt|var/tmp|tmp)(?![\w.-])'

exempt() {  # a device record under results/
  [[ $1 == results/* && $(basename "$1") != README* ]]
}

check() {
  local root=$1
  if ! git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    echo "check_standalone: $root is not a git checkout: cannot tell which files the repository ships" >&2
    return 77
  fi
  local files=() f
  while IFS= read -r -d '' f; do
    [[ -f $root/$f ]] && ! exempt "$f" && files+=("$f")
  done < <(git -C "$root" ls-files -z --cached --others --exclude-standard)
  local found
  # -I: binary files (the compressed exports) are not text a reader follows.
  found=$(cd "$root" && printf '%s\0' "${files[@]}" | xargs -0 grep -nIHP -- "$pattern" || true)
  report_findings check_standalone "$found" "line(s) above name a path outside the repository; use a path inside \
it (fixtures: tests/data/, protocols: docs/protocols.md) or a temporary directory" \
    "${#files[@]} files, none names a path outside the repository"
}

self_test() (
  local dir
  dir=$(mktemp -d)
  trap 'rm -rf "$dir"' EXIT
  git -C "$dir" init -q
  local s=/  # built at run time, so that this script's own text holds no finding
  mkdir -p "$dir/docs" "$dir/src" "$dir/results/run" "$dir/build"
  # Each line that must be reported ends in "FINDING".
  cat >"$dir/docs/bad.md" <<EOF
see ..${s}shared/docs/protocols.md section 4 FINDING
fixtures in \${PROJECT_SOURCE_DIR}/..${s}..${s}shared FINDING
read("${s}work${s}main/tests/data/x.json") FINDING
data in ${s}home${s}alice/kindex FINDING
the device wrote ${s}root${s}out/bench.json FINDING
cp x ${s}Users${s}bob FINDING
PATH=${s}usr/bin:${s}mnt${s}data/bin FINDING
--tables=${s}tmp${s}decode-tables FINDING
cd ${s}tmp && ls FINDING
keep ${s}var${s}tmp${s}x FINDING
EOF
  cat >"$dir/src/good.cpp" <<EOF
#include "${s}usr/include/zstd.h"
run("cmd 2>${s}dev/null");
readlink ${s}proc/self/exe; cat ${s}etc/os-release; ${s}opt/cuda/bin/nvcc
https://github.com/owner/repo/tree/main${s}work${s}x and https://example.invalid${s}home${s}
build${s}tmp${s}x, \$HOME${s}work${s}kindex, \${TMPDIR}${s}x, ~${s}work, and${s}or, input${s}output
see docs/protocols.md and tests/data/README.md; ${s}tmpfs ${s}homepage ${s}root.json
ln -s ..${s}sharedlib x
EOF
  printf 'wrote %sroot%sout/a.json\n' "$s" "$s" >"$dir/results/run/device.log"  # a device record: exempt
  printf 'made by bench --dump-tables %stmp%st FINDING\n' "$s" "$s" >"$dir/results/run/README.md"
  printf 'see ..%sshared\n' "$s" >"$dir/build/ignored.txt"  # ignored: not shipped
  printf 'build/\n' >"$dir/.gitignore"
  git -C "$dir" add docs src results .gitignore
  printf 'new file, not yet added: %shome%sx FINDING\n' "$s" "$s" >"$dir/src/new.txt"

  local out rc=0
  out=$(check "$dir" 2>/dev/null) || rc=$?
  local expected
  expected=$(cd "$dir" && grep -rn --exclude-dir=.git --exclude-dir=build 'FINDING' . | sed 's|^\./||' | cut -d: -f1,2 | sort)
  compare_findings check_standalone "$expected" "$out" "$rc"
)

check_main "$@"
