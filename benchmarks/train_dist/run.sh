#!/usr/bin/env bash
# Runs the DistOptimizer throughput matrix in interleaved rounds (1 rank, then 2 ranks, per model and round)
# so both process counts see the same machine noise, then the one-rank overhead measurement, and prints the
# summary (summarize.py). Raw lines go to $OUT (default train_dist_raw.txt).
#
# Usage: benchmarks/train_dist/run.sh <build-dir> [rounds=5]
set -euo pipefail
BIN="$1/benchmarks/train_dist/bench_train_dist"
ROUNDS="${2:-5}"
OUT="${OUT:-train_dist_raw.txt}"
export OPENBLAS_NUM_THREADS=1
MPIEXEC="${MPIEXEC:-mpiexec.mpich}"
: > "$OUT"
for round in $(seq "$ROUNDS"); do
    for model in mlp cnn; do
        if [ "$model" = cnn ]; then steps=15; else steps=40; fi
        for np in 1 2; do
            "$MPIEXEC" -n "$np" "$BIN" --model "$model" --steps "$steps" --reps 3 --bucket-bytes 0 \
                | sed "s/^/round=$round /" | tee -a "$OUT"
        done
    done
    "$MPIEXEC" -n 1 "$BIN" --model mlp --overhead --steps 10 --reps 21 | sed "s/^/round=$round /" | tee -a "$OUT"
done
python3 "$(dirname "$0")/summarize.py" "$OUT"
