#!/usr/bin/env bash
# What the sync ledger costs, and that it counts as before, on a machine with one NVIDIA GPU:
#   bash benchmarks/ledger_cost_gpu.sh OUT_DIR MEASURED_COMMIT      (PYTHON=python3 by default)
# 1. smoke: one .item() and one .cpu() under a ledger must be one CUPTI event and one
#    interceptor event; if not (or the process dies), the steps after it run with CUPTI's
#    callbacks through cupti-python (SYNCLEDGER_CUPTI=python) and steps.txt says so;
# 2. python -m harness check sync: the catalogue against the sleep oracle, the host cost
#    per step (overhead.csv) and per call (record_cost.csv: .item() with CUPTI attached and
#    paused, a sync-free op, a region; on CUDA and on the emulated device);
# 3. python -m harness check programs-cost: each real program with and without the ledger,
#    its first call's syncs per site against the expectation, every ledger call's against CUPTI.
# Each step has a time limit; every meta.json under OUT_DIR gets MEASURED_COMMIT.
set -u
out=${1:?usage: bash benchmarks/ledger_cost_gpu.sh OUT_DIR MEASURED_COMMIT}
commit=${2:?usage: bash benchmarks/ledger_cost_gpu.sh OUT_DIR MEASURED_COMMIT}
py=${PYTHON:-python3}
export PYTHONPATH="$PWD:$PWD/syncledger/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
mkdir -p "$out"

step() {  # step NAME SECONDS COMMAND...
    local name=$1 limit=$2 t0=$SECONDS rc
    shift 2
    timeout "$limit" "$@" >"$out/$name.log" 2>&1
    rc=$?
    echo "$name: exit $rc in $((SECONDS - t0)) s" | tee -a "$out/steps.txt"
    return $rc
}

smoke=$(mktemp --suffix=.py)
cat >"$smoke" <<'PY'
import torch

from syncledger import SyncLedger, cupti

x = torch.ones(1, device="cuda")
with SyncLedger() as led:
    x.item()
    x.cpu()
seen = [(e.kind.value, e.op, e.detector) for e in led.events]
print(cupti.status(), seen, sep="\n")
ok = seen == [("d2h_read", "item", "cupti"), ("d2h_read", "cpu", "interceptor")]
raise SystemExit(0 if ok and "attached" in cupti.status() else 1)
PY

if ! step smoke 45 "$py" "$smoke"; then
    export SYNCLEDGER_CUPTI=python
    echo "smoke failed: the steps below ran with SYNCLEDGER_CUPTI=python" | tee -a "$out/steps.txt"
    step smoke_python 45 "$py" "$smoke"
fi
step sync 150 "$py" -m harness check sync --out "$out/sync" --steps 150
step programs_cost 60 "$py" -m harness check programs-cost --out "$out/programs_cost"
"$py" - "$out" "$commit" <<'PY'
import json
import sys
from pathlib import Path

for meta in Path(sys.argv[1]).rglob("meta.json"):
    doc = json.loads(meta.read_text())
    doc["measured_commit"] = sys.argv[2]
    meta.write_text(json.dumps(doc, indent=2) + "\n")
PY
