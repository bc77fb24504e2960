#!/usr/bin/env python3
"""Summarises bench_train_dist output (as written by run.sh): per model, policy and overlap setting the
median over rounds of the per-run median samples/s at 1 and 2 ranks, the scaling efficiency
median(2 ranks) / (2 x median(1 rank)), the spread of the per-round efficiencies, and the one-rank
DistOptimizer/bare-optimizer time ratio (older raw files).

A second table divides each 2-rank rate by the median of ALL 1-rank runs of the same model in the same
round: at one rank every policy and overlap setting does the same work (DistOptimizer communicates nothing),
so pooling them removes the noise of a single 1-rank run from the denominator."""
import re
import statistics
import sys
from collections import defaultdict


def main(path):
    rates = defaultdict(dict)  # (model, policy, overlap) -> {(round, ranks): samples/s}
    step_ms = defaultdict(list)
    ratios = []
    for line in open(path):
        kv = dict(re.findall(r"(\w+)=([^\s]+)", line))
        words = line.split()
        if len(words) > 3 and words[1] == "result":
            key = (words[2], words[3], kv["overlap"])
            rates[key][(kv["round"], int(kv["ranks"]))] = float(kv["median"])
            step_ms[key + (int(kv["ranks"]),)].append(float(kv["step_ms"]))
        elif len(words) > 2 and words[1] == "overhead":
            ratios.append(float(kv["ratio_median"]))
    print("| model | policy | overlap | 1 rank samples/s | 2 ranks samples/s | efficiency | per-round efficiency min-max | step() ms at 2 ranks |")
    print("|---|---|---|---|---|---|---|---|")
    for key in sorted(rates):
        r = rates[key]
        one = [v for (rd, n), v in r.items() if n == 1]
        two = [v for (rd, n), v in r.items() if n == 2]
        if not one or not two:
            continue
        eff = statistics.median(two) / (2 * statistics.median(one))
        per_round = [r[(rd, 2)] / (2 * r[(rd, 1)]) for (rd, n) in r if n == 1 and (rd, 2) in r]
        print(f"| {key[0]} | {key[1]} | {key[2]} | {statistics.median(one):.0f} | {statistics.median(two):.0f} "
              f"| {eff:.3f} | {min(per_round):.2f}-{max(per_round):.2f} (n={len(per_round)}) "
              f"| {statistics.median(step_ms[key + (2,)]):.2f} |")
    one_pool = defaultdict(list)  # (model, round) -> every 1-rank rate of that round
    for key, r in rates.items():
        for (rd, n), v in r.items():
            if n == 1:
                one_pool[(key[0], rd)].append(v)
    print("\n| model | policy | overlap | 2 ranks samples/s | efficiency vs pooled 1-rank rate of the round (median) | per round |")
    print("|---|---|---|---|---|---|")
    for key in sorted(rates):
        r = rates[key]
        effs = sorted(v / (2 * statistics.median(one_pool[(key[0], rd)])) for (rd, n), v in r.items()
                      if n == 2 and one_pool[(key[0], rd)])
        if not effs:
            continue
        two = [v for (rd, n), v in r.items() if n == 2]
        print(f"| {key[0]} | {key[1]} | {key[2]} | {statistics.median(two):.0f} | {statistics.median(effs):.3f} "
              f"| {' '.join(f'{e:.2f}' for e in effs)} |")
    if ratios:
        print(f"\none-rank time ratio DistOptimizer/bare: median {statistics.median(ratios):.4f} over "
              f"{len(ratios)} runs (per-run medians {', '.join(f'{x:.3f}' for x in ratios)})")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "train_dist_raw.txt")
