# shellcheck shell=bash
# Shared by the source checks (check_standalone.sh, check_layering.sh), sourced: the self-test's verdict and the
# command line. Each check defines check ROOT and self_test.

# report_findings NAME FOUND PROBLEM CLEAN: the check's verdict. FOUND (grep -n lines) empty: prints
# "NAME: CLEAN", status 0; else prints FOUND, then "NAME: <count> PROBLEM" on stderr, status 1.
report_findings() {
  local name=$1 found=$2 problem=$3 clean=$4
  if [[ -n $found ]]; then
    echo "$found"
    echo "$name: $(wc -l <<<"$found") $problem" >&2
    return 1
  fi
  echo "$name: $clean"
}

# compare_findings NAME EXPECTED OUT RC: the self-test passes when the check exited 1 and reported exactly the
# EXPECTED file:line list (sorted); otherwise it prints what was missed and what was reported wrongly.
compare_findings() {
  local name=$1 expected=$2 out=$3 rc=$4 got
  got=$(grep -v "^$name:" <<<"$out" | cut -d: -f1,2 | sort)
  if [[ $rc -ne 1 || $got != "$expected" ]]; then
    echo "self-test FAILED (exit $rc)"
    diff <(echo "$expected") <(echo "$got") | sed 's/^</missed:/; s/^>/false alarm:/' || true
    return 1
  fi
  echo "self-test: all $(wc -l <<<"$expected") findings reported, no false alarm, exit 1"
}

# check_main ARGS: --self-test, or ROOT to check.
check_main() {
  case ${1:-} in
    --self-test) self_test ;;
    "") echo "usage: $0 ROOT | --self-test" >&2; exit 2 ;;
    *) check "$1" ;;
  esac
}
