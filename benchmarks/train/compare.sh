#!/usr/bin/env bash
# Runs dtrain's and PyTorch's single-thread training throughput side by side, interleaved ROUNDS times,
# and prints the median samples/s of each and their ratio per model.
# Usage: benchmarks/train/compare.sh <path to bench_train_throughput> [ROUNDS=5] [STEPS=100]
set -euo pipefail
bin=${1:?usage: compare.sh <bench_train_throughput> [rounds] [steps]}
rounds=${2:-5}
steps=${3:-100}
here=$(dirname "$0")
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
out=$(mktemp)
for r in $(seq "$rounds"); do
  "$bin" --steps "$steps" --reps 3 | grep -v peak_rss >> "$out"
  /usr/bin/python3 "$here/pytorch_train.py" --steps "$steps" --reps 3 >> "$out"
done
"$bin" --steps "$steps" --reps 1 --models cnn | grep peak_rss | sed 's/^/dtrain cnn /'
/usr/bin/python3 - "$out" <<'PY'
import sys, statistics, collections
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    who, model, rate = line.split()
    d[(who, model)].append(float(rate))
print(f"{'model':6} {'dtrain samples/s':>17} {'pytorch samples/s':>18} {'ratio':>6}")
for model in ("cnn", "mlp"):
    a = statistics.median(d[("dtrain", model)]); b = statistics.median(d[("pytorch", model)])
    print(f"{model:6} {a:17.0f} {b:18.0f} {a / b:6.2f}")
PY
rm -f "$out"
