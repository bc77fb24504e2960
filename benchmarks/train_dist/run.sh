#!/usr/bin/env bash
# Runs the DistOptimizer throughput matrix in interleaved rounds (1 rank, then 2 ranks, per model and round)
# so both process counts see the same machine noise, and prints the summary (summarize.py). Raw lines go to
# $OUT (default train_dist_raw.txt). The one-rank overhead has its own script, overhead.sh.
#
# Usage: benchmarks/train_dist/run.sh <build-dir> [rounds=5]
# Environment: BUCKET_BYTES (default: SyncOptions' default, 1 MiB; 0 = one bucket per layer),
#              POLICIES (default collective,ring,naive), OVERLAP (default 0,1), MODELS (default "mlp cnn"),
#              MPIEXEC (default mpiexec.mpich; may carry options: MPIEXEC="mpiexec.mpich -bind-to core")
set -euo pipefail
if [ $# -lt 1 ] || [ ! -x "$1/benchmarks/train_dist/bench_train_dist" ]; then
    echo "usage: $0 <build-dir with benchmarks/train_dist/bench_train_dist> [rounds=5]" >&2
    exit 2
fi
BIN="$1/benchmarks/train_dist/bench_train_dist"
ROUNDS="${2:-5}"
OUT="${OUT:-train_dist_raw.txt}"
export OPENBLAS_NUM_THREADS=1
MPIEXEC="${MPIEXEC:-mpiexec.mpich}"
OVERLAP="${OVERLAP:-0,1}"
# Configurations run one after the other in one process; reversing their order every other round cancels
# order effects (in an earlier run the later half of each process ran ~5% slower at 2 ranks).
POLICIES="${POLICIES:-collective,ring,naive}"
reverse() { echo "$1" | tr ',' '\n' | tac | paste -sd, -; }
ARGS=()
if [ -n "${BUCKET_BYTES:-}" ]; then ARGS+=(--bucket-bytes "$BUCKET_BYTES"); fi
: > "$OUT"
for round in $(seq "$ROUNDS"); do
    for model in ${MODELS:-mlp cnn}; do
        if [ "$model" = cnn ]; then steps=15; else steps=40; fi
        for np in 1 2; do
            ov="$OVERLAP" pol="$POLICIES"
            if [ $((round % 2)) = 0 ]; then ov="$(reverse "$OVERLAP")" pol="$(reverse "$POLICIES")"; fi
            # shellcheck disable=SC2086 # MPIEXEC may carry options, e.g. "mpiexec.mpich -bind-to core"
            $MPIEXEC -n "$np" "$BIN" --model "$model" --steps "$steps" --reps 3 --overlap "$ov" --policies "$pol" \
                ${ARGS[@]+"${ARGS[@]}"} \
                | sed "s/^/round=$round /" | tee -a "$OUT"
        done
    done
done
/usr/bin/python3 "$(dirname "$0")/summarize.py" "$OUT"
