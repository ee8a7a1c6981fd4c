#!/usr/bin/env bash
# Every GPU measurement behind the README, in one call on a machine with one NVIDIA GPU:
#   bash benchmarks/gpu_suite.sh OUT_DIR [ARCHIVE.tgz]      (PYTHON=python3 by default)
# Each step has a time limit; a step that fails or runs out is reported and the next one runs;
# the suite exits 1 when any step failed (steps.txt says which), 0 when every one passed.
# OUT_DIR gets one log per step, the run folders (OUT_DIR/runs) and the GPU checks
# (OUT_DIR/gpu); summaries, deltas and the sync-cost table print into the logs. With ARCHIVE,
# OUT_DIR is packed into it after every step, so what finished survives a cut-off.
set -u
out=${1:?usage: bash benchmarks/gpu_suite.sh OUT_DIR [ARCHIVE.tgz]}
archive=${2:-}
py=${PYTHON:-python3}
steps=${TIME_STEPS:-200}  # measured steps per cell in each time pass
mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

failed=0
ran=0
step() {  # step NAME SECONDS COMMAND...
    local name=$1 limit=$2
    shift 2
    local t0=$SECONDS rc=0
    timeout "$limit" "$@" >"$out/$name.log" 2>&1 || rc=$?
    echo "$name: exit $rc in $((SECONDS - t0)) s" | tee -a "$out/steps.txt"
    ran=$((ran + 1))
    if [ "$rc" -ne 0 ]; then failed=$((failed + 1)); fi
    if [ -n "$archive" ]; then tar -czf "$archive" -C "$out" .; fi
}

bench() {  # bench SCENARIO SECONDS [--set ...]
    local sc=$1 limit=$2
    shift 2
    step "bench_$sc" "$limit" "$py" -m harness bench --scenario "$sc" --device cuda \
        --out "$out/runs" --no-progress --set "steps.time=$steps" "$@"
}

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >"$out/gpu.txt" 2>&1
bench specv2_mirror 90
bench nonspec 50
bench eagle 70
bench direct_no_mirror 50
bench sync_cost 100
step gpu_check 220 make gpu-check PYTHON="$py" GPU_OUT="$out/gpu"
if [ "$failed" -ne 0 ]; then
    echo "gpu_suite: $failed of $ran steps failed (see $out/steps.txt)" >&2
    exit 1
fi
