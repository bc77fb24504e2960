#!/usr/bin/env bash
# Speed of two revisions of dtrain side by side in one run (the architecture issue's "no speed change"):
#
#  1. One rank: overhead.sh (callgrind instruction counts of a bare loop vs DistOptimizer, then the timed
#     alternating pairs) for the bench_train_dist of each revision, one revision after the other.
#  2. Two ranks: ROUNDS interleaved rounds; in each, bench_train_dist of BEFORE and of AFTER (which goes
#     first alternates every round) trains the MLP and the CNN with Collective and Ring, overlap off and on.
#     Per configuration and round the ratio AFTER / BEFORE of the median samples/s; the summary gives the
#     median and the range of the per-round ratios.
#
# Each revision is checked out into a temporary git worktree and only bench_train_dist is built (Release,
# MPICH); the worktrees are removed at the end, also on failure or Ctrl-C.
#
# Usage: benchmarks/train_dist/compare_revisions.sh <before-rev> [after-rev] [output-file]
#   after-rev    default HEAD; "WORKTREE" measures the current checkout with its uncommitted changes
#   output-file  raw output as well as stdout (default: compare_revisions_raw.txt)
# Environment: ROUNDS [7]  MODELS ["mlp cnn"]  COUNT=0 skips callgrind, ONE_RANK=0 skips part 1,
#   PAIRS_MLP [600] PAIRS_CNN [200] ROUNDS_1 [8] (part 1 timing, passed to overhead.sh as PAIRS_*/ROUNDS)
#   MPIEXEC [mpiexec.mpich]  JOBS [nproc]
set -euo pipefail

usage() {
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
    exit "${1:-2}"
}
if [ $# -lt 1 ] || [ $# -gt 3 ]; then usage 2; fi
case "$1" in -h | --help) usage 0 ;; esac
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(git -C "$HERE" rev-parse --show-toplevel)"
BEFORE="$1"
AFTER="${2:-HEAD}"
OUT="${3:-compare_revisions_raw.txt}"
ROUNDS="${ROUNDS:-7}"
MODELS="${MODELS:-mlp cnn}"
MPIEXEC="${MPIEXEC:-mpiexec.mpich}"
JOBS="${JOBS:-$(nproc)}"
export OPENBLAS_NUM_THREADS=1

TMP="$(mktemp -d)"
cleanup() {
    for d in "$TMP"/src-*; do
        [ -d "$d" ] && git -C "$REPO" worktree remove --force "$d" 2> /dev/null || true
    done
    rm -rf "$TMP"
}
trap cleanup EXIT
: > "$OUT"
log() { printf '%s\n' "$*" | tee -a "$OUT"; }

# Builds bench_train_dist of revision $1 under $TMP/<label $2>; prints the binary's path.
build_rev() {
    local rev=$1 label=$2 src
    if [ "$rev" = WORKTREE ]; then
        src="$REPO"
    else
        src="$TMP/src-$label"
        git -C "$REPO" worktree add --detach -q "$src" "$rev"
    fi
    cmake -S "$src" -B "$TMP/build-$label" -DCMAKE_BUILD_TYPE=Release -DDTRAIN_BUILD_TESTS=OFF \
        -DDTRAIN_BUILD_EXAMPLES=OFF -DDTRAIN_BUILD_BENCHMARKS=ON -DMPI_CXX_COMPILER=/usr/bin/mpicxx.mpich \
        -DMPIEXEC_EXECUTABLE=/usr/bin/mpiexec.mpich > "$TMP/configure-$label.log" 2>&1 ||
        { cat "$TMP/configure-$label.log" >&2; exit 1; }
    cmake --build "$TMP/build-$label" -j"$JOBS" --target bench_train_dist > "$TMP/build-$label.log" 2>&1 ||
        { tail -40 "$TMP/build-$label.log" >&2; exit 1; }
}

describe() {
    if [ "$1" = WORKTREE ]; then
        echo "working tree ($(git -C "$REPO" rev-parse --short HEAD) + uncommitted changes)"
    else
        git -C "$REPO" log -1 --format='%h %ad %s' --date=short "$1" | cut -c1-100
    fi
}
log "# compare_revisions.sh $* -- $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
log "# before: $(describe "$BEFORE")"
log "# after:  $(describe "$AFTER")"
log "# $(uname -n), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), nproc $(nproc)"
build_rev "$BEFORE" before
build_rev "$AFTER" after
log "# built bench_train_dist of both revisions, $(date -u +%H:%M:%S)"

if [ "${ONE_RANK:-1}" != 0 ]; then
    for label in before after; do
        log ""
        log "## 1. one rank, $label: overhead.sh"
        MODELS="$MODELS" COUNT="${COUNT:-1}" CONTROL=0 PAIRS_MLP="${PAIRS_MLP:-600}" \
            PAIRS_CNN="${PAIRS_CNN:-200}" ROUNDS="${ROUNDS_1:-8}" MPIEXEC="$MPIEXEC" \
            "$HERE/overhead.sh" "$TMP/build-$label" "$TMP/overhead-$label.txt" > /dev/null
        grep -E '^(callgrind|overhead) ' "$TMP/overhead-$label.txt" | awk '!seen[$0]++' | cut -c1-400 | sed "s/^/$label /" |
            tee -a "$OUT"
    done
fi

log ""
log "## 2. two ranks, $ROUNDS interleaved rounds"
for round in $(seq "$ROUNDS"); do
    order="before after"
    if [ $((round % 2)) = 0 ]; then order="after before"; fi
    for label in $order; do
        for model in $MODELS; do
            if [ "$model" = cnn ]; then steps=15; else steps=40; fi
            # shellcheck disable=SC2086 # MPIEXEC may carry options
            $MPIEXEC -n 2 "$TMP/build-$label/benchmarks/train_dist/bench_train_dist" --model "$model" \
                --steps "$steps" --reps 3 --overlap 0,1 --policies collective,ring |
                grep '^result' | sed "s/^/rev=$label round=$round /" | tee -a "$OUT"
        done
    done
done

log ""
log "## summary"
python3 - "$OUT" << 'EOF' | tee -a "$OUT"
import re, statistics, sys
lines = open(sys.argv[1]).read().splitlines()
one = {}
for l in lines:
    m = re.match(r'(before|after) callgrind (\w+) .*?dist_Ir_per_step=(\d+).*?overhead_pct=([-\d.]+)', l)
    if m:
        one.setdefault(m.group(2), {})[m.group(1) + '_ir'] = (int(m.group(3)), float(m.group(4)))
    m = re.match(r'(before|after) overhead (\w+) .*?ratio_balanced=([\d.]+) ci95_lo=([\d.]+) ci95_hi=([\d.]+)', l)
    if m:
        one.setdefault(m.group(2), {})[m.group(1) + '_t'] = tuple(float(x) for x in m.group(3, 4, 5))
if one:
    print("one rank: DistOptimizer vs the bare loop, before -> after")
    for model, d in one.items():
        if 'before_ir' in d and 'after_ir' in d:
            b, a = d['before_ir'], d['after_ir']
            print(f"  {model} instructions per DistOptimizer step: {b[0]} -> {a[0]} (after/before "
                  f"{a[0] / b[0]:.5f}); overhead over bare {b[1]:+.4f}% -> {a[1]:+.4f}%")
        if 'before_t' in d and 'after_t' in d:
            b, a = d['before_t'], d['after_t']
            print(f"  {model} time dist/bare: {b[0]:.4f} [{b[1]:.4f}, {b[2]:.4f}] -> "
                  f"{a[0]:.4f} [{a[1]:.4f}, {a[2]:.4f}] (95% CI)")
runs = {}
for l in lines:
    m = re.match(r'rev=(\w+) round=(\d+) result (\w+) (\w+) overlap=(\d) ranks=2 .*?median=([\d.]+)', l)
    if m:
        rev, rnd, model, pol, ov, med = m.groups()
        runs.setdefault((model, pol, ov), {}).setdefault(int(rnd), {})[rev] = float(med)
if runs:
    print("two ranks: samples/s, median over rounds; ratio = after / before per round")
    print(f"  {'model':5} {'policy':10} {'overlap':7} {'before':>9} {'after':>9} {'ratio':>7}  range")
    for key in sorted(runs):
        rounds = [r for r in runs[key].values() if 'before' in r and 'after' in r]
        ratios = [r['after'] / r['before'] for r in rounds]
        b = statistics.median(r['before'] for r in rounds)
        a = statistics.median(r['after'] for r in rounds)
        print(f"  {key[0]:5} {key[1]:10} {key[2]:7} {b:9.0f} {a:9.0f} {statistics.median(ratios):7.3f}  "
              f"{min(ratios):.3f}-{max(ratios):.3f}")
EOF
