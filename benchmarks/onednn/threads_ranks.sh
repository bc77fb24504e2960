#!/usr/bin/env bash
# Threads within a rank against ranks on this machine's two cores: the native kernels' steps on 1 and 2
# threads (bench_kernel_sets, milliseconds per step at batch 64), then data-parallel training of the SINGA
# CNN and the MLP at a global batch of 64 with Collective and overlap as 1 rank x 1 thread, 1 rank x 2
# threads and 2 ranks x 1 thread (bench_train_dist: samples/s; maxrss_kb, the peak memory of the largest rank,
# from GNU time).
# RUNS repetitions of everything, interleaved; prints the raw lines (benchmarks/onednn/README.md has the
# ranges).
# Usage: benchmarks/onednn/threads_ranks.sh <build dir> [RUNS=3]
set -euo pipefail
build=${1:?usage: threads_ranks.sh <build dir> [runs]}
runs=${2:-3}
ks=$build/benchmarks/onednn/bench_kernel_sets
td=$build/benchmarks/train_dist/bench_train_dist
for b in "$ks" "$td"; do
  [ -x "$b" ] || { echo "threads_ranks.sh: $b not built" >&2; exit 2; }
done
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 DTRAIN_KERNELS=native
echo "# $(lscpu | sed -n 's/^Model name: *//p'), $(getconf _NPROCESSORS_ONLN) cores, $(date -u +%F)"
for r in $(seq "$runs"); do
  DTRAIN_THREADS=1 "$ks" native
  DTRAIN_THREADS=2 "$ks" native_t2
  for m in cnn mlp; do
    for cfg in "1 1 64" "1 2 64" "2 1 32"; do
      read -r ranks threads batch <<< "$cfg"
      out=$(DTRAIN_THREADS=$threads /usr/bin/time -f "maxrss_kb=%M" mpiexec.mpich -n "$ranks" "$td" \
        --model "$m" --policies collective --overlap 1 --batch "$batch" --steps 40 --reps 3 2>&1)
      echo "$m ${ranks}x${threads} native b$batch: $(grep '^result' <<< "$out") $(grep '^maxrss_kb=' <<< "$out")"
    done
  done
done
