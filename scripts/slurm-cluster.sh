#!/usr/bin/env bash
# A simulated Slurm cluster on one machine, to launch dtrain programs the way users do on a cluster
# (sbatch, srun, salloc). A controller and N compute nodes, each a network namespace joined through a
# bridge (addresses 198.19.0.0/24: nodes 198.19.0.1 ... 198.19.0.N, the controller 198.19.0.100; nothing
# is sent anywhere else), each with a hostname of its own (a UTS namespace): the controller "ctl", the
# nodes n1 ... nN, found through an /etc/hosts of their own (a mount namespace).
# The controller runs slurmctld and munged (its own key and socket, not the machine's); node I runs
# `slurmd -N nI`. Processes are tracked with proctrack/linuxproc and task/none: no cgroup is created
# (slurmd still loads its cgroup plugin, cgroup.conf's CgroupPlugin: cgroup/v1, or cgroup/v2 on a
# machine with cgroup2 only). TmpFS is a directory per node (the PMIx plugin puts
# its sockets there). Needs root, iproute2, util-linux and Debian's slurmctld, slurmd, slurm-client and
# munge (`up` installs them with scripts/install-deps.sh --slurm when missing; libpmix-dev too, which
# Slurm's PMIx plugin loads for Open MPI's srun --mpi=pmix).
#
# Usage: scripts/slurm-cluster.sh up N [--wait S]
#          N nodes (1-16). Takes the simulated clusters' lock (below), waiting up to S seconds (default
#          240), and holds it until `down`: the daemons inherit it.
#        scripts/slurm-cluster.sh run [--node I] [--] COMMAND...
#          runs COMMAND as a Slurm client on the controller (--node I: on node I), with SLURM_CONF set:
#          e.g. run sbatch job.sh, run srun -N2 hostname, run salloc -N2 mpiexec.mpich ./prog
#        scripts/slurm-cluster.sh counters          prints each node's eth0 tx/rx bytes
#        scripts/slurm-cluster.sh down              stops the daemons and jobs and removes everything `up`
#                                                   created (idempotent)
#        scripts/slurm-cluster.sh with N [--wait S] -- COMMAND...
#          up, run, down in one go; down runs also after a failure, Ctrl-C or SIGTERM, at once (it ends
#          COMMAND and its job with the cluster).
# `up` removes what it created when it fails or is interrupted (Ctrl-C, SIGTERM). State (slurm.conf, munge
# key and socket, spool directories, logs) lives in ${DTRAIN_SLURM_DIR:-/run/dtrain-slurm}; logs in its log/
# folder.
#
# The lock. This cluster and scripts/cluster.sh's use the same machine-wide lock, an flock on
# ${DTRAIN_CLUSTER_DIR:-/run/dtrain-cluster}.lock (descriptor 9), so that only one simulated cluster exists
# at a time. `up` takes it and its daemons hold it until `down`. A caller that holds the lock on
# descriptor 9 already (scripts/cluster.sh's cluster_lock, the Slurm tests) keeps it: `up` then uses the
# caller's, and the cluster must go (`down`) before the caller ends.
# Only namespaces named dtrain-sl-* are created or deleted; the machine's interfaces are not touched.
set -euo pipefail

PREFIX=dtrain-sl
STATE=${DTRAIN_SLURM_DIR:-/run/dtrain-slurm}
LOCK=${DTRAIN_CLUSTER_DIR:-/run/dtrain-cluster}.lock # scripts/cluster.sh's
NET=198.19.0
CTL_IP=$NET.100
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

die() {
    echo "slurm-cluster.sh: $*" >&2
    exit 2
}
usage() {
    sed -n '2,/^[^#]/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
    exit "${1:-2}"
}
namespaces() { ip netns list 2> /dev/null | awk '{print $1}' | grep "^$PREFIX-" || true; }
nodes() { [ -f "$STATE/nodes" ] && cat "$STATE/nodes" || echo 0; }
# in_ns NS HOSTNAME COMMAND...: runs COMMAND in network namespace NS under a hostname of its own (a UTS
# namespace) with the cluster's /etc/hosts, in a mount namespace of its own whose /sys is NS's (what
# `ip netns exec` mounts, so that /sys/class/net lists NS's interfaces) with the machine's cgroup
# file systems moved into it (slurmd refuses to start without them, even though it tracks no cgroup).
in_ns() {
    local ns=$1 name=$2
    shift 2
    # shellcheck disable=SC2016 # $0 and $@ are the inner shell's
    nsenter --net="/run/netns/$ns" unshare --mount --uts sh -c '
        mount --bind "$1/hosts" /etc/hosts &&
        mount --rbind /sys/fs/cgroup "$1/cgroup" && umount -l /sys && mount -t sysfs sysfs /sys &&
        mount --move "$1/cgroup" /sys/fs/cgroup && hostname "$0" && shift && exec "$@"' "$name" "$STATE" "$@"
}

need_root() {
    [ "$(id -u)" -eq 0 ] || die "needs root (network namespaces need CAP_NET_ADMIN); run it with sudo"
}

need_tools() {
    local missing=() t
    for t in ip unshare nsenter flock slurmctld slurmd srun sbatch salloc sinfo munged mungekey; do
        command -v "$t" > /dev/null || missing+=("$t")
    done
    [ -e /usr/lib/x86_64-linux-gnu/libpmix.so ] || missing+=(libpmix.so)
    if [ ${#missing[@]} -gt 0 ]; then
        echo "slurm-cluster.sh: ${missing[*]} missing: installing with scripts/install-deps.sh --slurm" >&2
        "$HERE/install-deps.sh" --slurm >&2 9>&- || die "installing Slurm and munge failed"
    fi
}

down() {
    local ns pids
    for ns in $(namespaces); do
        pids=$(ip netns pids "$ns" 2> /dev/null | xargs || true)
        # shellcheck disable=SC2086 # one pid per word
        [ -z "$pids" ] || kill -9 $pids 2> /dev/null || true
    done
    for ns in $(namespaces); do ip netns del "$ns" 2> /dev/null || true; done
    rm -rf "$STATE"
}

# Takes the lock on descriptor 9 within $1 seconds. When the caller holds it there already, the caller's
# lifetime bounds the cluster's: own_lock=0, and the daemons do not keep the lock (a caller that ends
# removes the cluster, or the next holder of the lock does). Otherwise the daemons inherit it: own_lock=1.
own_lock=1
take_lock() {
    if [ "$(readlink /proc/$$/fd/9 2> /dev/null || true)" = "$LOCK" ] && flock -n 9; then
        own_lock=0
        return 0
    fi
    mkdir -p "$(dirname "$LOCK")"
    exec 9> "$LOCK"
    if ! flock -w "$1" 9; then
        die "the simulated clusters' lock $LOCK is still held after $1 s (by a scripts/cluster.sh or" \
            "slurm-cluster.sh cluster in use; a leftover Slurm cluster goes with: sudo $0 down)"
    fi
}
# Starts a daemon: in_ns's arguments; it keeps the lock only when this script took it.
start() {
    if [ $own_lock = 1 ]; then in_ns "$@"; else in_ns "$@" 9>&-; fi
}

write_config() {
    local n=$1 i
    # munged wants its socket's directory searchable by all, its key and directories writable by root only.
    mkdir -p "$STATE"/{ctld,log,run,munge,spool,tmp,cgroup}
    chmod 755 "$STATE" "$STATE/munge"
    {
        echo "127.0.0.1 localhost"
        echo "$CTL_IP ctl"
        for i in $(seq "$n"); do echo "$NET.$i n$i"; done
    } > "$STATE/hosts"
    local cpus
    cpus=$(nproc)
    cat > "$STATE/slurm.conf" << EOF
ClusterName=dtrain
SlurmctldHost=ctl($CTL_IP)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$STATE/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/spool/%n
SlurmctldPidFile=$STATE/run/slurmctld.pid
SlurmdPidFile=$STATE/run/slurmd-%n.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd-%n.log
TmpFS=$STATE/tmp/%n
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=30
MailProg=/bin/true
NodeName=n[1-$n] CPUs=$cpus RealMemory=100 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=30 State=UP OverSubscribe=YES
EOF
    if [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ]; then
        printf 'CgroupPlugin=cgroup/v2\nIgnoreSystemd=yes\n' > "$STATE/cgroup.conf"
    else
        echo 'CgroupPlugin=cgroup/v1' > "$STATE/cgroup.conf"
    fi
    for i in $(seq "$n"); do mkdir -p "$STATE/spool/n$i" "$STATE/tmp/n$i"; done
    echo "$n" > "$STATE/nodes"
}

# Adds namespace $1 with address $2 on port $3 of the bridge.
add_host() {
    local ns=$PREFIX-$1
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    ip -n "$ns" link add eth0 type veth peer name "$3" netns "$PREFIX-sw"
    ip -n "$ns" addr add "$2/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$PREFIX-sw" link set "$3" master br0
    ip -n "$PREFIX-sw" link set "$3" up
}

# Waits up to $2 seconds until sinfo reports $1 idle nodes.
wait_idle() {
    local i idle=0
    for i in $(seq $(($2 * 4))); do
        idle=$(run sinfo -h -t idle -o '%D' 2> /dev/null | awk '{s += $1} END {print s + 0}')
        [ "$idle" -ge "$1" ] && return 0
        sleep 0.25
    done
    run sinfo -N >&2 || true
    tail -n 20 "$STATE"/log/*.log >&2 || true
    die "up: $idle of $1 nodes idle after $2 s (logs above, in $STATE/log)"
}

up() {
    local n=${1:-} wait=240
    shift || true
    [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 16 ] || die "up: N must be 1 to 16 nodes, got '$n'"
    while [ $# -gt 0 ]; do
        case "$1" in
            --wait) wait=${2:?--wait needs seconds}; shift 2 ;;
            *) die "up: unknown option '$1' (known: --wait S)" ;;
        esac
    done
    need_root
    need_tools
    take_lock "$wait"
    [ -z "$(namespaces)" ] && [ ! -e "$STATE" ] ||
        die "a Slurm cluster is there already ($(namespaces | xargs)); remove it with: sudo $0 down"
    # Whatever fails from here on leaves nothing behind.
    trap 'down; exit 130' INT TERM
    # shellcheck disable=SC2154 # status is the trap's own
    trap 'status=$?; [ $status -eq 0 ] || down' EXIT
    ip netns add "$PREFIX-probe" 2> /dev/null ||
        die "cannot create a network namespace here (no permission, or the kernel or container forbids it)"
    ip netns del "$PREFIX-probe"
    write_config "$n"
    ip netns add "$PREFIX-sw"
    ip -n "$PREFIX-sw" link set lo up
    ip -n "$PREFIX-sw" link add br0 type bridge
    ip -n "$PREFIX-sw" link set br0 up
    add_host ctl "$CTL_IP" port0
    local i
    for i in $(seq "$n"); do add_host "n$i" "$NET.$i" "port$i"; done
    # munge: a key of its own; munged refuses a key or directories others may write.
    mungekey -c -k "$STATE/munge/munge.key" > /dev/null
    chmod 400 "$STATE/munge/munge.key"
    start "$PREFIX-ctl" ctl munged -f --socket="$STATE/munge/munge.socket" --key-file="$STATE/munge/munge.key" \
        --pid-file="$STATE/run/munged.pid" --log-file="$STATE/log/munged.log" \
        --seed-file="$STATE/munge/munged.seed" ||
        die "up: munged did not start ($STATE/log/munged.log)"
    export SLURM_CONF=$STATE/slurm.conf
    start "$PREFIX-ctl" ctl slurmctld -i -f "$SLURM_CONF" || die "up: slurmctld did not start"
    for i in $(seq "$n"); do
        start "$PREFIX-n$i" "n$i" slurmd -f "$SLURM_CONF" -N "n$i" || die "up: slurmd of n$i did not start"
    done
    wait_idle "$n" 30
    echo "slurm-cluster.sh: $n nodes up (n1 ... n$n, $NET.1 ... $NET.$n), controller ctl ($CTL_IP);" \
        "SLURM_CONF=$SLURM_CONF"
    trap - INT TERM EXIT
}

run() {
    local where=ctl
    [ "$(nodes)" -ge 1 ] || die "run: no Slurm cluster is up (scripts/slurm-cluster.sh up N)"
    while [ $# -gt 0 ]; do
        case "$1" in
            --node) where=n${2:?--node needs a node number}; shift 2 ;;
            --) shift; break ;;
            *) break ;;
        esac
    done
    [ $# -gt 0 ] || die "run: no command given"
    ip netns list | grep -q "^$PREFIX-$where\b" || die "run: there is no $where (nodes: n1 ... n$(nodes))"
    in_ns "$PREFIX-$where" "$where" env SLURM_CONF="$STATE/slurm.conf" "$@" 9>&-
}

counters() {
    local i
    for i in $(seq "$(nodes)"); do
        printf 'n%s eth0 tx_bytes %s rx_bytes %s\n' "$i" \
            "$(ip netns exec "$PREFIX-n$i" cat /sys/class/net/eth0/statistics/tx_bytes)" \
            "$(ip netns exec "$PREFIX-n$i" cat /sys/class/net/eth0/statistics/rx_bytes)"
    done
}

cmd=${1:-}
[ -n "$cmd" ] || usage 2
shift
case "$cmd" in
    up) up "$@" ;;
    run) run "$@" ;;
    counters) counters ;;
    down) need_root; down ;;
    with)
        n=${1:-}
        shift || true
        up_args=()
        while [ $# -gt 0 ] && [ "$1" != -- ]; do up_args+=("$1"); shift; done
        [ "${1:-}" = -- ] || die "with: put -- before the command"
        shift
        trap 'down' EXIT
        trap 'exit 130' INT TERM
        up "$n" ${up_args[@]+"${up_args[@]}"}
        trap 'down' EXIT # up clears its own traps when it succeeds
        # The command runs in the background (its standard input kept) and the script waits for it: bash
        # runs a trap only once the foreground command has ended, and srun outlives a single Ctrl-C (it
        # prints the job's state and ends only at a second one within a second), so INT or TERM would wait
        # for the job. `down` then ends the command and the job with the cluster.
        run -- "$@" 0<&0 &
        command_pid=$!
        trap 'kill $command_pid 2> /dev/null; exit 130' INT TERM
        wait $command_pid
        ;;
    -h | --help) usage 0 ;;
    *) die "unknown command '$cmd' (up, run, counters, down, with)" ;;
esac
