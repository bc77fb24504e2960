#!/usr/bin/env bash
# Runs one multihost test (ctest label multihost): COMMAND starts an MPI program across simulated hosts
# through scripts/cluster.sh (`cluster.sh with N --rate 10gbit -- program ...`, directly or from a CMake
# script). Exit 77 (ctest: Skipped) with the reason printed when the test cannot run here.
#
# Usage: run_multihost.sh --program PATH [--timeout S] [--expect REGEX]... [--min-sent BYTES] -- COMMAND...
#        run_multihost.sh --program PATH --cleanup
#   --program PATH    the MPI program COMMAND runs; its MPI (ldd: libmpi.so.40 is Open MPI) decides whether
#                     the test runs: with MPICH it is Skipped unless DTRAIN_MULTIHOST_MPICH=1, because
#                     MPICH 4.0.2 + UCX over TCP hangs in MPI_Finalize in some runs (UCX issue 8738; see
#                     the header of scripts/cluster.sh), and a test that hangs by chance is no test. The
#                     answer goes to cluster.sh as DTRAIN_CLUSTER_MPI, so it launches with that MPI
#   --timeout S       seconds COMMAND may take (default 240); then it is stopped (TERM to its process
#                     group, KILL 10 s later), the cluster removed, and the test fails as a hang. Each
#                     `cluster.sh run` inside gets S - 20 s (DTRAIN_CLUSTER_TIMEOUT, unless set): the
#                     launcher's own bound, so that a launcher waiting for an unreachable host ends, and
#                     names its bound, before the whole command is stopped
#   --expect REGEX    COMMAND's output must match the extended regular expression (repeatable)
#   --min-sent BYTES  every host's eth0 must have sent at least BYTES during the run (the lines
#                     "cluster.sh: host I eth0 sent B bytes" that `cluster.sh run` prints)
#   --cleanup         only remove what earlier runs left (ctest's cleanup fixture of the multihost tests)
# Skipped (77) when: the program uses MPICH (above); not root; iproute2 (ip, tc) or python3 is missing;
# a network namespace cannot be created (container or kernel forbids it).
# The simulated cluster is global to the machine (namespaces dtrain-cl-*, state in
# ${DTRAIN_CLUSTER_DIR:-/run/dtrain-cluster}), so a run holds the cluster lock, an flock on that path +
# ".lock" (scripts/cluster.sh's cluster_lock: also against other ctest runs and scripts that take it too;
# ctest's RESOURCE_LOCK covers one run only), waiting for it
# up to 240 s (--cleanup does not wait: a held lock means a cluster in use). Holding it, it removes whatever
# an earlier run left (ctest kills a test that exceeds its TIMEOUT with SIGKILL, which no trap survives):
# first the processes still inside the namespaces, then the namespaces and the state (`cluster.sh down`),
# before and after COMMAND. It fails if any dtrain-cl-* namespace remains at the end. A cluster made by hand
# with `cluster.sh up` (without the lock) while multihost tests run is removed as a leftover.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=../../scripts/cluster.sh
. "$(dirname "$0")/../../scripts/cluster.sh"
program="" timeout_s=240 min_sent="" expects=() cleanup_only=0
while [ $# -gt 0 ] && [ "$1" != -- ]; do
    case "$1" in
        --program) program=${2:?--program needs a path}; shift 2 ;;
        --timeout) timeout_s=${2:?--timeout needs seconds}; shift 2 ;;
        --expect) expects+=("${2:?--expect needs a regular expression}"); shift 2 ;;
        --min-sent) min_sent=${2:?--min-sent needs a byte count}; shift 2 ;;
        --cleanup) cleanup_only=1; shift ;;
        *) echo "run_multihost.sh: unknown option '$1'" >&2; exit 2 ;;
    esac
done
if [ -z "$program" ] || { [ $cleanup_only = 0 ] && { [ "${1:-}" != -- ] || [ $# -lt 2 ]; }; }; then
    echo "run_multihost.sh: usage: run_multihost.sh --program PATH [options] -- COMMAND..." >&2
    exit 2
fi
[ $# -eq 0 ] || shift

skip() {
    echo "SKIPPED: $*"
    exit 77
}

[ -x "$program" ] || {
    echo "FAILED: $program is not built"
    exit 1
}
# The MPI (not `ldd | grep -q`, whose early exit can kill ldd with SIGPIPE, a miss under pipefail).
case "$(ldd "$program" 2> /dev/null || true)" in
    *libmpi.so.40*) export DTRAIN_CLUSTER_MPI=openmpi ;;
    *) export DTRAIN_CLUSTER_MPI=mpich ;;
esac
if [ "$DTRAIN_CLUSTER_MPI" = mpich ]; then
    [ "${DTRAIN_MULTIHOST_MPICH:-0}" = 1 ] ||
        skip "$(basename "$program") uses MPICH: MPICH 4.0.2 + UCX over TCP hangs in MPI_Finalize in some" \
            "runs (UCX issue 8738, see scripts/cluster.sh), so the multihost tests run in the openmpi" \
            "configuration only (DTRAIN_MULTIHOST_MPICH=1 runs them anyway)"
fi
[ "$(id -u)" -eq 0 ] || skip "network namespaces need root (CAP_NET_ADMIN); this runs as $(id -un)"
for tool in ip tc python3 flock timeout unshare; do
    command -v "$tool" > /dev/null ||
        skip "$tool is not installed (Debian: iproute2, python3, util-linux, coreutils)"
done

if [ $cleanup_only = 1 ] && ! cluster_lock 0; then
    # Another run (a test of another ctest, a benchmark) holds the cluster: what exists is its own.
    echo "PASSED: another run holds $CLUSTER_LOCK, so the simulated cluster is in use, not left over"
    exit 0
fi
if ! cluster_lock 240; then
    echo "FAILED: another run has held $CLUSTER_LOCK (the simulated cluster) for 240 s"
    exit 1
fi

# Removes the simulated cluster and everything still running inside it.
cleanup() { cluster_clear | sed 's/^/run_multihost.sh: /'; }

if cluster_is_up; then
    echo "run_multihost.sh: removing what an earlier run left: $(cluster_namespaces | xargs)"
    cleanup
fi
left=$(cluster_namespaces)
[ -z "$left" ] || {
    echo "FAILED: cannot remove the namespaces $left"
    exit 1
}
if [ $cleanup_only = 1 ]; then
    echo "PASSED: no dtrain-cl-* namespace left"
    exit 0
fi
if ! ip netns add dtrain-cl-probe 2> /dev/null; then
    skip "cannot create a network namespace here (no permission, or the kernel or container forbids it)"
fi
ip netns del dtrain-cl-probe

log=$(mktemp)
trap 'cleanup; rm -f "$log"' EXIT
export DTRAIN_CLUSTER_TIMEOUT=${DTRAIN_CLUSTER_TIMEOUT:-$((timeout_s > 40 ? timeout_s - 20 : timeout_s))}
# COMMAND writes to a file that tail copies to the output as it grows (so a test that ctest kills still
# shows how far it got), not to a pipe, which a process left behind by a hang would hold open. The lock's
# descriptor is closed for COMMAND, so nothing it leaves behind keeps the lock.
status=0
timeout -k 10 "$timeout_s" "$@" > "$log" 2>&1 9>&- &
command_pid=$!
tail -n +1 -f --pid="$command_pid" "$log" 9>&- &
tail_pid=$!
wait "$command_pid" || status=$?
wait "$tail_pid" || true
fail() {
    echo "FAILED: $*"
    exit 1
}
if [ $status -eq 124 ] || [ $status -eq 137 ]; then
    fail "no end after $timeout_s s (a hang): stopped, and the cluster removed; not retried"
fi
[ $status -eq 0 ] || fail "exit status $status: $*"
for re in ${expects[@]+"${expects[@]}"}; do
    grep -Eq -- "$re" "$log" || fail "the output does not match '$re'"
done
if [ -n "$min_sent" ]; then
    sent=$(sed -n 's/^cluster\.sh: host \([0-9]*\) eth0 sent \([0-9]*\) bytes.*/\1 \2/p' "$log")
    [ -n "$sent" ] || fail "no per-host byte counts from cluster.sh in the output"
    while read -r host bytes; do
        [ "$bytes" -ge "$min_sent" ] || fail "host $host's eth0 sent $bytes bytes, fewer than $min_sent"
        echo "run_multihost.sh: host $host's eth0 sent $bytes bytes >= $min_sent"
    done <<< "$sent"
fi
cleanup
left=$(cluster_namespaces)
[ -z "$left" ] || fail "namespaces left after the run: $(echo "$left" | xargs)"
echo "PASSED"
