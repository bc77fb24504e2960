#!/usr/bin/env bash
# Runs the hostfile commands of docs/clusters.md (section "Hostfiles") on 2 simulated hosts of
# scripts/cluster.sh, as the page writes them: the page's hostfile for the MPI, with its node names node1 and
# node2 replaced by the hosts' names (dtrain-cl-h1, dtrain-cl-h2), and the page's command line, unchanged,
# started on host 1 in a folder that holds the hostfile (hosts), ./quickstart and data/iris.csv. Both are
# read from the page (the blocks starting "# hosts for MPICH" / "# hosts for Open MPI", the commands
# starting "mpiexec.mpich -f" / "mpirun.openmpi --hostfile"), so the page cannot drift.
# What differs from a cluster: the launchers start their daemons over ssh, which cannot enter a simulated
# host; they are given cluster.sh's launcher instead, through the environment (Hydra: HYDRA_LAUNCHER=rsh
# HYDRA_LAUNCHER_EXEC, the variables of -launcher rsh -launcher-exec; Open MPI: OMPI_MCA_plm_rsh_agent),
# behind a wrapper that turns a host's name into its address and logs each start. The hosts find each
# other's names in a hosts file of the run (mounted over /etc/hosts in a mount namespace of the launch,
# which the daemons started on the other host inherit), as a cluster's nodes find theirs in DNS or
# /etc/hosts. The ranks' environment: OPENBLAS_NUM_THREADS=1, DTRAIN_FINALIZE_TIMEOUT=5 and, for MPICH,
# UCX_TLS=self,tcp UCX_NET_DEVICES=eth0 (docs/clusters.md: with UCX's default transports the ranks of two
# namespaces of one machine talk through shared memory).
# Checks: the launcher ends with status 0 (or, MPICH 4.0.2 over UCX/TCP hanging in MPI_Finalize, Hydra's 255
# or Open MPI's 1 after dtrain's bounded finalize printed so: the results are checked all the same), exactly
# one "training accuracy" line (2 singletons would print one each) of at least 0.95, the wrapper was asked
# to start on dtrain-cl-h2, and both hosts' eth0 sent at least 100000 bytes during the run (ranks on the
# same host would leave host 2's link idle).
#
# Usage: hostfile_guide.sh --mpi mpich|openmpi --quickstart PATH --source DIR --workdir DIR [--timeout S]
#   --timeout S  the launcher's bound (default 60): MPIEXEC_TIMEOUT, which both launchers read, and `timeout`
#                10 s later
# Run by run_multihost.sh, which holds the cluster lock, reports Skipped where no cluster can be made and
# removes what is left; this script brings up its cluster (`cluster.sh up 2`) and removes it when it ends.
set -euo pipefail

mpi="" quickstart="" source_dir="" workdir="" timeout_s=60
while [ $# -gt 0 ]; do
    case "$1" in
        --mpi) mpi=${2:?--mpi needs mpich or openmpi}; shift 2 ;;
        --quickstart) quickstart=${2:?--quickstart needs a path}; shift 2 ;;
        --source) source_dir=${2:?--source needs a directory}; shift 2 ;;
        --workdir) workdir=${2:?--workdir needs a directory}; shift 2 ;;
        --timeout) timeout_s=${2:?--timeout needs seconds}; shift 2 ;;
        *) echo "hostfile_guide.sh: unknown option '$1'" >&2; exit 2 ;;
    esac
done
for v in mpi quickstart source_dir workdir; do
    [ -n "${!v}" ] || { echo "hostfile_guide.sh: --${v/_dir/} is required" >&2; exit 2; }
done
fail() {
    echo "FAILED: $*"
    exit 1
}
page="$source_dir/docs/clusters.md"
# shellcheck source=/dev/null
. "$source_dir/scripts/cluster.sh"

# The page's hostfile (the code block whose first line starts with $1) and command (the first code span of
# the section "Hostfiles" that starts with $2).
section=$(sed -n '/^## Hostfiles/,/^## /p' "$page")
case "$mpi" in
    mpich) block_start="# hosts for MPICH" command_start="mpiexec.mpich -f" ;;
    openmpi) block_start="# hosts for Open MPI" command_start="mpirun.openmpi --hostfile" ;;
    *) echo "hostfile_guide.sh: --mpi must be mpich or openmpi, got '$mpi'" >&2; exit 2 ;;
esac
hostfile=$(awk -v start="$block_start" '/^```/ { if (take) exit; fence = 1; next }
    fence && index($0, start) == 1 { take = 1 } { fence = 0 } take' <<< "$section")
[ -n "$hostfile" ] || fail "no code block starting with '$block_start' in the section Hostfiles of $page"
# shellcheck disable=SC2016 # backquotes of markdown
command_line=$(grep -o '`[^`]*`' <<< "$section" | tr -d '`' |
    awk -v start="$command_start" 'index($0, start) == 1 { print; exit }')
[ -n "$command_line" ] || fail "no command starting with '$command_start' in the section Hostfiles of $page"
read -ra command <<< "$command_line"

rm -rf "$workdir"
mkdir -p "$workdir"
# The hosts' names for the page's (node1 is host 1, where the command starts).
sed 's/\bnode\([0-9][0-9]*\)\b/dtrain-cl-h\1/g' <<< "$hostfile" > "$workdir/hosts"
ln -s "$quickstart" "$workdir/quickstart"
ln -s "$source_dir/data" "$workdir/data"
{
    echo "127.0.0.1 localhost"
    for i in 1 2; do echo "198.18.0.$i dtrain-cl-h$i"; done
} > "$workdir/etc-hosts"
# ssh's stand-in: "launcher NAME COMMAND..." runs COMMAND on the simulated host NAME (dtrain-cl-hI).
cat > "$workdir/launcher" << EOF
#!/bin/sh
echo "\$1" >> "$workdir/launches.log"
host=\$1
shift
exec "$CLUSTER_STATE/launcher" "198.18.0.\${host##*-h}" "\$@"
EOF
chmod +x "$workdir/launcher"
echo "hostfile_guide.sh: $workdir/hosts:"
sed 's/^/    /' "$workdir/hosts"

trap '"$CLUSTER_SH" down' EXIT
"$CLUSTER_SH" up 2 --rate 10gbit --no-check

env=(OPENBLAS_NUM_THREADS=1 DTRAIN_FINALIZE_TIMEOUT=5 MPIEXEC_TIMEOUT="$timeout_s")
bound=(timeout -k 5 $((timeout_s + 10)))
if [ "$mpi" = mpich ]; then
    # shellcheck disable=SC2054 # the commas are inside values
    env+=(UCX_TLS=self,tcp UCX_NET_DEVICES=eth0 HYDRA_LAUNCHER=rsh HYDRA_LAUNCHER_EXEC="$workdir/launcher")
else
    env+=(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
          OMPI_MCA_plm_rsh_agent="$workdir/launcher")
fi
before=$("$CLUSTER_SH" counters)
echo "hostfile_guide.sh: on dtrain-cl-h1 in $workdir: ${command[*]}"
status=0
# shellcheck disable=SC2016 # $0 and $@ are the inner shell's
ip netns exec dtrain-cl-h1 unshare --mount --uts sh -c \
    'mount --bind "$0/etc-hosts" /etc/hosts && hostname dtrain-cl-h1 && cd "$0" && exec "$@"' \
    "$workdir" env "${env[@]}" "${bound[@]}" "${command[@]}" > "$workdir/output.log" 2>&1 9>&- ||
    status=$?
after=$("$CLUSTER_SH" counters)
cat "$workdir/output.log"
[ $status -ne 124 ] && [ $status -ne 137 ] || fail "no end after $timeout_s s (a hang): ${command[*]}"
if [ $status -ne 0 ]; then
    grep -q "MPI_Finalize has not returned although every rank has finished its work" "$workdir/output.log" ||
        fail "${command[*]}: status $status"
    echo "hostfile_guide.sh: status $status after dtrain ended a hung MPI_Finalize: accepted"
fi

lines=$(grep -c '^training accuracy' "$workdir/output.log" || true)
[ "$lines" -eq 1 ] || fail "$lines 'training accuracy' lines, not 1 (2 singletons print one each)"
grep -Eq '^training accuracy (0\.9[5-9]|1\.0)' "$workdir/output.log" ||
    fail "the training accuracy is below 0.95"
touch "$workdir/launches.log"
grep -qx dtrain-cl-h2 "$workdir/launches.log" ||
    fail "the launcher started nothing on dtrain-cl-h2 (it started on: $(xargs < "$workdir/launches.log"))"
echo "hostfile_guide.sh: the launcher started daemons on: $(sort -u "$workdir/launches.log" | xargs)"
while read -r host tx_before tx_after; do
    sent=$((tx_after - tx_before))
    echo "hostfile_guide.sh: host $host eth0 sent $sent bytes"
    [ "$sent" -ge 100000 ] ||
        fail "host $host's eth0 sent $sent bytes, fewer than 100000: the ranks did not run on both hosts"
done < <(paste <(echo "$before") <(echo "$after") | awk '{print $2, $5, $12}')
echo "PASSED: ${command[*]} with the page's hostfile on 2 hosts"
