#!/usr/bin/env bash
# Scaling study of data-parallel training: runs the Fashion-MNIST CNN (examples/fashion_mnist_cnn, the
# SINGA tutorial's network) for a fixed number of steps per epoch across batch sizes and rank counts,
# repeats every configuration, and writes a CSV with the median samples/s and a PNG speedup/efficiency plot.
#
# usage: scripts/scaling_study.sh [BUILD_DIR]        (default BUILD_DIR: build)
# environment (defaults in brackets):
#   BATCHES ["32 64 128 256"]  batch sizes per rank      RANKS ["1 2 4"]  rank counts
#   REPS [3]   repetitions      STEPS [8]  steps per epoch  (2 epochs are run; the second is measured)
#   COMM [collective]  communicator    OUT [benchmarks/scaling]  output directory
#   PROGRAM [fashion_mnist_cnn]  or cifar10_cnn (run with --synthetic, needs no data set)
# Rank counts above the number of cores (nproc) are marked oversubscribed in the CSV and the plot.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
BATCHES=${BATCHES:-"32 64 128 256"}
RANKS=${RANKS:-"1 2 4"}
REPS=${REPS:-3}
STEPS=${STEPS:-8}
COMM=${COMM:-collective}
OUT=${OUT:-benchmarks/scaling}
PROGRAM=${PROGRAM:-fashion_mnist_cnn}
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
exe="$BUILD/examples/$PROGRAM/$PROGRAM"
[[ -x "$exe" ]] || { echo "scaling_study.sh: $exe not found; build it first (cmake --build $BUILD --target $PROGRAM)" >&2; exit 2; }
cores=$(nproc)
mkdir -p "$OUT"
csv="$OUT/scaling.csv"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
max_batch=0; max_ranks=0
for b in $BATCHES; do (( b > max_batch )) && max_batch=$b; done
for r in $RANKS; do (( r > max_ranks )) && max_ranks=$r; done
limit=$(( max_batch * max_ranks * STEPS ))
if [[ $PROGRAM == cifar10_cnn ]]; then data_args=(--synthetic --train-limit "$limit" --test-limit 100)
else data_args=(--train-limit "$limit" --test-limit 100); fi

echo "program,comm,ranks,cores,oversubscribed,batch_size,steps,reps,samples_per_s_runs,median_samples_per_s,speedup,efficiency" > "$csv"
# Repetitions are the outer loop, so slow drifts of the machine's load hit every configuration alike.
declare -A runs
for ((i = 1; i <= REPS; i++)); do
  for r in $RANKS; do
    for b in $BATCHES; do
      "$MPIEXEC" -n "$r" "$exe" "${data_args[@]}" --comm "$COMM" --batch-size "$b" --epochs 2 --steps "$STEPS" \
          --eval=false --threads 1 --progress off --log "$tmp/m.csv" > "$tmp/out.txt" 2>&1 \
        || { cat "$tmp/out.txt" >&2; exit 1; }
      v=$(tail -n 1 "$tmp/m.csv" | cut -d, -f7)
      runs[$r,$b]="${runs[$r,$b]:+${runs[$r,$b]};}$v"
      echo "rep $i: $r rank(s), batch $b: $v samples/s"
    done
  done
done
declare -A base
for r in $RANKS; do
  over=0; (( r > cores )) && over=1
  for b in $BATCHES; do
    median=$(tr ';' '\n' <<< "${runs[$r,$b]}" | sort -g |
             awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}')
    [[ $r == 1 ]] && base[$b]=$median
    speedup=""; eff=""
    if [[ -n "${base[$b]:-}" ]]; then
      speedup=$(awk -v m="$median" -v s="${base[$b]}" 'BEGIN {printf "%.3f", m / s}')
      eff=$(awk -v m="$median" -v s="${base[$b]}" -v r="$r" 'BEGIN {printf "%.3f", m / s / r}')
    fi
    echo "$PROGRAM,$COMM,$r,$cores,$over,$b,$STEPS,$REPS,${runs[$r,$b]},$median,$speedup,$eff" | tee -a "$csv"
  done
done
scripts/plot "$csv" -o "$OUT/scaling.png" \
  --title "$PROGRAM, $COMM, $STEPS steps/epoch, median of $REPS runs, $cores cores"
echo "command: BATCHES=\"$BATCHES\" RANKS=\"$RANKS\" REPS=$REPS STEPS=$STEPS COMM=$COMM PROGRAM=$PROGRAM scripts/scaling_study.sh $BUILD"
