# Sourced by the device scripts under results/ (from the repository root): $O (= $OUT, what comes back), $L (a
# scratch folder for the logs), stamp MESSAGE (a line with the seconds since the start, also into $L/steps.txt),
# cap SECONDS (a step's timeout: its own cap, but never past $DEADLINE seconds into the call, default 540, so the
# logs are packed inside the run tool's 600 s even when every step runs long; a cut step shows as rc 124), and the
# GPU's name, driver and clocks in $L/device_env.txt.
O=${OUT:?}
L=$(mktemp -d)
T0=$(date +%s)
stamp() { echo "[$(($(date +%s) - T0)) s] $*" | tee -a "$L/steps.txt"; }
cap() { local left=$((${DEADLINE:-540} - ($(date +%s) - T0))); [ $left -lt 1 ] && left=1; echo $(($1 < left ? $1 : left)); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader \
  > "$L/device_env.txt" 2>&1
