#!/usr/bin/env bash
# One-thread training and inference steps of several builds of dtrain, side by side: every round runs each
# build's bench_train_throughput once (in the given order in odd rounds, reversed in even ones), every run
# pinned to one core; prints the rounds, then per model and mode the median of the per-round ratios of each
# build to the first.
# Usage: benchmarks/accuracy/step_rounds.sh ROUNDS NAME=BUILD_DIR [NAME=BUILD_DIR ...]
#   e.g. benchmarks/accuracy/step_rounds.sh 11 old=../dtrain-2332473/build new=build
# Environment: CORE (default 0), the core every run is pinned to; MODELS (default resnet9,cnn,mlp).
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 ROUNDS NAME=BUILD_DIR NAME=BUILD_DIR [...]" >&2; exit 2; }
rounds=$1; shift
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "$0: ROUNDS must be a positive whole number, got '$rounds'" >&2; exit 2; }
names=(); dirs=()
for a in "$@"; do
  [[ "$a" == *=* ]] || { echo "$0: expected NAME=BUILD_DIR, got '$a'" >&2; exit 2; }
  names+=("${a%%=*}"); dirs+=("${a#*=}")
  [ -x "${a#*=}/benchmarks/train/bench_train_throughput" ] ||
    { echo "$0: ${a#*=}/benchmarks/train/bench_train_throughput not found (build the target bench_train_throughput)" >&2; exit 2; }
done
export OPENBLAS_NUM_THREADS=1 DTRAIN_THREADS=1
out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "# $(lscpu | sed -n 's/^Model name: *//p'), $(date -u +%F), core ${CORE:-0}; columns: round side dtrain model mode samples/s GFLOP/s fraction-of-sgemm"
for r in $(seq "$rounds"); do
  order=$(seq 0 $((${#names[@]} - 1)))
  [ $((r % 2)) -eq 0 ] && order=$(echo "$order" | tac)
  for i in $order; do
    taskset -c "${CORE:-0}" "${dirs[$i]}/benchmarks/train/bench_train_throughput" --models "${MODELS:-resnet9,cnn,mlp}" \
      --no-gemm --steps 30 --reps 3 2>&1 | grep '^dtrain ' | sed "s/^/round $r ${names[$i]} /" | tee -a "$out"
  done
done
python3 - "$out" "${names[@]}" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
names = sys.argv[2:]
val = {(int(p[1]), p[2], p[4], p[5]): float(p[6]) for p in rows}
keys = sorted({(p[4], p[5]) for p in rows}, key=lambda k: [(p[4], p[5]) for p in rows].index(k))
for model, mode in keys:
    for n in names[1:]:
        rr = sorted(val[(r, n, model, mode)] / val[(r, names[0], model, mode)]
                    for r in {k[0] for k in val} if (r, n, model, mode) in val and (r, names[0], model, mode) in val)
        print(f"{model} {mode} {n}/{names[0]}: median of {len(rr)} per-round ratios {statistics.median(rr):.3f} "
              f"(range {rr[0]:.3f}-{rr[-1]:.3f})")
PY
