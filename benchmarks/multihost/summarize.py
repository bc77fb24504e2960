#!/usr/bin/python3
"""Summarises benchmarks/multihost/run.sh's raw output (multihost_raw.txt).

Usage: summarize.py multihost_raw.txt [--csv multihost.csv] [--png multihost.png]

Writes one CSV row per measurement (per round, link rate and configuration; columns below) and prints,
per link rate and model, the medians over rounds:
  - the link: nominal tc rate and the bulk TCP rate cluster.sh measured when it brought the cluster up;
  - ceiling: samples/s of both ranks running the bare local step with no communication at all
    (bench_train_dist --budget's T_both), and 2 x one rank's (rank 0 alone while the other sleeps, T1);
  - per dtrain configuration (policy, overlap, bucket size, compression): samples/s, efficiency = samples/s / ceiling
    (median of the per-round ratios), the ratio to PyTorch DDP without compression and to DDP with the same
    compression (fp16 only), the time per iteration (from the median samples/s), the bytes each rank all-reduces per step (wire_bytes),
    the wire floor (2(p-1)/p x wire_bytes / rate: what a ring all-reduce of those bytes must send per
    rank, at the nominal rate) and the bytes host 1's eth0 actually sent per step (launch average);
  - PyTorch DDP (gloo) samples/s per compression;
  - the gradient all-reduce alone per policy (bench_train_dist --budget's T_red: a blocking all-reduce of
    every 1 MiB bucket of the float gradient) against the wire floor of the float gradient.
Launches that failed or hit run.sh's TIMEOUT, and skipped cluster sessions, are listed at the end.

CSV columns: round, rate, rate_gbit, link_gbit, model, system (dtrain | ddp | budget | failed), policy,
overlap, bucket_kib, compression, ranks, samples_per_s, min, max, iter_ms, compute_ms, dist_step_ms, grad_bytes,
wire_bytes, floor_ms, tx_bytes_per_step, reduce_ms, t1_ms, both_ms, ceiling_samples_per_s, status.
"""
import argparse
import csv
import re
import statistics
import sys
from collections import defaultdict

KV = re.compile(r"([\w.]+)=(\S+)")
COLUMNS = ["round", "rate", "rate_gbit", "link_gbit", "model", "system", "policy", "overlap", "bucket_kib",
           "compression", "ranks", "samples_per_s", "min", "max", "iter_ms", "compute_ms", "dist_step_ms", "grad_bytes",
           "wire_bytes", "floor_ms", "tx_bytes_per_step", "reduce_ms", "t1_ms", "both_ms",
           "ceiling_samples_per_s", "status"]


def rate_bits(rate):
    """Bits per second of a tc rate such as 10gbit or 500mbit (None if unreadable)."""
    m = re.fullmatch(r"([\d.]+)([kmg]?)(bit|bps)", rate.lower())
    if not m:
        return None
    v = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)]
    return v if m.group(3) == "bit" else 8 * v


def floor_ms(nbytes, ranks, rate):
    """Milliseconds a ring all-reduce of nbytes needs on the wire: 2(p-1)/p x nbytes per rank / rate."""
    bits = rate_bits(rate)
    if not bits or not nbytes or not ranks:
        return None
    return 1e3 * 2 * (ranks - 1) / ranks * nbytes * 8 / bits


def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def parse(path):
    """Returns (rows, launches, problems, batch): measurement rows (dicts), the launch lines (context + kv),
    the lines reporting failures or skipped sessions, and the batch per rank of the run."""
    rows, launches, problems = [], [], []
    batch = 64
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("run.sh: "):
                line = line[len("run.sh: "):]
            if line.startswith("start "):
                batch = int(dict(KV.findall(line)).get("batch", batch))
                continue
            if " | " not in line:
                continue
            ctx_text, payload = line.split(" | ", 1)
            ctx = dict(KV.findall(ctx_text))
            if "round" not in ctx:
                continue
            words = payload.split()
            if not words:
                continue
            kv = dict(KV.findall(payload))
            base = {"round": int(ctx["round"]), "rate": ctx.get("rate", ""),
                    "rate_gbit": (rate_bits(ctx.get("rate", "")) or 0) / 1e9 or None,
                    "link_gbit": num(ctx.get("link_gbit"))}
            if words[0] == "result" and len(words) > 3:
                ranks = int(kv["ranks"])
                wire = int(kv["wire_bytes"]) if "wire_bytes" in kv else None
                comp = kv.get("compression", "none")
                comp = "topk" if comp.startswith("topk") else comp
                compute, step = num(kv.get("backward_ms")), num(kv.get("step_ms"))
                rows.append(dict(base, model=words[1], system="dtrain", policy=words[2],
                                 overlap=int(kv["overlap"]), bucket_kib=int(kv["bucket_bytes"]) // 1024,
                                 compression=comp, ranks=ranks,
                                 samples_per_s=num(kv["median"]), min=num(kv["min"]), max=num(kv["max"]),
                                 iter_ms=1e3 * ranks * batch / num(kv["median"]), compute_ms=compute,
                                 dist_step_ms=step, grad_bytes=num(kv.get("grad_bytes")), wire_bytes=wire,
                                 floor_ms=floor_ms(wire, ranks, base["rate"]), launch=ctx.get("launch"),
                                 status="ok"))
            elif words[0] == "budget" and len(words) > 3:
                ranks = int(kv["ranks"])
                both = num(kv.get("both_ms"))
                grad = num(kv.get("grad_bytes"))
                rows.append(dict(base, model=words[1], system="budget", policy=words[2], compression="none",
                                 ranks=ranks, reduce_ms=num(kv["reduce_ms"]), t1_ms=num(kv["t1_ms"]),
                                 both_ms=both, iter_ms=both, grad_bytes=grad, wire_bytes=grad,
                                 floor_ms=floor_ms(grad, ranks, base["rate"]),
                                 ceiling_samples_per_s=1e3 * ranks * batch / both if both else None,
                                 samples_per_s=1e3 * ranks * batch / both if both else None,
                                 launch=ctx.get("launch"), status="ok"))
            elif words[0] == "ddp" and len(words) > 3:
                ranks = int(kv["ranks"])
                grad = num(kv.get("grad_bytes"))
                comp = kv.get("compression", "none")
                wire = grad / 2 if grad and comp == "fp16" else grad
                rows.append(dict(base, model=words[1], system="ddp", policy=words[2], overlap=1,
                                 compression=comp, ranks=ranks, samples_per_s=num(kv["median"]),
                                 min=num(kv["min"]), max=num(kv["max"]), iter_ms=num(kv.get("step_ms")),
                                 grad_bytes=grad, wire_bytes=wire, floor_ms=floor_ms(wire, ranks, base["rate"]),
                                 launch=ctx.get("launch"), status="ok"))
            elif words[0] == "launch":
                launches.append(dict(ctx, **kv))
                if kv.get("status") != "0":
                    problems.append(line)
            elif words[0] == "session" and kv.get("status", "up") != "up":
                problems.append(line)
            elif words[0] == "FAILED" or "WARNING" in payload:
                problems.append(line)
    # Bytes host 1 sent per step, averaged over each launch (includes the initial broadcasts and barriers).
    per_launch = {}
    for la in launches:
        tx, steps = num(la.get("tx1_bytes")), num(la.get("steps_total"))
        if tx is not None and steps:
            per_launch[(la["round"], la["rate"], la["launch"])] = tx / steps
    for r in rows:
        if r["system"] in ("dtrain", "ddp"):
            r["tx_bytes_per_step"] = per_launch.get((str(r["round"]), r["rate"], r.get("launch")))
    for la in launches:
        if la.get("status") != "0":
            parts = la.get("launch", "").split("-")
            rows.append({"round": int(la["round"]), "rate": la.get("rate", ""), "system": "failed",
                         "model": parts[1] if len(parts) > 1 else "", "policy": parts[0],
                         "compression": parts[2] if len(parts) > 2 else "", "status": la.get("status")})
    return rows, launches, problems, batch


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def rate_order(rates):
    return sorted(rates, key=lambda r: -(rate_bits(r) or 0))


def summarize(rows, batch):
    out = []
    ok = [r for r in rows if r.get("status") == "ok"]
    rates = rate_order({r["rate"] for r in ok})
    models = [m for m in ("cnn", "mlp") if any(r["model"] == m for r in ok)]
    models += sorted({r["model"] for r in ok} - set(models))
    for rate in rates:
        for model in models:
            sel = [r for r in ok if r["rate"] == rate and r["model"] == model]
            if not sel:
                continue
            rounds = sorted({r["round"] for r in sel})
            link = med([r.get("link_gbit") for r in sel])
            # Per round: the ceiling (median over the budget launch's policies), 2 x one rank, DDP.
            ceil_r, one_r, ddp_r = {}, {}, defaultdict(dict)
            for k in rounds:
                b = [r for r in sel if r["system"] == "budget" and r["round"] == k]
                ceil_r[k] = med([r["ceiling_samples_per_s"] for r in b])
                t1 = med([r["t1_ms"] for r in b])
                one_r[k] = 2e3 * batch / t1 if t1 else None
                for r in sel:
                    if r["system"] == "ddp" and r["round"] == k:
                        ddp_r[r["compression"]][k] = r["samples_per_s"]
            ceiling = med(ceil_r.values())
            out.append(f"## {model.upper()} at {rate} (2 hosts, 1 rank each, batch {batch} per rank; "
                       f"bulk TCP measured {fmt(link, '.2f')} Gbit/s; {len(rounds)} round(s))")
            out.append("")
            out.append(f"ceiling (both ranks, no communication): {fmt(ceiling, '.0f')} samples/s; "
                       f"2 x one rank alone: {fmt(med(one_r.values()), '.0f')} samples/s; PyTorch DDP (gloo): "
                       + ", ".join(f"{c} {fmt(med(v.values()), '.0f')}" for c, v in sorted(ddp_r.items()))
                       + " samples/s")
            out.append("")
            out.append("| system | policy | overlap | bucket KiB | compression | samples/s | eff. vs ceiling | vs DDP none |"
                       " vs DDP same comp. | ms/iter | wire MB/step/rank | wire floor ms | eth0 MB/step |")
            out.append("|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
            configs = sorted({(r["system"], r["policy"], r.get("overlap"), r["compression"], r.get("bucket_kib"))
                              for r in sel if r["system"] in ("dtrain", "ddp")},
                             key=lambda c: (c[0] != "ddp", ["none", "fp16", "bf16", "topk"].index(c[3])
                                            if c[3] in ("none", "fp16", "bf16", "topk") else 9, c[1], c[2],
                                            -(c[4] or 0)))
            for system, policy, overlap, comp, bucket in configs:
                rs = [r for r in sel if (r["system"], r["policy"], r.get("overlap"), r["compression"],
                                         r.get("bucket_kib")) == (system, policy, overlap, comp, bucket)]
                eff = med([r["samples_per_s"] / ceil_r[r["round"]] for r in rs if ceil_r.get(r["round"])])
                vs_none = med([r["samples_per_s"] / ddp_r["none"][r["round"]] for r in rs
                               if ddp_r["none"].get(r["round"])])
                vs_same = med([r["samples_per_s"] / ddp_r[comp][r["round"]] for r in rs
                               if comp in ddp_r and ddp_r[comp].get(r["round"])]) if system == "dtrain" else None
                wire = med([r.get("wire_bytes") for r in rs])
                sps = med([r["samples_per_s"] for r in rs])
                tx = med([r.get("tx_bytes_per_step") for r in rs])
                out.append(f"| {'dtrain' if system == 'dtrain' else 'PyTorch DDP'} | {policy} | "
                           f"{'on' if overlap else 'off'} | {bucket if bucket else ''} | {comp} | {fmt(sps, '.0f')}"
                           f" | {fmt(eff, '.3f')} | {fmt(vs_none, '.2f')} | {fmt(vs_same, '.2f')} | "
                           f"{fmt(1e3 * rs[0]['ranks'] * batch / sps if sps else None, '.2f')} | "
                           f"{fmt(wire / 1e6 if wire else None, '.3f')} | "
                           f"{fmt(med([r.get('floor_ms') for r in rs]), '.2f')} | "
                           f"{fmt(tx / 1e6 if tx else None, '.3f')} |")
            bud = [r for r in sel if r["system"] == "budget"]
            if bud:
                out.append("")
                out.append("gradient all-reduce alone per step (float gradient, 1 MiB buckets, blocking; "
                           "bench_train_dist --budget):")
                out.append("")
                out.append("| policy | all-reduce ms | wire floor ms | all-reduce / floor |")
                out.append("|---|---:|---:|---:|")
                for policy in sorted({r["policy"] for r in bud}):
                    rs = [r for r in bud if r["policy"] == policy]
                    red, fl = med([r["reduce_ms"] for r in rs]), med([r["floor_ms"] for r in rs])
                    out.append(f"| {policy} | {fmt(red, '.2f')} | {fmt(fl, '.2f')} | "
                               f"{fmt(red / fl if red and fl else None, '.2f')} |")
            out.append("")
    return out


def plot(rows, batch, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    ok = [r for r in rows if r.get("status") == "ok"]
    models = [m for m in ("cnn", "mlp") if any(r["model"] == m for r in ok)]
    rates = rate_order({r["rate"] for r in ok})
    if not models or not rates:
        return
    series = [("ceiling (no comm.)", lambda r: r["system"] == "budget", "ceiling_samples_per_s")]
    for c in ("none", "fp16"):
        series.append((f"DDP gloo {c}", lambda r, c=c: r["system"] == "ddp" and r["compression"] == c,
                       "samples_per_s"))
    for c in ("none", "fp16", "bf16", "topk"):
        series.append((f"dtrain {c} (best policy/overlap/bucket)",
                       lambda r, c=c: r["system"] == "dtrain" and r["compression"] == c, "samples_per_s"))
    fig, axes = plt.subplots(1, len(models), figsize=(6 * len(models), 4.5), squeeze=False)
    width = 0.8 / len(series)
    for ax, model in zip(axes[0], models):
        for i, (label, pick, key) in enumerate(series):
            ys = []
            for rate in rates:
                rs = [r for r in ok if r["model"] == model and r["rate"] == rate and pick(r)]
                if label.startswith("dtrain"):
                    groups = defaultdict(list)
                    for r in rs:
                        groups[(r["policy"], r["overlap"], r.get("bucket_kib"))].append(r[key])
                    ys.append(max((med(v) for v in groups.values()), default=0) or 0)
                else:
                    ys.append(med([r.get(key) for r in rs]) or 0)
            ax.bar([j + (i - len(series) / 2 + 0.5) * width for j in range(len(rates))], ys, width, label=label)
        ax.set_xticks(range(len(rates)))
        ax.set_xticklabels(rates)
        ax.set_title(f"{model.upper()}, 2 hosts x 1 rank, batch {batch}/rank")
        ax.set_xlabel("link rate (tc tbf)")
        ax.set_ylabel("samples/s (median over rounds)")
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("raw")
    ap.add_argument("--csv")
    ap.add_argument("--png")
    args = ap.parse_args()
    rows, _, problems, batch = parse(args.raw)
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
            w.writeheader()
            for r in rows:
                w.writerow({k: ("" if r.get(k) is None else (f"{r[k]:.6g}" if isinstance(r[k], float) else r[k]))
                            for k in COLUMNS})
    print("\n".join(summarize(rows, batch)))
    if problems:
        print("Failures and skipped sessions:")
        for p in problems:
            print("  " + p)
    else:
        print("No failed launch, no timeout, no skipped session.")
    if args.png:
        try:
            plot(rows, batch, args.png)
            print(f"plot: {args.png}")
        except ImportError as e:
            print(f"no plot ({e})", file=sys.stderr)


if __name__ == "__main__":
    main()
