#!/usr/bin/env bash
# MPICH's own MPI_Allreduce over the simulated link, beside dtrain's Ring and Naive and beside Open MPI's
# MPI_Allreduce, with the wire floor ("the all-reduce benchmark over the link, with MPICH's own
# MPI_Allreduce beside Ring and the wire floor"). One 2-host cluster (scripts/cluster.sh up 2 --rate RATE
# --pin, achieved bulk rate measured); per launch, alternating MPICH and Open MPI (the order reversed every
# other launch), allreduce_bench with Collective, Ring and Naive, once with a barrier before every call
# (sizes 256 KiB-8 MiB) and once back to back (20 calls after one barrier, 256 KiB-2 MiB).
#
# MPICH 4.0.2 on UCX over TCP hangs in MPI_Finalize in a share of runs (scripts/cluster.sh, "Known
# problems"), after the benchmark has written every result. So every launch runs under `timeout`; a launch
# that did not exit is counted, and its results are used only if its CSV holds every row (the CSV is
# closed before MPI_Finalize). The summary says how many launches of each MPI hung.
#
# Usage: sudo benchmarks/allreduce/link_mpich.sh [MPICH build dir] [Open MPI build dir]
#   (defaults build and build-openmpi, each with allreduce_bench built)
# Environment: RATE [10gbit]  LAUNCHES [3]  TIMEOUT [90] (seconds per launch)
#   OUT [benchmarks/allreduce/allreduce_link10g_mpich.txt]
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cluster="$root/scripts/cluster.sh"
MPICH_BIN=${1:-$root/build}/benchmarks/allreduce/allreduce_bench
OMPI_BIN=${2:-$root/build-openmpi}/benchmarks/allreduce/allreduce_bench
RATE=${RATE:-10gbit}
LAUNCHES=${LAUNCHES:-3}
TIMEOUT=${TIMEOUT:-90}
OUT=${OUT:-$here/allreduce_link10g_mpich.txt}

die() {
    echo "link_mpich.sh: $*" >&2
    exit 2
}
[ "$(id -u)" = 0 ] || die "needs root (network namespaces)"
for b in "$MPICH_BIN" "$OMPI_BIN"; do
    [ -x "$b" ] || die "$b is not built (cmake --build <dir> --target allreduce_bench)"
done
case "$(ldd "$MPICH_BIN" 2> /dev/null || true)" in
    *libmpich*) ;;
    *) die "$MPICH_BIN is not an MPICH build" ;;
esac
case "$(ldd "$OMPI_BIN" 2> /dev/null || true)" in
    *libmpi.so.40*) ;;
    *) die "$OMPI_BIN is not an Open MPI build" ;;
esac
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# shellcheck source-path=SCRIPTDIR source=../../scripts/cluster.sh
. "$cluster"
cluster_session link_mpich.sh 900

# mode name, allreduce_bench arguments, rows the CSV must hold (sizes x 3 algorithms)
modes=("barrier" "back-to-back")
args_barrier="--min-bytes 262144 --max-bytes 8388608 --factor 2 --rounds 5"
args_b2b="--min-bytes 262144 --max-bytes 2097152 --factor 2 --rounds 9 --reps 20 --back-to-back"
rows_barrier=18
rows_b2b=12

raw=$(mktemp)
log=$(mktemp)
up=$("$cluster" up 2 --rate "$RATE" --pin 9>&- 2>&1) || die "cluster.sh up failed: $up"
gbit=$(cluster_achieved_gbit "$up")
mkdir -p "$(dirname "$OUT")"
{
    echo "# CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores;" \
        "kernel $(uname -r); $(mpichversion 2> /dev/null | head -1 | tr -s ' \t' ' ');" \
        "$(mpiexec.openmpi --version | head -1)"
    echo "# command: RATE=$RATE LAUNCHES=$LAUNCHES TIMEOUT=$TIMEOUT benchmarks/allreduce/link_mpich.sh" \
        "$(dirname "$(dirname "$(dirname "$MPICH_BIN")")") $(dirname "$(dirname "$(dirname "$OMPI_BIN")")")"
    echo "# $(echo "$up" | grep -E 'hosts up|achieved' | tr '\n' ' ')"
} > "$OUT"
for launch in $(seq "$LAUNCHES"); do
    order="mpich openmpi"
    [ $((launch % 2)) = 1 ] || order="openmpi mpich"
    for mode in "${modes[@]}"; do
        args=$args_b2b rows=$rows_b2b
        [ "$mode" = barrier ] && args=$args_barrier rows=$rows_barrier
        for mpi in $order; do
            bin=$MPICH_BIN
            [ "$mpi" = openmpi ] && bin=$OMPI_BIN
            csv=$(mktemp)
            rc=0
            # shellcheck disable=SC2086
            DTRAIN_CLUSTER_MPI=$mpi DTRAIN_CLUSTER_ENV="OPENBLAS_NUM_THREADS=1" timeout -k 5 "$TIMEOUT" \
                "$cluster" run -- "$bin" $args --algos collective,ring,naive --csv "$csv" 9>&- > "$log" 2>&1 ||
                rc=$?
            got=$(($(wc -l < "$csv") - 1))
            if [ "$rc" = 0 ]; then
                status=exited
            elif [ "$rc" = 124 ] && [ "$got" = "$rows" ]; then
                status=hung-after-results
            else
                status="failed(rc=$rc,rows=$got)"
                tail -5 "$log" >&2
            fi
            cluster_kill > /dev/null 2>&1 || true
            echo "# launch $launch $mpi $mode: $status" >> "$OUT"
            [ "$got" = "$rows" ] && tail -n +2 "$csv" | sed "s|^|$launch,$mpi,$mode,|" >> "$raw"
            rm -f "$csv"
        done
    done
done
"$cluster" down > /dev/null
{
    header="launch,MPI,mode,algorithm,ranks,bytes,elements,samples,median_us,min_us"
    echo "# raw: $header,algbw_GBps,busbw_GBps,mean_us"
    sed 's/^/# /' "$raw"
} >> "$OUT"
python3 - "$raw" "$RATE" "$gbit" "$root/benchmarks/multihost" >> "$OUT" << 'EOF'
import csv, statistics, sys
raw, rate, gbit = sys.argv[1], sys.argv[2], sys.argv[3] or "nan"
sys.path.insert(0, sys.argv[4])
from summarize import floor_ms  # the wire floor of the multihost benchmark
rows = {}
for r in csv.reader(open(raw)):
    _, mpi, mode, algo, _, nbytes, _, _, median_us = r[:9]
    rows.setdefault((mode, int(nbytes), algo, mpi), []).append(float(median_us))
print("# per launch, allreduce_bench's median (of the slowest rank's time); here the median over launches")
print("| mode | bytes | algorithm | MPI | median ms | / nominal floor | / achieved floor | launches |")
print("|---|---:|---|---|---:|---:|---:|---:|")
for (mode, nbytes, algo, mpi), t in sorted(rows.items()):
    ms = statistics.median(t) / 1e3
    floor_nom = floor_ms(nbytes, 2, rate)
    floor_got = floor_ms(nbytes, 2, f"{gbit}gbit") or float("nan")
    print(f"| {mode} | {nbytes} | {algo} | {mpi} | {ms:.3f} | {ms / floor_nom:.2f} | "
          f"{ms / floor_got:.2f} | {len(t)} |")
EOF
rm -f "$raw" "$log"
cat "$OUT"
