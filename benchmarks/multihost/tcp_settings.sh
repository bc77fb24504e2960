#!/usr/bin/env bash
# Open MPI's TCP settings against the all-reduce over the simulated link ("find out why the
# all-reduce over TCP takes 2.6-3.2x its wire time ... find the settings"). A 2-host cluster per link rate
# (scripts/cluster.sh up 2 --pin, achieved bulk rate measured), then per round, every setting in SETTINGS
# in an order reversed every other round: allreduce_bench (Collective = Open MPI's MPI_Allreduce, and Ring)
# on 2 MiB and 8 MiB. Prints per rate, setting, algorithm and size the median time over rounds, the time
# over the wire floor at the nominal rate (bytes each rank sends / rate) and at the achieved rate.
#
# Usage: sudo benchmarks/multihost/tcp_settings.sh [build-dir]   (an Open MPI build with allreduce_bench;
#   default build-openmpi)
# Environment: RATES ["10gbit"]  ROUNDS [5]  OUT [benchmarks/multihost/results/tcp_settings.txt]
#   SETTINGS: ";"-separated, each a space-separated list of Open MPI MCA variables (passed to every rank
#   as OMPI_MCA_<name>=<value>), "default" for none.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cluster="$root/scripts/cluster.sh"
BUILD=${1:-$root/build-openmpi}
BIN="$BUILD/benchmarks/allreduce/allreduce_bench"
RATES=${RATES:-10gbit}
ROUNDS=${ROUNDS:-5}
OUT=${OUT:-$here/results/tcp_settings.txt}
SETTINGS=${SETTINGS:-"default;btl_tcp_links=2;btl_tcp_sndbuf=4194304 btl_tcp_rcvbuf=4194304;\
btl_tcp_eager_limit=524288 btl_tcp_rndv_eager_limit=524288 btl_tcp_max_send_size=524288;btl_tcp_progress_thread=1"}

# shellcheck source-path=SCRIPTDIR source=../../scripts/cluster.sh
. "$cluster"
cluster_openmpi_bench tcp_settings.sh "$BIN" allreduce_bench
# The "default" setting is Open MPI's own: not cluster.sh run's eager limit.
export DTRAIN_CLUSTER_EAGER=default

raw=$(mktemp)
IFS=';' read -r -a settings <<< "$SETTINGS"
mkdir -p "$(dirname "$OUT")"
{
    echo "# CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores;" \
        "kernel $(uname -r); $(mpiexec.openmpi --version | head -1)"
    echo "# command: RATES=\"$RATES\" ROUNDS=$ROUNDS benchmarks/multihost/tcp_settings.sh $BUILD"
} > "$OUT"
for rate in $RATES; do
    up=$("$cluster" up 2 --rate "$rate" --pin 9>&- 2>&1)
    gbit=$(cluster_achieved_gbit "$up")
    for round in $(seq "$ROUNDS"); do
        order=$(seq 0 $((${#settings[@]} - 1)))
        [ $((round % 2)) = 1 ] || order=$(echo "$order" | tac)
        for i in $order; do
            env_vars=""
            for kv in ${settings[$i]}; do
                [ "$kv" = default ] || env_vars+=" OMPI_MCA_$kv"
            done
            csv=$(mktemp)
            DTRAIN_CLUSTER_ENV="OPENBLAS_NUM_THREADS=1$env_vars" timeout -k 10 300 "$cluster" run -- "$BIN" \
                --min-bytes 2097152 --max-bytes 8388608 --factor 4 --rounds 3 --algos collective,ring \
                --csv "$csv" 9>&- > "$csv.log" 2>&1 ||
                { echo "tcp_settings.sh: round $round '${settings[$i]}' failed:" >&2; tail -5 "$csv.log" >&2; }
            rm -f "$csv.log"
            tail -n +2 "$csv" | sed "s|^|$rate,$gbit,${settings[$i]},$round,|" >> "$raw"
            rm -f "$csv"
        done
    done
    "$cluster" down > /dev/null
done
python3 - "$raw" "$here" >> "$OUT" << 'EOF'
import csv, statistics, sys
sys.path.insert(0, sys.argv[2])
from summarize import floor_ms  # the wire floor of the multihost benchmark
rows = {}
gbits = {}
for r in csv.reader(open(sys.argv[1])):
    rate, gbit, setting, _, algo, ranks, nbytes, _, _, median_us = r[:10]
    gbits[rate] = gbit
    rows.setdefault((rate, setting, algo, int(nbytes)), []).append(float(median_us))
print("| rate | achieved Gbit/s | setting | algorithm | bytes | median ms | / nominal floor | / achieved floor | rounds |")
print("|---|---:|---|---|---:|---:|---:|---:|---:|")
for (rate, setting, algo, nbytes), t in sorted(rows.items()):
    ms = statistics.median(t) / 1e3
    floor_nom = floor_ms(nbytes, 2, rate)
    got = float(gbits[rate]) if gbits[rate] else float("nan")
    floor_got = floor_ms(nbytes, 2, f"{got}gbit") or float("nan")
    print(f"| {rate} | {got:.2f} | {setting} | {algo} | {nbytes} | {ms:.3f} | {ms / floor_nom:.2f} | "
          f"{ms / floor_got:.2f} | {len(t)} |")
EOF
rm -f "$raw"
cat "$OUT"
