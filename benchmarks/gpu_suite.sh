#!/usr/bin/env bash
# Every GPU measurement behind the README and the docs, on a machine with one NVIDIA GPU:
#   bash benchmarks/gpu_suite.sh OUT_DIR [PART ...]      (PYTHON=python3 by default)
# PARTs (default: all, in this order), each sized to fit one call of at most 10 minutes:
#   headline    the scenarios' time passes behind the README (run folders in OUT_DIR/runs)
#   checks      the backend, the CUDA graphs and the request lifecycle against the emulated device
#   op-table    the emulated device's op table and the real programs' expectations, re-derived
#               (--record: the repository's files are rewritten; commit them with the evidence)
#   ledger-cost what the ledger costs, and that it counts as before (benchmarks/ledger_cost_gpu.sh)
#   sync-costs  what each sync site costs the GPU: --repeats auto to a 25 µs half-width, the A/A
#               false positives, and bench --against the commit before (AGAINST, default
#               .against/prev: a tree of that commit) and against itself
#   upstream    upstream sglang's own metadata code on CUDA beside the model, for each tree under
#               UPSTREAM (default .upstream: folders named <commit>-<variant>)
# Each step has a time limit; a step that fails or runs out is reported and the next one runs;
# the suite exits 1 when any step failed (steps.txt says which), 0 when every one passed. With
# ARCHIVE=FILE.tgz, OUT_DIR is packed into it after every step, so what finished survives a
# cut-off. MEASURED_COMMIT (default: git rev-parse HEAD) is stamped where a result records it.
set -u
out=${1:?usage: bash benchmarks/gpu_suite.sh OUT_DIR [PART ...]}
shift
parts=("$@")
[ ${#parts[@]} -eq 0 ] && parts=(headline checks op-table ledger-cost sync-costs upstream)
py=${PYTHON:-python3}
steps=${TIME_STEPS:-100}  # measured steps per cell in each time pass
commit=${MEASURED_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
mkdir -p "$out"
export PYTHONPATH="$PWD:$PWD/syncledger/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

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
    if [ -n "${ARCHIVE:-}" ]; then tar -czf "$ARCHIVE" -C "$out" .; fi
}

bench() {  # bench SCENARIO SECONDS [ARGS ...]
    local sc=$1 limit=$2
    shift 2
    step "bench_$sc" "$limit" "$py" -m harness bench --scenario "$sc" --device cuda \
        --out "$out/runs" --no-progress --set "steps.time=$steps" "$@"
}

part_headline() {
    bench specv2_mirror 90
    bench nonspec 50
    bench eagle 70
    bench direct_no_mirror 50
    bench sync_cost 100
}

part_checks() {
    for name in backend serving lifecycle; do
        step "check_$name" 180 "$py" -m harness check "$name" --out "$out/checks/$name"
    done
}

part_op_table() {
    step check_op_table 300 "$py" -m harness check op-table --out "$out/op_table" --record \
        --budget-s 150 --evidence 'results/{gpu}/op_table' --measured-commit "$commit"
    step check_programs 150 "$py" -m harness check programs --out "$out/programs" --record
}

part_ledger_cost() {
    step ledger_cost 280 bash benchmarks/ledger_cost_gpu.sh "$out/ledger_cost" "$commit"
}

part_sync_costs() {
    local c=(--scenario specv2_mirror --device cuda --pass time --set steps.time=60
        --set 'serving.mirror=[auto]' --set 'serving.variants=[before,dropped]' --no-progress)
    step sync_costs_auto 300 "$py" -m harness bench "${c[@]}" --repeats auto --half-width 25us \
        --delta dropped:4 --budget 4min --aa every --out "$out/sync_costs"
    local a=(--set 'serving.batch_sizes=[4]' --repeats 3 --out "$out/against")
    step against_prev 130 "$py" -m harness bench "${c[@]}" "${a[@]}" --against "${AGAINST:-.against/prev}"
    step against_self 130 "$py" -m harness bench "${c[@]}" "${a[@]}" --against .
}

part_upstream() {
    local tree name
    for tree in "${UPSTREAM:-.upstream}"/*-*/; do
        name=$(basename "$tree")
        step "upstream_$name" 170 "$py" -m harness fidelity --execute --device cuda \
            --upstream-tree "$tree" --compare-to "${name#*-}" --out "$out/upstream/$name"
    done
}

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >"$out/gpu.txt" 2>&1
echo "measured_commit $commit" >>"$out/gpu.txt"
for part in "${parts[@]}"; do
    if ! declare -F "part_${part//-/_}" >/dev/null; then
        echo "gpu_suite: unknown part $part (known: headline checks op-table ledger-cost sync-costs upstream)" >&2
        exit 2
    fi
    "part_${part//-/_}"
done
if [ "$failed" -ne 0 ]; then
    echo "gpu_suite: $failed of $ran steps failed (see $out/steps.txt)" >&2
    exit 1
fi
