# shellcheck shell=bash disable=SC2034  # (the variables are for the script that sources this)
# Sourced by results/runner/run_*_device.sh with the run's name (attest, peers) as its argument: what they share.
#   repo      the repository root
#   d         the carried build (bin/, lib/): $KINDEX_DEVCARRY, default .devcarry/<name>
#   out       what comes back ($OUT, default /tmp/<name>-out); res the results, packed into $out/<name>_device.tar.gz
#   scratch   a folder for everything else; KINDEX_PYTHON ($PYTHON, default python3); start: the call's $SECONDS
#   summary LINE...         the line on stdout and into $res/summary.txt
#   install_flashinfer WS   FlashInfer from .devcarry/flashinfer (install.sh) when there, its JIT workspace WS
#   pack                    the total time into the summary, $res packed into $out, summary.txt beside it
run_name=$1
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
d=$(realpath "${KINDEX_DEVCARRY:-$repo/.devcarry/$run_name}")
out=${OUT:-/tmp/$run_name-out}
res=$(mktemp -d)/${run_name}_device
mkdir -p "$out" "$res"
scratch=$(mktemp -d)
export KINDEX_PYTHON=${PYTHON:-python3}
start=$SECONDS
summary() { echo "$*" | tee -a "$res/summary.txt"; }

install_flashinfer() {
  [[ -f $repo/.devcarry/flashinfer/install.sh ]] || return 0
  FISITE=$scratch/fisite FIWS=$1 PYTHON=$KINDEX_PYTHON bash "$repo/.devcarry/flashinfer/install.sh" \
    > "$res/flashinfer_install.log" 2>&1
  # shellcheck disable=SC1091
  source "$scratch/fisite/env.sh"
}

pack() {
  summary "total: $((SECONDS - start)) s"
  tar -C "$(dirname "$res")" -czf "$out/${run_name}_device.tar.gz" "${run_name}_device"
  cp "$res/summary.txt" "$out/summary.txt"
}
