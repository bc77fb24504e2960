#!/usr/bin/env bash
# Open MPI's eager limit against DistOptimizer's overlap over the simulated link (why the MLP ran
# slower with overlap than without). A 2-host cluster (scripts/cluster.sh up 2 --rate RATE --pin), then per
# round, in an order reversed every other round: for each eager setting (DTRAIN_CLUSTER_EAGER: "default" =
# Open MPI's 64 KiB eager / 128 KiB fragments, or a byte count for btl_tcp_eager_limit, rndv_eager_limit and
# max_send_size), model and bucket size, bench_train_dist with every policy, overlap on and off. Prints per
# model, bucket size, policy and overlap the median over rounds of samples/s, the forward+backward time and
# the time in DistOptimizer::step, for each eager setting side by side.
#
# Usage: sudo benchmarks/multihost/eager_ab.sh [build-dir]   (an Open MPI build with bench_train_dist;
#   default build-openmpi)
# Environment: RATE [10gbit]  ROUNDS [3]  EAGERS ["default 1052672"]  BUCKETS ["1048576 524288"]
#   MODELS ["mlp cnn"]  OUT [benchmarks/multihost/results/eager_ab.txt]
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cluster="$root/scripts/cluster.sh"
BUILD=${1:-$root/build-openmpi}
BIN="$BUILD/benchmarks/train_dist/bench_train_dist"
RATE=${RATE:-10gbit}
ROUNDS=${ROUNDS:-3}
EAGERS=${EAGERS:-"default 1052672"}
BUCKETS=${BUCKETS:-"1048576 524288"}
MODELS=${MODELS:-"mlp cnn"}
OUT=${OUT:-$here/results/eager_ab.txt}

# shellcheck source-path=SCRIPTDIR source=../../scripts/cluster.sh
. "$cluster"
cluster_openmpi_bench eager_ab.sh "$BIN" bench_train_dist

raw=$(mktemp)
mkdir -p "$(dirname "$OUT")"
{
    echo "# CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores;" \
        "kernel $(uname -r); $(mpiexec.openmpi --version | head -1); git $(git -C "$root" rev-parse --short HEAD)"
    echo "# command: RATE=$RATE ROUNDS=$ROUNDS EAGERS=\"$EAGERS\" BUCKETS=\"$BUCKETS\" MODELS=\"$MODELS\"" \
        "benchmarks/multihost/eager_ab.sh"
} > "$OUT"
up=$("$cluster" up 2 --rate "$RATE" --pin 9>&- 2>&1) || { echo "eager_ab.sh: cluster.sh up failed: $up" >&2; exit 2; }
echo "# link: $(cluster_achieved_gbit "$up") Gbit/s (bulk TCP)" >> "$OUT"
plan=$(for e in $EAGERS; do for m in $MODELS; do for b in $BUCKETS; do echo "$e $m $b"; done; done; done)
for round in $(seq "$ROUNDS"); do
    p=$plan
    [ $((round % 2)) = 1 ] || p=$(tac <<< "$plan")
    while read -r e m b <&3; do
        steps=60
        [ "$m" != cnn ] || steps=20
        log=$(mktemp)
        DTRAIN_CLUSTER_EAGER=$e DTRAIN_CLUSTER_ENV="OPENBLAS_NUM_THREADS=1" timeout -k 10 300 "$cluster" run -- \
            "$BIN" --model "$m" --policies collective,ring,naive --overlap 0,1 --steps "$steps" --reps 3 \
            --batch 64 --bucket-bytes "$b" < /dev/null 9>&- > "$log" 2>&1 ||
            { echo "eager_ab.sh: round $round eager=$e $m bucket=$b failed:" >&2; tail -5 "$log" >&2; }
        grep '^result' "$log" | sed "s|^|eager=$e round=$round |" >> "$raw" || true
        rm -f "$log"
    done 3<<< "$p"
done
"$cluster" down > /dev/null
python3 - "$raw" "$EAGERS" >> "$OUT" << 'EOF'
import re, statistics, sys
eagers = sys.argv[2].split()
rows = {}
for line in open(sys.argv[1]):
    kv = dict(re.findall(r"(\w+)=(\S+)", line))
    w = line.split()
    key = (w[3], int(kv["bucket_bytes"]) // 1024, w[4], kv["overlap"])
    rows.setdefault(key, {}).setdefault(kv["eager"], []).append(
        (float(kv["median"]), float(kv["backward_ms"]), float(kv["step_ms"])))
med = lambda xs: statistics.median(xs) if xs else float("nan")
head = " | ".join(f"eager {e}: samples/s, fwd+bwd ms, step ms" for e in eagers)
print(f"| model | bucket KiB | policy | overlap | {head} | ratio |")
print("|---|---:|---|---|" + "---|" * len(eagers) + "---:|")
for key in sorted(rows, key=lambda k: (k[0], -k[1], k[2], k[3])):
    cells, sps = [], []
    for e in eagers:
        r = rows[key].get(e, [])
        s = med([x[0] for x in r])
        sps.append(s)
        cells.append(f"{s:.0f}, {med([x[1] for x in r]):.2f}, {med([x[2] for x in r]):.2f} ({len(r)})")
    ratio = sps[-1] / sps[0] if len(sps) > 1 and sps[0] else float("nan")
    print(f"| {key[0]} | {key[1]} | {key[2]} | {'on' if key[3] == '1' else 'off'} | " + " | ".join(cells)
          + f" | {ratio:.2f} |")
EOF
rm -f "$raw"
cat "$OUT"
