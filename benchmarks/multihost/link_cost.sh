#!/usr/bin/env bash
# What a byte costs on the simulated cluster's link (issue 15's bound): per link rate, a bulk TCP transfer
# from host 1 to host 2 of scripts/cluster.sh (2 hosts, veth + bridge, tbf shaping), with the machine's CPU
# time sampled from /proc/stat around it. Prints, per rate and round: the achieved Gbit/s, the CPU time
# (user, system, softirq: summed over all cores) per GB moved, and how busy the cores were. On a 2-core
# machine the kernel's TCP work for a gradient runs on the same cores as the ranks' compute, so this CPU
# time per byte bounds how much of the all-reduce overlap can hide (see README.md, "Bounds").
#
# Usage: sudo benchmarks/multihost/link_cost.sh   (root; iproute2; python3)
# Environment: RATES ["none 25gbit 10gbit 1gbit"]  ROUNDS [3]  SECONDS_PER_RUN [2] (the transfer's length
#   at the rate; "none" moves 2 GiB)  LOCK_WAIT [900]
# Holds the cluster lock (scripts/cluster.sh's cluster_session) throughout; always removes its cluster.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cluster="$here/../../scripts/cluster.sh"
RATES=${RATES-"none 25gbit 10gbit 1gbit"}
ROUNDS=${ROUNDS:-3}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-2}
LOCK_WAIT=${LOCK_WAIT:-900}

[ "$(id -u)" = 0 ] || {
    echo "link_cost.sh: needs root (network namespaces)" >&2
    exit 2
}
# shellcheck source-path=SCRIPTDIR source=../../scripts/cluster.sh
. "$cluster"
cluster_session link_cost.sh "$LOCK_WAIT"

# Sends $1 bytes from host 1 to host 2 and prints "gbit user_s system_s softirq_s busy_s wall_s" (CPU seconds
# summed over all cores, from /proc/stat; busy = everything but idle and iowait).
transfer() {
    "$cluster" exec 2 -- python3 -c '
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("198.18.0.2", 5298)); s.listen(1); s.settimeout(30)
c, _ = s.accept(); buf = bytearray(1 << 20); v = memoryview(buf)
while c.recv_into(v): pass
c.close()' &
    local server=$!
    sleep 0.3
    "$cluster" exec 1 -- python3 -c '
import os, socket, sys, time
def stat():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return v
hz = os.sysconf("SC_CLK_TCK"); n = int(sys.argv[1]); buf = memoryview(bytes(1 << 20))
c = socket.create_connection(("198.18.0.2", 5298), timeout=30)
a = stat(); t = time.perf_counter(); sent = 0
while sent < n:
    sent += c.send(buf[: min(len(buf), n - sent)])
c.shutdown(socket.SHUT_WR); c.recv(1); t = time.perf_counter() - t; b = stat()
d = [(y - x) / hz for x, y in zip(a, b)]  # user nice system idle iowait irq softirq steal ...
busy = sum(d) - d[3] - d[4]
print(f"{8 * n / t / 1e9:.3f} {d[0] + d[1]:.3f} {d[2]:.3f} {d[5] + d[6]:.3f} {busy:.3f} {t:.3f}")' "$1"
    wait "$server"
}

echo "# CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores"
echo "# kernel $(uname -r); bulk TCP host 1 -> host 2 over scripts/cluster.sh's link"
printf '%-8s %5s %10s %8s %12s %12s %12s %10s\n' rate round GB gbit user_s/GB system_s/GB softirq_s/GB busy_cores
for round in $(seq "$ROUNDS"); do
    for rate in $RATES; do
        "$cluster" up 2 --rate "$rate" --no-check > /dev/null
        if [ "$rate" = none ]; then
            bytes=$((2 << 30))
        else
            bps=$(python3 -c "import re,sys; m=re.fullmatch(r'([\d.]+)([kmg]?)bit', sys.argv[1]); \
print(int(float(m.group(1)) * {'': 1, 'k': 1e3, 'm': 1e6, 'g': 1e9}[m.group(2)] / 8))" "$rate")
            bytes=$((bps * SECONDS_PER_RUN))
        fi
        read -r gbit user sys soft busy wall < <(transfer "$bytes")
        python3 -c "
import sys
rate, rnd, n, gbit, user, sys_, soft, busy, wall = sys.argv[1:]
gb = int(n) / 1e9
print(f'{rate:<8} {rnd:>5} {gb:10.3f} {float(gbit):8.3f} {float(user)/gb:12.3f} {float(sys_)/gb:12.3f} '
      f'{float(soft)/gb:12.3f} {float(busy)/float(wall):10.2f}')" "$rate" "$round" "$bytes" "$gbit" "$user" "$sys" \
            "$soft" "$busy" "$wall"
        "$cluster" down > /dev/null
    done
done
