#!/usr/bin/env bash
# One-rank overhead of DistOptimizer<Collective, SGD<float>> (default options) over the bare SGD training
# loop, for the MLP and the CNN, measured two ways (see benchmarks/train_dist/README.md):
#
#  1. Instruction counts (deterministic): `bench_train_dist --overhead-count` under valgrind's callgrind runs
#     W warm-up steps of each loop, then N bare steps in overhead_count_bare_loop() and N DistOptimizer
#     steps in overhead_count_dist_loop(); the INCLUSIVE Ir (instructions executed) of the two functions
#     (callgrind_annotate --inclusive=yes) give the ratio dist / bare. Instructions are a proxy for time,
#     not time: they ignore cache misses, branch mispredictions, contention and instruction costs.
#  2. Wall time (noisy): `bench_train_dist --overhead`, P pairs of S bare / S DistOptimizer steps (which
#     runs first alternates every pair) in K rounds, each with freshly built models whose two memory slots
#     swap roles every round; the placement-balanced median of the per-pair ratios dist / bare with a
#     bootstrap 95% confidence interval (target shown if its upper end is <= 1.01). Then the same with
#     --control (a second bare loop instead of DistOptimizer: A/A test of the harness; its interval should
#     contain 1).
#
# Usage: benchmarks/train_dist/overhead.sh <build-dir> [output-file]
#   output-file: where the raw output goes as well as stdout (default: overhead_raw.txt)
# Environment (defaults in brackets):
#   MODELS ["mlp cnn"]  COUNT=0 skips the callgrind part, TIMING=0 the timing part, CONTROL=0 the A/A runs
#   COUNT_WARMUP [1]  COUNT_STEPS_MLP [10]  COUNT_STEPS_CNN [2]     (callgrind: ~2 + ~3 min)
#   PAIRS_MLP [1700]  STEPS_MLP [10]  PAIRS_CNN [600]  STEPS_CNN [3]  ROUNDS [20]  (timing: ~1.5 min per run)
#   MPIEXEC [mpiexec.mpich]  VALGRIND [valgrind]  CG_DIR [a new temporary directory, removed at the end]
set -euo pipefail

usage() {
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
    exit "${1:-2}"
}
if [ $# -lt 1 ] || [ $# -gt 2 ]; then usage 2; fi
case "$1" in -h | --help) usage 0 ;; esac
BIN="$1/benchmarks/train_dist/bench_train_dist"
[ -x "$BIN" ] || {
    echo "overhead.sh: $BIN not found; build it with: cmake --build $1 --target bench_train_dist" >&2
    exit 2
}
OUT="${2:-overhead_raw.txt}"
MODELS="${MODELS:-mlp cnn}"
MPIEXEC="${MPIEXEC:-mpiexec.mpich}"
VALGRIND="${VALGRIND:-valgrind}"
export OPENBLAS_NUM_THREADS=1
if [ "${COUNT:-1}" != 0 ]; then
    if ! command -v "$VALGRIND" > /dev/null || ! command -v callgrind_annotate > /dev/null; then
        echo "overhead.sh: needs valgrind and callgrind_annotate (apt-get install valgrind), or COUNT=0" >&2
        exit 2
    fi
fi
if [ -z "${CG_DIR:-}" ]; then
    CG_DIR="$(mktemp -d)"
    trap 'rm -rf "$CG_DIR"' EXIT
fi
mkdir -p "$CG_DIR"
: > "$OUT"

log() { printf '%s\n' "$*" | tee -a "$OUT"; }
# Prints and runs a command, appending its stdout to $OUT.
run() {
    log "\$ OPENBLAS_NUM_THREADS=1 $(printf '%q ' "$@")"
    "$@" | tee -a "$OUT"
}
# Inclusive Ir of the function whose name contains $2 in callgrind output file $1.
inclusive_ir() {
    callgrind_annotate --inclusive=yes --threshold=100 "$1" | grep -F "$2" | head -n 1 |
        awk '{ gsub(",", "", $1); print $1 }'
}
# The call-tree entries (function, then its callees with their inclusive Ir) of the functions matching the
# extended regex $2 in callgrind output file $1, with C++ names shortened.
call_tree() {
    callgrind_annotate --inclusive=yes --tree=calling --threshold=100 "$1" |
        awk -v re="$2" '/%\) +\* / { show = ($0 ~ re) } show && /%\) +[*>] /' |
        sed -E -e 's/ \[[^]]*\]$//; s/\(anonymous namespace\):://g; s/\?\?\?://' \
            -e 's/xt::xarray_container<xt::uvector<float, std::allocator<float> >, //g' \
            -e 's/\(xt::layout_type\)1, //g' \
            -e 's/xt::svector<unsigned long, 4ul, std::allocator<unsigned long>, true>, //g' \
            -e 's/xt::xtensor_expression_tag>/Tensor/g' |
        cut -c1-200
}

rev="$(git -C "$(dirname "$0")" rev-parse --short HEAD 2> /dev/null || echo '?')"
git -C "$(dirname "$0")" diff --quiet HEAD 2> /dev/null || rev="$rev (with uncommitted changes)"
log "# overhead.sh $* -- $(date -u '+%Y-%m-%d %H:%M:%S UTC'), git $rev"
log "# $(uname -n), nproc $(nproc), uptime:$(uptime)"

# The functions whose callees the call trees show.
TREE_RE='overhead_count_(bare|dist)_loop|DistOptimizer<.*>::step[(][)]'
TREE_RE+='|_M_invoke.*DistOptimizer|Model<float>::backward'
summary=()
if [ "${COUNT:-1}" != 0 ]; then
    log ""
    log "## 1. callgrind instruction counts (one rank, singleton MPI: the binary runs without mpiexec)"
    for model in $MODELS; do
        if [ "$model" = cnn ]; then steps="${COUNT_STEPS_CNN:-2}"; else steps="${COUNT_STEPS_MLP:-10}"; fi
        warmup="${COUNT_WARMUP:-1}"
        cg="$CG_DIR/callgrind.$model.out"
        log "# start $(date -u +%H:%M:%S), uptime:$(uptime)"
        run "$VALGRIND" --tool=callgrind --toggle-collect='*overhead_count_*_loop*' \
            --callgrind-out-file="$cg" "$BIN" --model "$model" --overhead-count --steps "$steps" \
            --warmup "$warmup" 2> "$CG_DIR/valgrind.$model.log"
        grep -E '^==[0-9]+== (Collected|I +refs)' "$CG_DIR/valgrind.$model.log" | tee -a "$OUT" || true
        log "\$ callgrind_annotate --inclusive=yes $(basename "$cg") | grep overhead_count_"
        bare=$(inclusive_ir "$cg" overhead_count_bare_loop)
        dist=$(inclusive_ir "$cg" overhead_count_dist_loop)
        if [ -z "$bare" ] || [ -z "$dist" ]; then
            echo "overhead.sh: overhead_count_*_loop not found in $cg" >&2
            exit 1
        fi
        line=$(awk -v m="$model" -v n="$steps" -v b="$bare" -v d="$dist" 'BEGIN {
            printf "callgrind %s steps=%d bare_Ir=%.0f dist_Ir=%.0f ", m, n, b, d
            printf "bare_Ir_per_step=%.0f dist_Ir_per_step=%.0f ", b / n, d / n
            printf "extra_Ir_per_step=%.0f ", (d - b) / n
            printf "ratio=%.7f overhead_pct=%.5f", d / b, 100 * (d / b - 1) }')
        log "$line"
        summary+=("$line")
        log "# call trees (inclusive Ir collected inside the two loops only, i.e. over $steps steps of each;"
        log "# the call counts (Nx) of functions also called outside the loops include the warm-up steps):"
        call_tree "$cg" "$TREE_RE" | tee -a "$OUT"
    done
fi

if [ "${TIMING:-1}" != 0 ]; then
    log ""
    log "## 2. wall time: alternating pairs, placement-balanced median ratio with a bootstrap 95% interval"
    for model in $MODELS; do
        if [ "$model" = cnn ]; then
            pairs="${PAIRS_CNN:-600}" steps="${STEPS_CNN:-3}"
        else
            pairs="${PAIRS_MLP:-1700}" steps="${STEPS_MLP:-10}"
        fi
        variants=("")
        [ "${CONTROL:-1}" = 0 ] || variants+=("--control")
        for variant in "${variants[@]}"; do
            log "# start $(date -u +%H:%M:%S), uptime:$(uptime)"
            # shellcheck disable=SC2086  # $variant is empty or one flag
            run "$MPIEXEC" -n 1 "$BIN" --model "$model" --overhead $variant --steps "$steps" --reps "$pairs" \
                --rounds "${ROUNDS:-20}"
            log "# end $(date -u +%H:%M:%S), uptime:$(uptime)"
            summary+=("$(grep -E "^overhead(_control)? $model " "$OUT" | tail -n 1 | cut -d' ' -f1-15)")
        done
    done
fi

log ""
log "## summary"
for line in "${summary[@]}"; do
    log "$line"
done
