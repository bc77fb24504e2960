#!/usr/bin/env bash
# Runs bench_async over policies, rank counts and staleness bounds, REPS times each, and writes
#   <out>/raw.txt      every "result" line
#   <out>/summary.csv  medians per configuration
#   <out>/async_bench.png  samples/s and test accuracy versus number of workers (gnuplot)
# Usage: benchmarks/async/run_async_bench.sh <build-dir> [out-dir] [reps] [extra bench_async args...]
set -euo pipefail
build=${1:?usage: run_async_bench.sh <build-dir> [out-dir] [reps] [args...]}
out=${2:-async_bench_out}
reps=${3:-3}
shift $(( $# < 3 ? $# : 3 ))
bench=$build/benchmarks/async/bench_async
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
: > "$out/raw.txt"
export OPENBLAS_NUM_THREADS=1
run() {  # ranks, args...
    local n=$1; shift
    mpiexec.mpich -n "$n" "$bench" "$@" | grep '^result' | tee -a "$out/raw.txt"
}
for rep in $(seq 1 "$reps"); do
    for n in 1 2 3 4; do
        run "$n" --policy collective "$@"
        run "$n" --policy ring "$@"
    done
    for s in 0 4 inf; do
        for n in 2 3 4 5; do run "$n" --policy async --masters 1 --staleness "$s" "$@"; done
        for n in 3 4 5; do run "$n" --policy async --masters 2 --staleness "$s" "$@"; done
    done
done
python3 "$here/summarize.py" "$out/raw.txt" > "$out/summary.csv"
gnuplot -e "summary='$out/summary.csv'; output='$out/async_bench.png'" "$here/plot.gp"
echo "wrote $out/summary.csv and $out/async_bench.png"
