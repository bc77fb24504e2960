#!/usr/bin/env bash
# A simulated cluster on one machine: N network namespaces ("hosts") joined through a bridge, each with an
# eth0 whose egress is shaped (rate, delay, loss), so that MPI ranks on different hosts talk over a real
# TCP path instead of shared memory. Addresses are 198.18.0.1 ... 198.18.0.N (198.18.0.0/15 is reserved
# for benchmarking, RFC 2544); nothing is sent anywhere else. Programs run as host I have the hostname
# dtrain-cl-hI (a UTS namespace of their own). Needs root (CAP_NET_ADMIN), iproute2 and tc (Debian:
# iproute2), unshare (util-linux), python3 for the rate check, and Open MPI or MPICH.
#
# Usage: scripts/cluster.sh up N [--rate R] [--delay D] [--loss P] [--mtu M] [--cc C] [--pin] [--no-check]
#          N hosts (2-16); R a tc rate (default 10gbit; "none" leaves the link unshaped), D a delay
#          (default 0, e.g. 50us), P a loss percentage (default 0, e.g. 0.1%), M the links' MTU in bytes
#          (default 1500; 9000 for the jumbo frames of many cluster networks, 68-65535), C the hosts' TCP
#          congestion control (default reno; "system" keeps the machine's): a machine may default to bbr,
#          which without the fq qdisc ran back-to-back all-reduces over a 10gbit link at 1.5-1.7x reno's
#          time (benchmarks/multihost/README.md); cluster hosts usually run a loss-based one (Linux's
#          default, cubic, may be chosen in a namespace only where the machine allows it). --pin gives
#          every host CPUs of its own, as separate machines have: host I runs on CPUs [(I-1)k, Ik) with k = nproc / N (needs
#          N <= nproc; without it every host shares all CPUs, so each believes it has them all: a rank's
#          progress thread, sized for a CPU of its own, then takes time from the other host's rank).
#          Checks the achieved rate with a bulk TCP transfer from host 1 to host 2 (--no-check skips it).
#        scripts/cluster.sh run [--np N] [--timeout S] -- <program> [arguments...]
#          runs the program over all hosts (one rank per host, round robin; --np sets the rank count,
#          default N) with the MPI settings below; prints the bytes each eth0 sent. The launcher follows
#          the MPI the program is linked against (ldd): Open MPI's mpiexec.openmpi for libmpi.so.40,
#          else mpiexec.mpich; DTRAIN_CLUSTER_MPI=openmpi|mpich overrides.
#          The job ends in bounded time: --timeout S (default DTRAIN_CLUSTER_TIMEOUT, else 0: none) is the
#          launcher's own limit (Open MPI's --timeout, hydra's MPIEXEC_TIMEOUT), and `timeout` stops the
#          launcher 10 s later if it could not end the job. Once every rank of the program has ended, the
#          launcher has DTRAIN_CLUSTER_LINGER s (default 10) to end too, then it is stopped: when a host
#          becomes unreachable (its link down), dtrain's stall watchdog ends the ranks, but mpiexec.openmpi
#          waits forever for that host's daemon (orted). What the job leaves in the hosts (orted,
#          hydra_pmi_proxy, the launcher, the program's ranks) is killed, and named, when run ends; `down`
#          kills whatever still runs in the namespaces before removing them.
#        scripts/cluster.sh exec HOST -- <command...>   runs a command inside host HOST (1..N) (on its CPUs)
#        scripts/cluster.sh counters                   prints each host's eth0 tx/rx bytes
#        scripts/cluster.sh down                       removes everything `up` created (idempotent)
#        scripts/cluster.sh with N [up options] -- <program> [arguments...]
#          up, run, down in one go; down also runs after a failure or Ctrl-C.
# MPI settings of `run`, started inside host 1; each host's daemon/proxy is started through
# `ip netns exec` by the launcher script in the state directory. Extra environment:
# DTRAIN_CLUSTER_ENV="VAR=value ..." (passed to every rank).
#   Open MPI 4.1 (recommended, reliable): --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include eth0
#   --mca oob_tcp_if_include eth0 --mca plm_rsh_agent <launcher> -H 198.18.0.1,... --map-by node
#   --bind-to none (each host's daemon sees the whole machine, and its default binding of up to 2 ranks, one
#   core each from core 0, put every host's rank on core 0); programs must be built with mpicxx.openmpi.
#   --mca btl_tcp_eager_limit, btl_tcp_rndv_eager_limit and btl_tcp_max_send_size E, with E =
#   DTRAIN_CLUSTER_EAGER (default 1052672, 1 MiB + 4 KiB; "default" keeps Open MPI's 64 KiB / 128 KiB; none
#   of the three is passed when DTRAIN_CLUSTER_ENV sets one of them as OMPI_MCA_btl_tcp_<name>): a
#   message up to E bytes is written to the socket at once instead of waiting for the receiver's reply to a
#   rendezvous request, which with one core per host and no progress thread comes only at the receiver's
#   next MPI call. So a gradient bucket started during backward crosses the link while both ranks compute
#   (DistOptimizer's overlap; measured in benchmarks/multihost/README.md, "Eager messages").
#   A 16 MiB all-reduce sends >= 16 MiB on each eth0.
#   MPICH 4.0 on UCX: UCX_TLS=tcp,self (with UCX's default transports the ranks of two namespaces still
#   find each other's shared memory and the link carries nothing), UCX_NET_DEVICES=eth0; hydra with
#   -launcher rsh -launcher-exec <launcher> and -iface eth0.
# Known problems: with MPICH 4.0.2 + UCX 1.13 over TCP, MPI_Finalize hangs in some runs (measured on 2
# hosts: plain hello world 1 of 20, with a barrier before MPI_Finalize 2 of 20, the quickstart 14 of 20;
# 0 of 20 when the ranks exchange no message). Cause: MPICH closes its UCX endpoints (flush mode) and only
# then enters the PMI barrier; the rank that closes first shuts its TCP socket, the other rank's UCX TCP
# endpoint sees the drop and, to flush, opens a new connection whose handshake the first rank (now blocked
# in the PMI barrier) never answers (UCX issue 8738). No UCX or MPICH 4.0.2 setting tried avoids it
# (UCX_TCP_PUT_ENABLE=n: 9 of 10 quickstart runs hung; UCX_TCP_MAX_CONN_RETRIES=1: 8 of 10; =0 breaks
# MPI_Init). MPICH fixed it upstream: pull request 6596 (July 2023, after 4.1.2) took that PMI barrier out
# of the UCX netmod's finalize, because a rank blocked in it keeps the others' ucp_disconnect_nb from
# completing; Debian 12 ships 4.0.2. Open MPI (ob1, btl tcp) hung in 0 of 40 hello world and 0 of 40
# quickstart runs. So use an Open MPI build for multi-host runs; with MPICH give `run` a --timeout, and
# DTRAIN_FINALIZE_TIMEOUT to the ranks (DTRAIN_CLUSTER_ENV): dtrain::Environment then ends a rank whose
# MPI_Finalize has not returned after that many seconds (the quickstart on 2 hosts: 20 of 50 runs hung
# without it, 0 of 50 with 5 s; benchmarks/multihost/finalize_hang.sh, README "Ends of MPICH jobs").
# --delay and --loss need the netem qdisc and refuse to start without it. Some kernels have no way to delay
# at all: the one this was written on (6.18, /proc/config.gz) has tbf, htb, ingress, cls_bpf and act_mirred
# but neither netem nor fq nor etf (CONFIG_NET_SCH_NETEM, _FQ, _ETF unset), so not even a BPF program that
# sets departure times (which fq or etf would honour) can add delay there.
# State (hostfile, launcher, settings) lives in ${DTRAIN_CLUSTER_DIR:-/run/dtrain-cluster}. Only the
# namespaces named dtrain-cl-* are ever created or deleted; the machine's own interfaces are not touched.
#
# The cluster lock. The cluster is global to the machine, so whatever brings one up (the multihost tests,
# the benchmarks/multihost scripts) holds an flock on ${DTRAIN_CLUSTER_DIR:-/run/dtrain-cluster}.lock
# (descriptor 9) while it is up; up, run and down take no lock themselves. Sourced from bash
# (`. scripts/cluster.sh`), this file runs nothing and defines only these (and CLUSTER_SH, CLUSTER_STATE,
# CLUSTER_LOCK: its path, the state directory, the lock file):
#   cluster_lock WAIT      takes the lock, waiting up to WAIT seconds (0: not at all); status 1 if still held.
#                          Start what runs under it with 9>&-, so that nothing it leaves behind holds the lock
#   cluster_unlock         releases the lock
#   cluster_namespaces     prints the dtrain-cl-* namespaces there are
#   cluster_is_up          status 0 if a cluster (or what one left: namespaces, state) is there
#   cluster_kill           kills what still runs inside the namespaces (a line "killing what still runs in
#                          NS: PIDS" each), and nothing else
#   cluster_clear          cluster_kill, then `down`
#   cluster_session NAME WAIT
#                          for a script whose clusters all come and go under one lock: cluster_lock WAIT, or
#                          exit 2 ("NAME: the cluster lock ... is still held after WAIT s"); exit 2 too if a
#                          cluster is there already (someone else's: left alone). Then, when the script ends
#                          (also after a failure), whatever cluster is up is removed (cluster_clear); INT or
#                          TERM end the script with status 130.

CLUSTER_SH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
CLUSTER_STATE="${DTRAIN_CLUSTER_DIR:-/run/dtrain-cluster}"
CLUSTER_LOCK="$CLUSTER_STATE.lock"

cluster_lock() {
    mkdir -p "$(dirname "$CLUSTER_LOCK")"
    exec 9> "$CLUSTER_LOCK"
    if [ "$1" = 0 ]; then flock -n 9; else flock -w "$1" 9; fi
}
cluster_unlock() { flock -u 9 2> /dev/null || true; }
cluster_namespaces() { ip netns list 2> /dev/null | awk '{print $1}' | grep '^dtrain-cl-' || true; }
cluster_is_up() { [ -n "$(cluster_namespaces)" ] || [ -e "$CLUSTER_STATE" ]; }
cluster_kill() {
    local ns pids
    for ns in $(cluster_namespaces); do
        pids=$(ip netns pids "$ns" 2> /dev/null | xargs || true)
        if [ -n "$pids" ]; then
            echo "killing what still runs in $ns: $pids"
            # shellcheck disable=SC2086 # one pid per word
            kill -9 $pids 2> /dev/null || true
        fi
    done
}
cluster_clear() {
    cluster_kill
    "$CLUSTER_SH" down > /dev/null 2>&1 9>&- || true
}
cluster_session() {
    local name=$1 wait=$2
    if ! cluster_lock "$wait"; then
        echo "$name: the cluster lock $CLUSTER_LOCK is still held after $wait s" >&2
        exit 2
    fi
    if cluster_is_up; then
        echo "$name: a simulated cluster is there that this run did not start" \
            "($(cluster_namespaces | xargs)): left alone; remove it with: sudo $CLUSTER_SH down" >&2
        exit 2
    fi
    trap 'cluster_clear >&2' EXIT
    trap 'exit 130' INT TERM
}

# For benchmark scripts that time an Open MPI program over the cluster: cluster_openmpi_bench NAME BIN TARGET
# refuses (exit 2, naming what is wrong) unless run as root with BIN built (by TARGET) against Open MPI,
# points `run` at Open MPI, then takes the cluster session (cluster_session NAME 900).
cluster_openmpi_bench() {
    local name=$1 bin=$2 target=$3
    [ "$(id -u)" = 0 ] || { echo "$name: needs root (network namespaces)" >&2; exit 2; }
    [ -x "$bin" ] || {
        echo "$name: $bin is not built: cmake --preset openmpi && cmake --build build-openmpi --target $target" >&2
        exit 2
    }
    case "$(ldd "$bin" 2> /dev/null || true)" in
        *libmpi.so.40*) ;;
        *) echo "$name: $bin is not an Open MPI build (cmake --preset openmpi)" >&2; exit 2 ;;
    esac
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 DTRAIN_CLUSTER_MPI=openmpi
    cluster_session "$name" 900
}

# The bytes per second of a tc rate such as 10gbit or 500mbit (also for scripts that source this one).
rate_bytes_per_s() {
    python3 - "$1" << 'EOF2'
import re, sys
m = re.fullmatch(r"([\d.]+)([kmg]?)(bit|bps)", sys.argv[1].lower())
if not m:
    sys.exit(f"cluster.sh: cannot read the rate '{sys.argv[1]}' (e.g. 10gbit, 500mbit)")
v = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)]
print(int(v / 8 if m.group(3) == "bit" else v))
EOF2
}

# The Gbit/s that the bulk transfer of `cluster.sh up` achieved, read from that command's output ($1); empty
# when up ran with --no-check.
cluster_achieved_gbit() {
    sed -n 's/.*transfer host 1 -> host 2: \([0-9.]*\) Gbit.*/\1/p' <<< "$1"
}

# Sourced: only the above.
[ "${BASH_SOURCE[0]}" = "$0" ] || return 0

set -euo pipefail

STATE="$CLUSTER_STATE"
PREFIX=dtrain-cl # the namespaces' prefix (as in cluster_namespaces)
SWITCH="$PREFIX-sw"
TCP_SYSCTL=/proc/sys/net/ipv4 # in a namespace: its own TCP settings
MPIEXEC="${MPIEXEC:-mpiexec.mpich}"

die() {
    echo "cluster.sh: $*" >&2
    exit 2
}
usage() {
    sed -n '2,/^[^#]/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
    exit "${1:-2}"
}
host_ns() { echo "$PREFIX-h$1"; }
host_ip() { echo "198.18.0.$1"; }
in_ns() {
    local ns=$1
    shift
    ip netns exec "$ns" "$@"
}
# Runs a command as host $1: in its network namespace and in a UTS namespace of its own whose hostname is
# the namespace's name. One shared hostname made the hosts' Open MPI daemons share one session directory
# (/tmp/ompi.HOSTNAME.UID/jf.JOB), where their PMIx servers' files collided ("PMIX ERROR: ERROR in file
# dstore_base.c at line 1709" in some 3-host runs).
# With --pin the command runs on the host's CPUs only (taskset; its children inherit them).
in_host() {
    local ns cpus_of=()
    ns=$(host_ns "$1")
    [ ! -f "$STATE/cpus$1" ] || cpus_of=(taskset -c "$(cat "$STATE/cpus$1")")
    shift
    # shellcheck disable=SC2016 # $0 and $@ are the inner shell's
    ip netns exec "$ns" "${cpus_of[@]}" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$ns" "$@"
}

need_root() {
    [ "$(id -u)" -eq 0 ] || die "needs root (network namespaces need CAP_NET_ADMIN); run it with sudo"
    command -v ip > /dev/null || die "needs iproute2 (ip, tc): apt-get install iproute2"
    command -v tc > /dev/null || die "needs tc (Debian package iproute2)"
    command -v unshare > /dev/null || die "needs unshare (Debian package util-linux)"
    if ! ip netns add "$PREFIX-probe" 2> /dev/null; then
        die "cannot create a network namespace here (no permission, or the kernel or container forbids it)"
    fi
    ip netns del "$PREFIX-probe"
}

hosts() { [ -f "$STATE/hosts" ] && cat "$STATE/hosts" || echo 0; }

down() {
    local ns
    # First whatever still runs inside (a launcher's daemon waiting for a host it cannot reach): a deleted
    # namespace lives on as long as a process holds it, unnamed, so nothing could find that process later.
    cluster_kill
    for ns in $(cluster_namespaces); do
        ip netns del "$ns" 2> /dev/null || true
    done
    rm -rf "$STATE"
}

# Waits until interface $2 in namespace $1 has a carrier (a veth end without one makes UCX fail with
# "Destination is unreachable").
wait_carrier() {
    local i
    for i in $(seq 100); do
        [ "$(in_ns "$1" cat "/sys/class/net/$2/carrier" 2> /dev/null)" = 1 ] && return 0
        sleep 0.05
    done
    die "$2 in $1 has no carrier after 5 s"
}

# Sends $1 bytes from host 1 to host 2 over TCP and prints the achieved Gbit/s.
rate_check() {
    local bytes=$1 port=5299
    in_ns "$(host_ns 2)" python3 -c '
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(1); s.settimeout(30)
c, _ = s.accept(); n = 0
while True:
    b = c.recv(1 << 20)
    if not b: break
    n += len(b)
c.close()' "$(host_ip 2)" "$port" &
    local server=$!
    sleep 0.3
    in_ns "$(host_ns 1)" python3 -c '
import socket, sys, time
n = int(sys.argv[3]); buf = bytes(1 << 20)
c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=30)
t = time.perf_counter(); sent = 0
while sent < n:
    sent += c.send(buf[: min(len(buf), n - sent)])
c.shutdown(socket.SHUT_WR); c.recv(1); t = time.perf_counter() - t
print(f"{8 * n / t / 1e9:.2f}")' "$(host_ip 2)" "$port" "$bytes"
    wait "$server"
}

up() {
    local n=$1 rate=10gbit delay=0 loss=0 check=1 pin=0 mtu=1500 cc=reno
    shift
    [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 2 ] && [ "$n" -le 16 ] || die "up: N must be 2 to 16 hosts, got '$n'"
    while [ $# -gt 0 ]; do
        case "$1" in
            --rate) rate=${2:?--rate needs a value}; shift 2 ;;
            --delay) delay=${2:?--delay needs a value}; shift 2 ;;
            --loss) loss=${2:?--loss needs a value}; shift 2 ;;
            --no-check) check=0; shift ;;
            --pin) pin=1; shift ;;
            --mtu) mtu=${2:?--mtu needs a value}; shift 2 ;;
            --cc) cc=${2:?--cc needs a value}; shift 2 ;;
            *) die "up: unknown option '$1' (known: --rate --delay --loss --mtu --cc --pin --no-check)" ;;
        esac
    done
    [[ "$mtu" =~ ^[0-9]+$ ]] && [ "$mtu" -ge 68 ] && [ "$mtu" -le 65535 ] ||
        die "up: --mtu must be a whole number of bytes from 68 to 65535, got '$mtu'"
    need_root
    local cpus
    cpus=$(nproc)
    [ "$pin" = 0 ] || [ "$n" -le "$cpus" ] || die "up: --pin needs a CPU per host: $n hosts, $cpus CPUs"
    [ "$pin" = 0 ] || command -v taskset > /dev/null || die "up: --pin needs taskset (Debian: util-linux)"
    [ "$(hosts)" = 0 ] || die "a cluster of $(hosts) hosts is up already; run 'scripts/cluster.sh down' first"
    # tbf's burst: small against a gradient (MBs) so that a gradient is shaped, but larger than a GSO packet
    # (a veth's are up to 64 KiB + headers) and at least the bytes of 50 us at the rate. tbf cuts a packet
    # larger than its burst into MTU-size packets in software (tbf_segment): with a burst of exactly 64 KiB
    # a "10gbit" link carried 3.7 Gbit/s at 2.6 CPU-s per GB; with 128 KiB it carries 9.3 Gbit/s at 1.0
    # (benchmarks/multihost/link_cost.sh).
    local burst="" bps=0
    if [ "$rate" != none ]; then
        bps=$(rate_bytes_per_s "$rate") || exit 2
        burst=$((bps / 20000 > 131072 ? bps / 20000 : 131072))
    fi
    # Whatever fails from here on leaves nothing behind.
    trap 'down; exit 130' INT TERM
    trap 'status=$?; [ $status -eq 0 ] || down' EXIT
    mkdir -p "$STATE"
    ip netns add "$SWITCH"
    in_ns "$SWITCH" ip link set lo up
    in_ns "$SWITCH" ip link add br0 mtu "$mtu" type bridge
    in_ns "$SWITCH" ip link set br0 up
    local i ns
    for i in $(seq "$n"); do
        ns=$(host_ns "$i")
        ip netns add "$ns"
        in_ns "$ns" ip link set lo up
        in_ns "$ns" ip link add eth0 mtu "$mtu" type veth peer name "port$i" mtu "$mtu" netns "$SWITCH"
        in_ns "$ns" ip addr add "$(host_ip "$i")/24" dev eth0
        [ "$cc" = system ] || in_ns "$ns" sh -c "echo '$cc' > $TCP_SYSCTL/tcp_congestion_control" 2> /dev/null ||
            die "up: --cc $cc: a namespace may not use it here (built in:" \
                "$(cat $TCP_SYSCTL/tcp_available_congestion_control); a namespace may choose from" \
                "$(cat $TCP_SYSCTL/tcp_allowed_congestion_control))"
        in_ns "$ns" ip link set eth0 up
        in_ns "$SWITCH" ip link set "port$i" master br0
        in_ns "$SWITCH" ip link set "port$i" up
        # Egress of each host: netem (delay, loss) under a token bucket (rate).
        local netem=(delay "$delay")
        [ "$loss" = 0 ] || netem+=(loss "$loss")
        if [ "$rate" = none ]; then
            [ "$delay" = 0 ] && [ "$loss" = 0 ] || in_ns "$ns" tc qdisc add dev eth0 root netem "${netem[@]}" \
                2> /dev/null || die "up: --delay and --loss need tc's netem qdisc, which this kernel lacks (sch_netem)"
        else
            in_ns "$ns" tc qdisc add dev eth0 root handle 1: tbf rate "$rate" burst "$burst" latency 100ms
            [ "$delay" = 0 ] && [ "$loss" = 0 ] ||
                in_ns "$ns" tc qdisc add dev eth0 parent 1:1 handle 10: netem "${netem[@]}" 2> /dev/null ||
                die "up: --delay and --loss need tc's netem qdisc, which this kernel lacks (sch_netem)"
        fi
        echo "$(host_ip "$i")" >> "$STATE/hostfile"
        [ "$pin" = 0 ] || echo "$(((i - 1) * (cpus / n)))-$((i * (cpus / n) - 1))" > "$STATE/cpus$i"
    done
    for i in $(seq "$n"); do
        wait_carrier "$(host_ns "$i")" eth0
        wait_carrier "$SWITCH" "port$i"
    done
    cat > "$STATE/launcher" << EOF
#!/bin/sh
# hydra's and Open MPI's remote shell: "launcher HOST COMMAND..." runs COMMAND inside HOST's namespace,
# with HOST's own hostname (see in_host in scripts/cluster.sh).
ns=$PREFIX-h\${1##*.}
pin=""
[ ! -f "$STATE/cpus\${1##*.}" ] || pin="taskset -c \$(cat "$STATE/cpus\${1##*.}")"
shift
exec ip netns exec "\$ns" \$pin unshare --uts sh -c 'hostname "\$0" && exec sh -c "\$*"' "\$ns" "\$@"
EOF
    chmod +x "$STATE/launcher"
    # the MTU as host 1's eth0 reports it (what the link really uses)
    mtu=$(in_ns "$(host_ns 1)" ip -o link show dev eth0 | sed -n 's/.* mtu \([0-9]*\) .*/\1/p')
    cc=$(in_ns "$(host_ns 1)" cat $TCP_SYSCTL/tcp_congestion_control)  # what the hosts really use
    printf 'rate=%s burst=%s delay=%s loss=%s mtu=%s cc=%s pin=%s\n' "$rate" "${burst:-none}" "$delay" "$loss" \
        "$mtu" "$cc" "$pin" > "$STATE/link"
    echo "$n" > "$STATE/hosts"
    echo "cluster.sh: $n hosts up ($(host_ip 1) ... $(host_ip "$n")), link $(cat "$STATE/link")"
    if [ "$check" = 1 ]; then
        # Long enough to be dominated by the rate, not the burst or the handshake: 0.5 s at the rate.
        local bytes=$((256 << 20))
        [ "$rate" = none ] || bytes=$((bps / 2 > (8 << 20) ? bps / 2 : (8 << 20)))
        echo "cluster.sh: bulk TCP transfer host 1 -> host 2: $(rate_check "$bytes") Gbit/s achieved"
    fi
    trap - INT TERM EXIT
}

counters() {
    local i
    for i in $(seq "$(hosts)"); do
        printf 'host %s eth0 tx_bytes %s rx_bytes %s\n' "$i" \
            "$(in_ns "$(host_ns "$i")" cat /sys/class/net/eth0/statistics/tx_bytes)" \
            "$(in_ns "$(host_ns "$i")" cat /sys/class/net/eth0/statistics/rx_bytes)"
    done
}

# The pids of the processes named $2... (their first 15 characters, as the kernel keeps them) that run
# inside the hosts' namespaces; $1 is a namespace name prefix (dtrain-cl-h: the hosts). Never a process
# outside: another program of the same name elsewhere on the machine is not the job's.
host_pids() {
    local prefix=$1 name p f
    shift
    for name in "$@"; do
        for p in $(pgrep -x -- "${name:0:15}" || true); do
            for f in /run/netns/"$prefix"*; do
                if [ /proc/"$p"/ns/net -ef "$f" ]; then
                    echo "$p"
                    break
                fi
            done
        done
    done
}

# Kills what a job left inside the hosts after its launcher ended: the MPI daemons (Open MPI's orted,
# hydra's proxies), a launcher that outlived its bound, and ranks of the program $1. With a host
# unreachable, mpiexec.openmpi's abort waits forever for that host's orted, which stays behind.
kill_job_leftovers() {
    local pids p
    pids=$(host_pids "$PREFIX-h" orted hydra_pmi_proxy mpiexec.openmpi mpiexec.hydra "$(basename "$1")" | xargs)
    [ -n "$pids" ] || return 0
    echo "cluster.sh: killing what the job left in the hosts:$(for p in $pids; do
        printf ' %s (%s)' "$(cat /proc/"$p"/comm 2> /dev/null)" "$p"
    done)" >&2
    # shellcheck disable=SC2086 # one pid per word
    kill -9 $pids 2> /dev/null || true
}

run() {
    local n np timeout_s=${DTRAIN_CLUSTER_TIMEOUT:-0} linger=${DTRAIN_CLUSTER_LINGER:-10}
    n=$(hosts)
    [ "$n" -ge 2 ] || die "run: no cluster is up (scripts/cluster.sh up N)"
    np=$n
    while [ $# -gt 0 ] && [ "$1" != -- ]; do
        case "$1" in
            --np) np=${2:?--np needs a value}; shift 2 ;;
            --timeout) timeout_s=${2:?--timeout needs seconds}; shift 2 ;;
            *) die "run: unknown option '$1' (usage: run [--np N] [--timeout S] -- program [arguments])" ;;
        esac
    done
    [ "${1:-}" = -- ] || die "run: put -- before the program"
    shift
    [ $# -gt 0 ] || die "run: no program given"
    [[ "$timeout_s" =~ ^[0-9]+$ ]] ||
        die "run: --timeout (or DTRAIN_CLUSTER_TIMEOUT) must be whole seconds (0: none), got '$timeout_s'"
    [[ "$linger" =~ ^[0-9]+$ ]] && [ "$linger" -ge 1 ] ||
        die "run: DTRAIN_CLUSTER_LINGER must be whole seconds (at least 1), got '$linger'"
    # The launcher's bound: its own timeout (Open MPI's --timeout, hydra's MPIEXEC_TIMEOUT), and `timeout`
    # 10 s later in case the launcher cannot end the job itself (KILL 5 s after TERM).
    local bound=() ompi_timeout=() hydra_timeout=()
    if [ "$timeout_s" -gt 0 ]; then
        bound=(timeout -k 5 $((timeout_s + 10)))
        ompi_timeout=(--timeout "$timeout_s")
        hydra_timeout=(MPIEXEC_TIMEOUT="$timeout_s")
    fi
    local program
    program=$(command -v "$1" || echo "$1")
    local mpi=${DTRAIN_CLUSTER_MPI:-}
    if [ -z "$mpi" ]; then
        mpi=mpich
        # Not `ldd | grep -q`: grep -q ends at the first match, ldd may then die of SIGPIPE, and with
        # pipefail the match counted as a miss (2 in 20 tries): hydra then ran an Open MPI program as N
        # singletons of one rank each.
        case "$(ldd "$(command -v "$1" || echo "$1")" 2> /dev/null || true)" in
            *libmpi.so.40*) mpi=openmpi ;;
        esac
    fi
    local before after
    before=$(counters)
    local status=0
    case "$mpi" in
        openmpi)
            # Open MPI: TCP BTL on eth0 only; each rank gets DTRAIN_CLUSTER_ENV through -x.
            local xs=() w hostlist
            # shellcheck disable=SC2086 # DTRAIN_CLUSTER_ENV holds VAR=value words
            for w in ${DTRAIN_CLUSTER_ENV:-}; do xs+=(-x "$w"); done
            hostlist=$(paste -sd, "$STATE/hostfile")
            # Messages up to DTRAIN_CLUSTER_EAGER bytes go eagerly: see the header. Command-line --mca
            # outranks OMPI_MCA_* variables, so none is passed when DTRAIN_CLUSTER_ENV sets one of the three.
            local eager=() e=${DTRAIN_CLUSTER_EAGER:-1052672}
            case " ${DTRAIN_CLUSTER_ENV:-} " in
                *" OMPI_MCA_btl_tcp_eager_limit="* | *" OMPI_MCA_btl_tcp_rndv_eager_limit="* | \
                    *" OMPI_MCA_btl_tcp_max_send_size="*) e=default ;;
            esac
            case "$e" in
                default) ;;
                *[!0-9]* | '') die "run: DTRAIN_CLUSTER_EAGER must be a byte count or 'default', got '$e'" ;;
                *) eager=(--mca btl_tcp_eager_limit "$e" --mca btl_tcp_rndv_eager_limit "$e"
                          --mca btl_tcp_max_send_size "$e") ;;
            esac
            in_host 1 ${bound[@]+"${bound[@]}"} "${MPIEXEC_OPENMPI:-mpiexec.openmpi}" --allow-run-as-root \
                -H "$hostlist" --map-by node --bind-to none --oversubscribe -n "$np" \
                --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include eth0 \
                --mca oob_tcp_if_include eth0 --mca plm_rsh_agent "$STATE/launcher" \
                ${ompi_timeout[@]+"${ompi_timeout[@]}"} ${eager[@]+"${eager[@]}"} "${xs[@]}" "$@" &
            ;;
        mpich)
            # shellcheck disable=SC2086 # DTRAIN_CLUSTER_ENV holds VAR=value words
            in_host 1 env UCX_TLS=tcp,self UCX_NET_DEVICES=eth0 ${DTRAIN_CLUSTER_ENV:-} \
                ${hydra_timeout[@]+"${hydra_timeout[@]}"} ${bound[@]+"${bound[@]}"} \
                "$MPIEXEC" -f "$STATE/hostfile" -launcher rsh -launcher-exec "$STATE/launcher" -iface eth0 \
                -n "$np" "$@" &
            ;;
        *) die "run: DTRAIN_CLUSTER_MPI must be openmpi or mpich, got '$mpi'" ;;
    esac
    # Until the launcher ends: once the program's ranks have all ended, the launcher gets DTRAIN_CLUSTER_LINGER
    # seconds (default 10) to end too, then it is stopped. When a host became unreachable (its link down),
    # the ranks end (dtrain's stall watchdog aborts the job, or the MPI reports the lost peer) but
    # mpiexec.openmpi waits forever for the unreachable host's daemon to confirm the abort.
    local launcher=$! seen=0 gone="" stopped=0 name traps
    name=$(basename "$program")
    # A background command ignores SIGINT here, so Ctrl-C or TERM must end the launcher explicitly.
    traps=$(trap -p INT TERM)
    # shellcheck disable=SC2064 # $launcher and $program now
    trap "pkill -TERM -P $launcher 2> /dev/null; sleep 1; kill_job_leftovers '$program'; exit 130" INT TERM
    while kill -0 "$launcher" 2> /dev/null; do
        sleep 0.5
        if [ -n "$(host_pids "$PREFIX-h" "$name")" ]; then
            seen=1 gone=""
        elif [ $seen = 1 ] && kill -0 "$launcher" 2> /dev/null; then
            [ -n "$gone" ] || gone=$SECONDS
            if [ $((SECONDS - gone)) -ge "$linger" ]; then
                stopped=1
                echo "cluster.sh: run: every rank of $name has ended, but the launcher has not $linger s later" \
                    "(it waits for a host it cannot reach): stopping it" >&2
                # $launcher is the shell running in_host; its child is the launcher (or `timeout`)
                pkill -TERM -P "$launcher" 2> /dev/null || true
                sleep 2
                pkill -KILL -P "$launcher" 2> /dev/null || true
                break
            fi
        fi
    done
    wait "$launcher" || status=$?
    trap - INT TERM
    eval "$traps"
    if [ $status -eq 0 ] && [ $stopped = 1 ]; then status=1; fi
    [ $status -ne 124 ] && [ $status -ne 137 ] || [ "$timeout_s" = 0 ] ||
        echo "cluster.sh: run: the job did not end within --timeout $timeout_s s: stopped" >&2
    kill_job_leftovers "$program"
    after=$(counters)
    paste <(echo "$before") <(echo "$after") | awk '{printf "cluster.sh: host %s eth0 sent %.0f bytes, received %.0f\n", $2, $12 - $5, $14 - $7}'
    return $status
}

cmd=${1:-}
[ -n "$cmd" ] || usage 2
shift
case "$cmd" in
    up) [ $# -ge 1 ] || die "up: give the number of hosts"; up "$@" ;;
    down) need_root; down ;;
    run) run "$@" ;;
    counters) counters ;;
    exec)
        [ $# -ge 3 ] && [ "$2" = -- ] || die "exec: usage: exec HOST -- command..."
        h=$1
        shift 2
        cpus_of=()
        [ ! -f "$STATE/cpus$h" ] || cpus_of=(taskset -c "$(cat "$STATE/cpus$h")")
        in_ns "$(host_ns "$h")" "${cpus_of[@]}" "$@"
        ;;
    with)
        [ $# -ge 1 ] || die "with: give the number of hosts"
        n=$1
        shift
        up_args=()
        while [ $# -gt 0 ] && [ "$1" != -- ]; do up_args+=("$1"); shift; done
        [ "${1:-}" = -- ] || die "with: put -- before the program"
        shift
        trap 'down' EXIT
        trap 'exit 130' INT TERM
        up "$n" "${up_args[@]}"
        trap 'down' EXIT  # up clears its own traps when it succeeds
        trap 'exit 130' INT TERM
        run -- "$@"
        ;;
    -h | --help) usage 0 ;;
    *) die "unknown command '$cmd' (up, run, exec, counters, down, with)" ;;
esac
