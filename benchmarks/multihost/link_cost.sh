#!/usr/bin/env bash
# What a byte costs on the simulated cluster's link (the bound on efficiency it sets): per link rate, a bulk TCP transfer
# from host 1 to host 2 of scripts/cluster.sh (2 hosts, veth + bridge, tbf shaping), with the machine's CPU
# time sampled from /proc/stat around it. Prints, per rate and round: the achieved Gbit/s, the CPU time
# (user, system, softirq: summed over all cores) per GB moved, and how busy the cores were. On a 2-core
# machine the kernel's TCP work for a gradient runs on the same cores as the ranks' compute, so this CPU
# time per byte bounds how much of the all-reduce overlap can hide (see README.md, "Bounds").
# With DIRECTIONS containing "both", the same bytes also move both ways at once (host 1 -> 2 and 2 -> 1), as
# in an all-reduce, where every host sends and receives at the same time; gbit_back is host 2's rate.
#
# Usage: sudo benchmarks/multihost/link_cost.sh   (root; iproute2; python3)
# Environment: RATES ["none 25gbit 10gbit 1gbit"]  ROUNDS [3]  SECONDS_PER_RUN [2] (the transfer's length
#   at the rate; "none" moves 2 GiB)  DIRECTIONS ["one"] ("one", "both" or "one both")  PIN [0] (1: the
#   cluster's --pin, one core per host, as the multihost benchmarks run)  MTUS ["1500"] (the links' MTUs to
#   measure, each a cluster of its own: scripts/cluster.sh up --mtu)  LOCK_WAIT [900]
# Holds the cluster lock (scripts/cluster.sh's cluster_session) throughout; always removes its cluster.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cluster="$here/../../scripts/cluster.sh"
RATES=${RATES-"none 25gbit 10gbit 1gbit"}
ROUNDS=${ROUNDS:-3}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-2}
DIRECTIONS=${DIRECTIONS:-one}
PIN=${PIN:-0}
MTUS=${MTUS:-1500}
LOCK_WAIT=${LOCK_WAIT:-900}

die() {
    echo "link_cost.sh: $*" >&2
    exit 2
}
[ "$(id -u)" = 0 ] || {
    echo "link_cost.sh: needs root (network namespaces)" >&2
    exit 2
}
# shellcheck source-path=SCRIPTDIR source=../../scripts/cluster.sh
. "$cluster"
cluster_session link_cost.sh "$LOCK_WAIT"

# A TCP sink inside host $1 on address $2, port $3: reads until the sender closes.
sink() {
    "$cluster" exec "$1" -- python3 -c '
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(1); s.settimeout(30)
c, _ = s.accept(); buf = bytearray(1 << 20); v = memoryview(buf)
while c.recv_into(v): pass
c.close()' "$2" "$3"
}

# Sends $4 bytes from host $1 to address $2, port $3, and prints "gbit user_s system_s softirq_s busy_s
# wall_s" (CPU seconds summed over all cores, from /proc/stat, which is the machine's; busy = everything but
# idle and iowait).
source_() {
    "$cluster" exec "$1" -- python3 -c '
import os, socket, sys, time
def stat():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return v
hz = os.sysconf("SC_CLK_TCK"); n = int(sys.argv[3]); buf = memoryview(bytes(1 << 20))
c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=30)
a = stat(); t = time.perf_counter(); sent = 0
while sent < n:
    sent += c.send(buf[: min(len(buf), n - sent)])
c.shutdown(socket.SHUT_WR); c.recv(1); t = time.perf_counter() - t; b = stat()
d = [(y - x) / hz for x, y in zip(a, b)]  # user nice system idle iowait irq softirq steal ...
busy = sum(d) - d[3] - d[4]
print(f"{8 * n / t / 1e9:.3f} {d[0] + d[1]:.3f} {d[2]:.3f} {d[5] + d[6]:.3f} {busy:.3f} {t:.3f}")' "$2" "$3" "$4"
}

# Moves $2 bytes from host 1 to host 2 ($1 = one) or, at the same time, $2 bytes each way ($1 = both).
# Prints the line of host 1's transfer, then host 2's rate ("-" for one direction).
transfer() {
    local back=/dev/null
    sink 2 198.18.0.2 5298 &
    local sinks=$!
    if [ "$1" = both ]; then
        sink 1 198.18.0.1 5299 &
        sinks="$sinks $!"
        back=$(mktemp)
    fi
    sleep 0.3
    [ "$1" = one ] || source_ 2 198.18.0.1 5299 "$2" > "$back" &
    local other=$!
    local line
    line=$(source_ 1 198.18.0.2 5298 "$2")
    wait "$other"
    # shellcheck disable=SC2086
    wait $sinks
    if [ "$1" = both ]; then
        echo "$line $(cut -d' ' -f1 "$back")"
        rm -f "$back"
    else
        echo "$line -"
    fi
}

echo "# CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores"
echo "# kernel $(uname -r); bulk TCP host 1 -> host 2 over scripts/cluster.sh's link"
pin=()
[ "$PIN" = 0 ] || pin=(--pin)
printf '%-8s %5s %5s %4s %10s %8s %9s %12s %12s %12s %10s\n' rate mtu round dirs GB gbit gbit_back user_s/GB \
    system_s/GB softirq_s/GB busy_cores
for round in $(seq "$ROUNDS"); do
    for rate in $RATES; do
        for mtu in $MTUS; do
            for dirs in $DIRECTIONS; do
                case "$dirs" in one | both) ;; *) die "DIRECTIONS: '$dirs' is neither one nor both" ;; esac
                "$cluster" up 2 --rate "$rate" --mtu "$mtu" --no-check "${pin[@]}" > /dev/null
                if [ "$rate" = none ]; then
                    bytes=$((2 << 30))
                else
                    bps=$(rate_bytes_per_s "$rate") || exit 2
                    bytes=$((bps * SECONDS_PER_RUN))
                fi
                read -r gbit user sys soft busy wall back < <(transfer "$dirs" "$bytes")
                python3 -c "
import sys
rate, mtu, rnd, dirs, n, gbit, back, user, sys_, soft, busy, wall = sys.argv[1:]
gb = int(n) / 1e9 * (2 if dirs == 'both' else 1)  # CPU per GB moved, all directions
print(f'{rate:<8} {mtu:>5} {rnd:>5} {dirs:>4} {gb:10.3f} {float(gbit):8.3f} {back:>9} {float(user)/gb:12.3f} '
      f'{float(sys_)/gb:12.3f} {float(soft)/gb:12.3f} {float(busy)/float(wall):10.2f}')" "$rate" "$mtu" \
                    "$round" "$dirs" "$bytes" "$gbit" "$back" "$user" "$sys" "$soft" "$busy" "$wall"
                "$cluster" down > /dev/null
            done
        done
    done
done
