"""Summary of a kernels_gpu.py run: medians per case, speedups, bandwidth, target verdicts."""

from __future__ import annotations

import statistics


def summarize(bench, bw: float) -> list[dict]:
    groups: dict[tuple, list[float]] = {}
    meta: dict[tuple, dict] = {}
    for r in bench.samples:
        if r["metric"] not in ("device_us", "host_us") or (
            bench.cuda and r["metric"] != "device_us"
        ):
            continue
        k = (r["op"], r["impl"], r["mode"], r["model"], r["forward_mode"], r["batch_size"])
        groups.setdefault(k, []).append(r["value"])
        meta[k] = r
    floor = {mode: statistics.median(v) for (op, _, mode, *_), v in groups.items() if op == "noop"}
    out = []
    for k, vals in groups.items():
        op, impl, mode, model, fmode, bs = k
        q = statistics.quantiles(vals, n=10, method="inclusive") if len(vals) > 1 else [vals[0]] * 9
        med = statistics.median(vals)
        row = {
            "op": op,
            "impl": impl,
            "mode": mode,
            "model": model,
            "forward_mode": fmode,
            "batch_size": bs,
            "num_tokens": meta[k]["num_tokens"],
            "samples": len(vals),
            "median_us": round(med, 3),
            "p10_us": round(q[0], 3),
            "p90_us": round(q[-1], 3),
        }
        case = next(
            (
                c
                for (o, c) in bench.bytes
                if o == op and c.model == model and c.forward_mode == fmode and c.batch_size == bs
            ),
            None,
        )
        if case is not None:
            nbytes = bench.bytes[(op, case)]
            bound = nbytes / bw * 1e6
            fl = max(bound, floor.get(mode, 0.0))
            row.update(
                bytes=nbytes,
                achieved_GBps=round(nbytes / med / 1e3, 2),
                bound_us=round(bound, 3),
                ratio_to_bound=round(med / bound, 2),
                floor_bound_us=round(fl, 3),
                ratio_to_floor_bound=round(med / fl, 2),
            )
        ref = groups.get((op, "torch", mode, model, fmode, bs))
        if ref and impl != "torch":
            row["speedup_vs_torch"] = round(statistics.median(ref) / med, 2)
        out.append(row)
    return out


def print_summary(summary: list[dict], checks: list[dict], cuda: bool) -> dict:
    by = {
        (r["op"], r["impl"], r["mode"], r["model"], r["forward_mode"], r["batch_size"]): r
        for r in summary
    }
    unit = "device us" if cuda else "host us (CPU, interpreter)"
    print(f"\nwhole upgrade: median {unit}; speedup = torch / triton")
    print(
        f"{'model':5} {'mode':6} {'bs':>4} {'N':>5} | {'eager torch':>11} {'triton':>8} "
        f"{'x':>6} | {'graph torch':>11} {'triton':>8} {'x':>6}"
    )
    verdicts = {}
    for (op, impl, mode, model, fmode, bs), r in sorted(by.items(), key=lambda kv: kv[0][3:]):
        if op != "upgrade" or impl != "triton" or mode != "eager":
            continue
        te = by[(op, "torch", "eager", model, fmode, bs)]["median_us"]
        g = by.get((op, "triton", "graph", model, fmode, bs))
        gt = by.get((op, "torch", "graph", model, fmode, bs))
        gs = (
            f"{gt['median_us']:11.1f} {g['median_us']:8.1f} {g['speedup_vs_torch']:6.2f}"
            if g
            else ""
        )
        print(
            f"{model:5} {fmode:6} {bs:4d} {r['num_tokens']:5d} | {te:11.1f} "
            f"{r['median_us']:8.1f} {r['speedup_vs_torch']:6.2f} | {gs}"
        )
        if bs == 256 and cuda and g:
            verdicts[f"upgrade eager >=3x {model}/{fmode}"] = r["speedup_vs_torch"] >= 3
            verdicts[f"upgrade graph >=1.5x {model}/{fmode}"] = g["speedup_vs_torch"] >= 1.5
    if cuda:
        print("\ntriton kernels, graph replay, verify, batch 256: time vs bytes/bandwidth")
        print(
            f"{'op':18} {'model':5} {'med us':>8} {'bound us':>9} {'x bound':>8} "
            f"{'x max(bound,launch)':>20} {'GB/s':>8}"
        )
        for r in summary:
            if (r["impl"], r["mode"], r["forward_mode"], r["batch_size"]) != (
                "triton",
                "graph",
                "verify",
                256,
            ) or "bytes" not in r:
                continue
            print(
                f"{r['op']:18} {r['model']:5} {r['median_us']:8.2f} {r['bound_us']:9.3f} "
                f"{r['ratio_to_bound']:8.1f} {r['ratio_to_floor_bound']:20.2f} "
                f"{r['achieved_GBps']:8.1f}"
            )
            name = f"{r['op']} {r['model']} graph <=2x max(bytes/bw, empty launch)"
            verdicts[name] = r["ratio_to_floor_bound"] <= 2
    failed = [c for c in checks if c["passed"] is False]
    print(f"\nchecks: {sum(c['passed'] is True for c in checks)} passed, {len(failed)} failed")
    for c in failed[:20]:
        print(
            f"  FAILED {c['check']}: {c['op']} {c['impl']} {c['model']} {c['forward_mode']} "
            f"bs={c['batch_size']} {c['detail']}"
        )
    for name, ok in verdicts.items():
        print(f"target {name}: {'PASS' if ok else 'FAIL'}")
    return verdicts
