#!/usr/bin/env bash
# A host whose link goes down (multihost.link_down tests, run through run_multihost.sh, which holds the
# cluster lock): brings up HOSTS simulated hosts (scripts/cluster.sh), starts PROGRAM on them (one rank per
# host, `cluster.sh run --timeout BOUND`) with DTRAIN_STALL_TIMEOUT=STALL, and takes host CUT's eth0 down
# (`ip link set eth0 down` in its namespace), as a cable pulled or a switch port lost would:
#   --at training   once PROGRAM prints "link_down_program: training" (every rank has taken a step)
#   --at start      as soon as the launcher's daemon runs on host CUT, before the ranks connect
# It then measures when the program's ranks have all ended and when the launcher ends, prints both, and
# fails unless
#   - every rank ended within STALL + 5 s of the cut (--at training: dtrain's stall watchdog ends the job),
#     or STALL + 10 s (--at start: dtrain bounds MPI_Init_thread by the stall timeout; the ranks may start
#     a few seconds after the cut)
#   - the launcher ended within BOUND + 20 s of the start, and left no daemon behind in any host
#   - (--at training) the output names the unreachable rank, "rank R did not answer" with R = CUT - 1 (one
#     rank per host, in host order), and the host, dtrain-cl-hCUT, where a stall message names hosts
# The cluster is removed at the end (also after a failure).
#
# Usage: link_down.sh --hosts N --cut H --at training|start [--stall S] [--bound B] -- PROGRAM [ARGS...]
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cluster=$here/../../scripts/cluster.sh
hosts="" cut="" at="" stall=4 bound=60
while [ $# -gt 0 ] && [ "$1" != -- ]; do
    case "$1" in
        --hosts) hosts=${2:?--hosts needs a number}; shift 2 ;;
        --cut) cut=${2:?--cut needs a host number}; shift 2 ;;
        --at) at=${2:?--at needs training or start}; shift 2 ;;
        --stall) stall=${2:?--stall needs seconds}; shift 2 ;;
        --bound) bound=${2:?--bound needs seconds}; shift 2 ;;
        *) echo "link_down.sh: unknown option '$1'" >&2; exit 2 ;;
    esac
done
[ "${1:-}" = -- ] && [ $# -ge 2 ] || {
    echo "link_down.sh: usage: link_down.sh --hosts N --cut H --at training|start [--stall S] [--bound B] -- PROGRAM..." >&2
    exit 2
}
shift
[[ "$hosts" =~ ^[0-9]+$ ]] && [[ "$cut" =~ ^[0-9]+$ ]] && [ "$cut" -ge 1 ] && [ "$cut" -le "$hosts" ] || {
    echo "link_down.sh: --cut must name one of the --hosts hosts (1..$hosts), got '$cut'" >&2
    exit 2
}
case "$at" in training | start) ;; *) echo "link_down.sh: --at must be training or start, got '$at'" >&2; exit 2 ;; esac
[[ "$stall" =~ ^[0-9]+$ ]] && [[ "$bound" =~ ^[0-9]+$ ]] || {
    echo "link_down.sh: --stall and --bound must be whole seconds, got '$stall' and '$bound'" >&2
    exit 2
}
program=$(readlink -f "$1")
name=$(basename "$program")
ns=dtrain-cl-h$cut
log=$(mktemp)
trap '"$cluster" down > /dev/null 2>&1 || true; rm -f "$log"' EXIT

"$cluster" up "$hosts" --rate 10gbit --no-check
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
# The pids of processes named $1 (first 15 characters) inside the cluster's hosts.
in_hosts() {
    local p f
    for p in $(pgrep -x -- "${1:0:15}" || true); do
        for f in /run/netns/dtrain-cl-h*; do
            if [ /proc/"$p"/ns/net -ef "$f" ]; then
                echo "$p"
                break
            fi
        done
    done
}

start=$(now)
DTRAIN_CLUSTER_ENV="DTRAIN_STALL_TIMEOUT=$stall ${DTRAIN_CLUSTER_ENV:-}" \
    "$cluster" run --timeout "$bound" -- "$@" > "$log" 2>&1 &
run_pid=$!
tail -n +1 -f --pid="$run_pid" "$log" &
tail_pid=$!

# Whether the moment to cut has come (--at).
ready() {
    if [ "$at" = training ]; then
        grep -q "link_down_program: training" "$log"
    else
        # the launcher's daemon on host $cut: Open MPI's orted, hydra's proxy
        local p
        for p in $(in_hosts orted) $(in_hosts hydra_pmi_proxy); do
            if [ /proc/"$p"/ns/net -ef /run/netns/"$ns" ]; then return 0; fi
        done
        return 1
    fi
}
# Waits (up to 60 s) until ready; status 1 if the run ended or the time passed first.
wait_ready() {
    local _
    for _ in $(seq 600); do
        if ready; then return 0; fi
        kill -0 "$run_pid" 2> /dev/null || return 1
        sleep 0.1
    done
    return 1
}
fail=()
if ! wait_ready; then
    wait "$run_pid" || true
    wait "$tail_pid" || true
    echo "link_down.sh: FAILED: the run ended or did not get ready (--at $at) within 60 s; nothing was cut"
    exit 1
fi
ranks=$(in_hosts "$name" | xargs)
ip netns exec "$ns" ip link set eth0 down
cut_at=$(now)
echo "link_down.sh: host $cut's eth0 is down ($(since "$start") s after the start; ranks running: ${ranks:-none})"

# The ranks' end: the last moment a rank of the program was seen (ranks may still start after a cut --at
# start).
ranks_end=0.0
while kill -0 "$run_pid" 2> /dev/null; do
    for p in $ranks $(in_hosts "$name"); do
        if kill -0 "$p" 2> /dev/null; then
            ranks_end=$(since "$cut_at")
            break
        fi
    done
    sleep 0.1
done
status=0
wait "$run_pid" || status=$?
launcher_end=$(since "$cut_at")
total=$(since "$start")
wait "$tail_pid" || true
left=$(for d in orted hydra_pmi_proxy mpiexec.openmpi mpiexec.hydra "$name"; do in_hosts "$d"; done | xargs)
echo "link_down.sh: after host $cut's link went down: the ranks ended in $ranks_end s, the launcher in" \
    "$launcher_end s (status $status; $total s after the start; stall timeout $stall s, bound $bound s)"

margin=5
[ "$at" = training ] || margin=10
awk -v t="$ranks_end" -v m="$((stall + margin))" 'BEGIN { exit !(t <= m) }' ||
    fail+=("the ranks ended $ranks_end s after the cut, later than the stall timeout + $margin s ($((stall + margin)) s)")
if [ "$at" = training ]; then
    rank=$((cut - 1))
    line=$(grep -E "stall: .*rank $rank( [^;]*)? did not answer" "$log" | head -n 1 || true)
    if [ -z "$line" ]; then
        fail+=("no stall message names rank $rank as not answering")
    elif grep -q "dtrain-cl-h" <<< "$line" && ! grep -q "dtrain-cl-h$cut\b" <<< "$line"; then
        fail+=("the stall message names hosts but not host $cut (dtrain-cl-h$cut): $line")
    fi
fi
awk -v t="$total" -v m="$((bound + 20))" 'BEGIN { exit !(t <= m) }' ||
    fail+=("the launcher ended $total s after the start, later than the bound + 20 s ($((bound + 20)) s)")
[ "$status" -ne 0 ] || fail+=("the run ended with status 0 although a host was cut off")
[ -z "$left" ] || fail+=("processes left in the hosts after the run: $left")
if [ ${#fail[@]} -gt 0 ]; then
    printf 'link_down.sh: FAILED: %s\n' "${fail[@]}"
    exit 1
fi
echo "link_down.sh: bounded ending"
