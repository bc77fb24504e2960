#!/bin/sh
# Runs the "rank 1 stops after its last dtrain operation" scenario N times and reports how many runs ended
# with the expected message and status, and the longest run.
# Usage: tests/core/repeat_end_stopped.sh <core_lifecycle_program> [runs=50] [mpiexec=mpiexec.mpich] [policy=ring]
program=$1
runs=${2:-50}
mpiexec=${3:-mpiexec.mpich}
policy=${4:-ring}
ok=0
max=0
out=$(mktemp)
i=0
while [ "$i" -lt "$runs" ]; do
    i=$((i + 1))
    start=$(date +%s.%N)
    DTRAIN_STALL_TIMEOUT=4 timeout 60 "$mpiexec" -n 2 "$program" stop_end "$policy" >"$out" 2>&1
    rc=$?
    took=$(echo "$(date +%s.%N) - $start" | bc)
    max=$(echo "if ($took > $max) $took else $max" | bc)
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -q "in MPI_Finalize for rank 1; rank 1 (host .*) did not answer" "$out"; then
        ok=$((ok + 1))
    else
        echo "run $i: exit $rc after $took s"
        cat "$out"
    fi
done
rm -f "$out"
echo "$ok of $runs runs ended with the message and a non-zero status; longest run $max s"
