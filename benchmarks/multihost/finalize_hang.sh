#!/usr/bin/env bash
# How often a program's end hangs across simulated hosts, and how its runs end: MPICH 4.0.2 + UCX over TCP
# hangs in MPI_Finalize in some runs (UCX issue 8738, see scripts/cluster.sh). Brings up HOSTS hosts (one
# cluster for all runs) and starts the program RUNS times, each run bounded by `cluster.sh run --timeout
# BOUND` (hydra's MPIEXEC_TIMEOUT, Open MPI's --timeout, then `timeout`); what the job leaves in the hosts
# is killed after each run.
#
# Usage: sudo benchmarks/multihost/finalize_hang.sh [--runs N] [--bound S] [--hosts H] [--expect REGEX]
#                                                   [--label TEXT] -- BIN [ARGS...]
#   N runs (default 50), bound S seconds (default 30), H hosts (default 2); REGEX (extended, default
#   "training accuracy") is the program's result line. Settings to try go to every rank through
#   DTRAIN_CLUSTER_ENV, e.g. DTRAIN_CLUSTER_ENV="UCX_TCP_PUT_ENABLE=n" or "DTRAIN_FINALIZE_TIMEOUT=5".
#   Example (the figures in README.md, "Ends of MPICH jobs"):
#     sudo benchmarks/multihost/finalize_hang.sh -- build/examples/quickstart/quickstart data/iris.csv
# Prints a line per run ("run I: status S after T s, result yes|no") and a summary:
#   "finalize_hang: LABEL: N runs on H hosts: E ended by themselves (within T s; with the result: R; exit
#    codes ...), K stopped at the bound of S s (with the result: R)", the CPU model and the date.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=../../scripts/cluster.sh
. "$here/../../scripts/cluster.sh"
runs=50 limit=30 hosts=2 expect="training accuracy" label=""
while [ $# -gt 0 ] && [ "$1" != -- ]; do
    case "$1" in
        --runs) runs=${2:?--runs needs a number}; shift 2 ;;
        --bound) limit=${2:?--bound needs seconds}; shift 2 ;;
        --hosts) hosts=${2:?--hosts needs a number}; shift 2 ;;
        --expect) expect=${2:?--expect needs a regular expression}; shift 2 ;;
        --label) label=${2:?--label needs a text}; shift 2 ;;
        *) echo "finalize_hang: unknown option '$1'" >&2; exit 2 ;;
    esac
done
[ "${1:-}" = -- ] && [ $# -ge 2 ] || { sed -n '8,13p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
shift
[[ "$runs" =~ ^[0-9]+$ ]] && [ "$runs" -ge 1 ] || { echo "finalize_hang: --runs must be >= 1, got '$runs'" >&2; exit 2; }
[[ "$limit" =~ ^[0-9]+$ ]] && [ "$limit" -ge 1 ] || {
    echo "finalize_hang: --bound must be whole seconds >= 1, got '$limit'" >&2
    exit 2
}
[ "$(id -u)" = 0 ] || { echo "finalize_hang: needs root (network namespaces)" >&2; exit 2; }
[ -x "$1" ] || { echo "finalize_hang: $1 is not an executable (build it first)" >&2; exit 2; }
[ -n "$label" ] || label="$(basename "$1") ${DTRAIN_CLUSTER_ENV:-(no extra settings)}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cluster_session finalize_hang 900
"$CLUSTER_SH" up "$hosts" --rate 10gbit --no-check 9>&-

out=$(mktemp)
trap 'cluster_clear >&2; rm -f "$out"' EXIT
ended=0 ended_result=0 stopped=0 stopped_result=0 slowest=0 codes=""
for i in $(seq "$runs"); do
    start=$(date +%s.%N)
    status=0
    "$CLUSTER_SH" run --timeout "$limit" -- "$@" < /dev/null > "$out" 2>&1 9>&- || status=$?
    t=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    result=no
    if grep -Eq -- "$expect" "$out"; then result=yes; fi
    echo "run $i: status $status after $t s, result $result"
    # what a run that hung or failed said about it
    [ "$status" = 0 ] || grep -E "dtrain|timeout|TIMED OUT|killing|BAD TERMINATION" "$out" | head -n 5 | sed 's/^/    /' || true
    if awk -v t="$t" -v b="$limit" 'BEGIN { exit !(t >= b) }'; then
        stopped=$((stopped + 1))
        [ $result = no ] || stopped_result=$((stopped_result + 1))
    else
        ended=$((ended + 1))
        [ $result = no ] || ended_result=$((ended_result + 1))
        slowest=$(awk -v a="$slowest" -v b="$t" 'BEGIN { print (b > a ? b : a) }')
        codes="$codes $status"
    fi
done
codes=$(tr ' ' '\n' <<< "$codes" | sed '/^$/d' | sort -n | uniq -c | awk '{printf "%s%s x%s", (NR > 1 ? ", " : ""), $2, $1}')
echo "finalize_hang: $label: $runs runs on $hosts hosts: $ended ended by themselves (within $slowest s;" \
    "with the result: $ended_result; exit codes ${codes:-none}), $stopped stopped at the bound of $limit s" \
    "(with the result: $stopped_result)"
echo "finalize_hang: CPU $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs; $(date -u '+%Y-%m-%d %H:%M UTC')"
