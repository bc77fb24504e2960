#!/usr/bin/env python3
"""Medians of bench_async "result" lines per configuration, as CSV (series,workers,ranks,...)."""
import statistics
import sys
from collections import defaultdict

runs = defaultdict(list)
for line in open(sys.argv[1]):
    if not line.startswith("result"):
        continue
    kv = dict(f.split("=", 1) for f in line.split()[1:])
    if kv["policy"] == "async":
        series = f"async M={kv['masters']} s={kv['staleness']}"
    else:
        series = kv["policy"]
    runs[(series, int(kv["workers"]), int(kv["ranks"]))].append(kv)

print("series,workers,ranks,reps,samples_per_s,accuracy,max_staleness,mean_delay,updates")
for (series, workers, ranks), rs in sorted(runs.items()):
    med = lambda k: statistics.median(float(r[k]) for r in rs)
    print(f"{series},{workers},{ranks},{len(rs)},{med('samples_per_s'):.1f},{med('accuracy'):.4f},"
          f"{med('max_staleness'):.0f},{med('mean_delay'):.2f},{med('updates'):.0f}")
