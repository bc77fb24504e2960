#!/usr/bin/env bash
# Speed between hosts: data-parallel training of the SINGA CNN and the 784-512-256-10 MLP over a
# simulated cluster of 2 hosts (scripts/cluster.sh: network namespaces on a bridge, each host's eth0
# shaped by tc tbf to the link rate; one rank per host; Open MPI, TCP BTL on eth0), per link rate, in
# interleaved rounds; then the summary (summarize.py). See README.md in this directory.
#
# Usage: sudo benchmarks/multihost/run.sh [build-dir]
#   build-dir: an Open MPI build (cmake --preset openmpi) with bench_train_dist built (default
#   build-openmpi). MPICH builds are refused (MPICH 4.0.2 + UCX over TCP hangs in MPI_Finalize in some
#   runs, see scripts/cluster.sh) unless ALLOW_MPICH=1.
# Per round and link rate (a cluster of its own: `cluster.sh up 2 --rate R`, its achieved bulk TCP rate
# recorded), per model, these launches in an order reversed every other round (configurations inside a
# launch reversed too):
#   - bench_train_dist --budget (BUDGET_POLICIES): rank 0's bare step alone (one rank), the bare step on
#     both ranks with no communication (the ceiling), and the gradient's all-reduce alone per policy;
#   - bench_train_dist per compression in COMPRESSIONS and bucket size in BUCKETS: every policy in POLICIES
#     x overlap in OVERLAP;
#   - PyTorch DDP (gloo) per compression in DDP_COMPRESSIONS (ddp_train.py, one process per host started
#     with `cluster.sh exec H`).
# Environment (defaults in brackets):
#   RATES ["25gbit 10gbit 1gbit"]  ROUNDS [3]  MODELS ["cnn mlp"]  POLICIES [collective,ring,naive]
#   OVERLAP [0,1]  BUCKETS ["1048576 524288"] (SyncOptions::bucket_bytes; 1 MiB is the default)
#   COMPRESSIONS ["none fp16 bf16 topk"] (also powersgd)  TOPK_RATIO [0.01]  POWERSGD_RANK [1]
#   POWERSGD_START [2] (both for dtrain's and DDP's powersgd)  DDP_COMPRESSIONS ["none fp16"] (also powersgd)
#   ("" skips DDP)  BUDGET_POLICIES [collective,ring,naive] ("" skips the budget launches)  BATCH [64]
#   STEPS_CNN [20]  STEPS_MLP [60]  REPS [3]  BUDGET_STEPS_CNN [10]  BUDGET_STEPS_MLP [30]  BUDGET_REPS [3]
#   TIMEOUT [300] seconds per launch (then it is stopped, recorded as status=timeout, and the run goes on)
#   LOCK_WAIT [900] seconds to wait for the cluster lock  OUT_DIR [benchmarks/multihost/results]
#   PYTHON [/usr/bin/python3, the one with Debian's python3-torch]  PNG [1]: also the plot
#   PIN [1]: `cluster.sh up --pin`, each host on CPUs of its own as separate machines are (0: the hosts
#   share every CPU, each believing it has them all)  CC [reno]: the hosts' TCP congestion control
#   (`cluster.sh up --cc`; "system" keeps the machine's)
# Output: OUT_DIR/multihost_raw.txt (every line of every launch, prefixed with its context),
# OUT_DIR/multihost.csv (one row per measurement), OUT_DIR/multihost_summary.txt (the tables) and
# OUT_DIR/multihost.png. The simulated cluster is global to the machine: every cluster session holds the
# cluster lock, the flock ${DTRAIN_CLUSTER_DIR:-/run/dtrain-cluster}.lock that the multihost tests hold
# (scripts/cluster.sh's cluster_lock), and is removed at its end, on failure and on Ctrl-C or TERM (trap); a
# cluster of someone else's that is up when the lock is free is left alone (that session is skipped and
# recorded).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cluster="$root/scripts/cluster.sh"
# shellcheck source-path=SCRIPTDIR source=../../scripts/cluster.sh
. "$cluster"
BUILD=${1:-$root/build-openmpi}
BIN="$BUILD/benchmarks/train_dist/bench_train_dist"
RATES=${RATES-"25gbit 10gbit 1gbit"}
ROUNDS=${ROUNDS:-3}
MODELS=${MODELS-"cnn mlp"}
POLICIES=${POLICIES:-collective,ring,naive}
OVERLAP=${OVERLAP:-0,1}
BUCKETS=${BUCKETS:-"1048576 524288"}
COMPRESSIONS=${COMPRESSIONS-"none fp16 bf16 topk"}
TOPK_RATIO=${TOPK_RATIO:-0.01}
POWERSGD_RANK=${POWERSGD_RANK:-1}
POWERSGD_START=${POWERSGD_START:-2}
DDP_COMPRESSIONS=${DDP_COMPRESSIONS-"none fp16"}
BUDGET_POLICIES=${BUDGET_POLICIES-collective,ring,naive}
BATCH=${BATCH:-64}
STEPS_CNN=${STEPS_CNN:-20}
STEPS_MLP=${STEPS_MLP:-60}
REPS=${REPS:-3}
BUDGET_STEPS_CNN=${BUDGET_STEPS_CNN:-10}
BUDGET_STEPS_MLP=${BUDGET_STEPS_MLP:-30}
BUDGET_REPS=${BUDGET_REPS:-3}
TIMEOUT=${TIMEOUT:-300}
LOCK_WAIT=${LOCK_WAIT:-900}
OUT_DIR=${OUT_DIR:-$here/results}
PYTHON=${PYTHON:-/usr/bin/python3}
PNG=${PNG:-1}
PIN=${PIN:-1}
CC=${CC:-reno}

die() {
    echo "run.sh: $*" >&2
    exit 2
}
[ "$(id -u)" -eq 0 ] || die "needs root (network namespaces); run it with sudo"
[ -x "$BIN" ] || die "$BIN is not built: cmake --preset openmpi -B $BUILD && cmake --build $BUILD --target bench_train_dist"
case "$(ldd "$BIN" 2> /dev/null || true)" in
    *libmpi.so.40*) export DTRAIN_CLUSTER_MPI=openmpi ;;
    *)
        [ "${ALLOW_MPICH:-0}" = 1 ] || die "$BIN is not an Open MPI build; MPICH 4.0.2 + UCX over TCP hangs in" \
            "MPI_Finalize in some runs (see scripts/cluster.sh). Use cmake --preset openmpi, or ALLOW_MPICH=1"
        export DTRAIN_CLUSTER_MPI=mpich
        ;;
esac
for tool in ip tc flock timeout unshare; do command -v "$tool" > /dev/null || die "needs $tool"; done
[ -z "$DDP_COMPRESSIONS" ] || "$PYTHON" -c 'import torch' 2> /dev/null ||
    die "$PYTHON cannot import torch (Debian: apt-get install python3-torch), or set DDP_COMPRESSIONS=\"\""
for c in $DDP_COMPRESSIONS; do
    case "$c" in none | fp16 | powersgd) ;; *) die "DDP_COMPRESSIONS: '$c' (DDP with gloo here: none, fp16, powersgd)" ;; esac
done

mkdir -p "$OUT_DIR"
RAW="$OUT_DIR/multihost_raw.txt"
CSV="$OUT_DIR/multihost.csv"
: > "$RAW"
export OPENBLAS_NUM_THREADS=1
export DTRAIN_CLUSTER_ENV="OPENBLAS_NUM_THREADS=1 ${DTRAIN_CLUSTER_ENV:-}"

log() { echo "run.sh: $*" | tee -a "$RAW"; }
reverse() { echo "$1" | tr ',' '\n' | tac | paste -sd, -; }

owned=0     # 1 while this script's cluster is up (and the lock held)
child=""    # the launch running now (a timeout process of this script)
ddp_pids=() # the DDP launches running now (timeout processes of this script)

# Everything still running in this script's cluster: processes that this script started (mpiexec, Open
# MPI's daemons, the ranks, DDP's processes), found by their network namespace.
kill_in_cluster() {
    [ "$owned" = 1 ] || return 0
    cluster_kill | while IFS= read -r line; do log "$line"; done
}

cluster_down() {
    if [ -n "$child" ]; then kill -TERM "$child" 2> /dev/null || true; fi
    for p in ${ddp_pids[@]+"${ddp_pids[@]}"}; do kill -TERM "$p" 2> /dev/null || true; done
    child="" ddp_pids=()
    if [ "$owned" = 1 ]; then
        cluster_clear | while IFS= read -r line; do log "$line"; done
        owned=0
        local left
        left=$(cluster_namespaces) # before the lock goes: then the next run's cluster may come up
        [ -z "$left" ] || log "WARNING: namespaces left after cluster.sh down: $(echo "$left" | xargs)"
        cluster_unlock
    fi
}
trap cluster_down EXIT
trap 'log "interrupted"; exit 130' INT TERM

# Brings up a 2-host cluster at rate $1 holding the lock; sets link_gbit. Returns 1 (recorded) if it could
# not: the lock was not free within LOCK_WAIT, someone else's cluster is up, or `up` failed.
cluster_up() {
    local rate=$1 out
    if ! cluster_lock "$LOCK_WAIT"; then
        log "round=$round rate=$rate | session status=lock_busy (held for $LOCK_WAIT s by another run)"
        return 1
    fi
    if cluster_is_up; then
        cluster_unlock
        log "round=$round rate=$rate | session status=cluster_busy: a simulated cluster is up that this" \
            "run did not start ($(cluster_namespaces | xargs)); left alone." \
            "Remove it with: sudo $cluster down"
        return 1
    fi
    owned=1
    local pin=()
    [ "$PIN" = 0 ] || pin=(--pin)
    if ! out=$("$cluster" up 2 --rate "$rate" --cc "$CC" "${pin[@]}" 9>&- 2>&1); then
        echo "$out" | sed "s/^/round=$round rate=$rate | /" >> "$RAW"
        log "round=$round rate=$rate | session status=up_failed: $(echo "$out" | tail -1)"
        cluster_down
        return 1
    fi
    echo "$out" | sed "s/^/round=$round rate=$rate | /" >> "$RAW"
    link_gbit=$(cluster_achieved_gbit "$out")
    link_gbit=${link_gbit:-nan}
    log "round=$round rate=$rate | session status=up link_gbit=$link_gbit load=$(cut -d' ' -f1 /proc/loadavg)" \
        "($(tail -1 <<< "$out"))"
}

# host I's eth0 tx_bytes (cluster.sh counters), empty if unreadable; diff_bytes BEFORE AFTER (nan if
# either is missing).
tx_bytes() { "$cluster" counters 9>&- 2> /dev/null | awk -v h="$1" '$2 == h {print $5}' || true; }
diff_bytes() { if [ -n "$1" ] && [ -n "$2" ]; then echo $(($2 - $1)); else echo nan; fi; }

# launch_begin notes the time and host 1's bytes sent so far (from the counters, not from the "sent" lines
# of `cluster.sh run`, whose awk printf %d stops at 2147483647 with mawk); launch_end PREFIX STATUS
# STEPS_TOTAL COMMAND... writes the "launch" line (status, seconds, host 1's bytes sent during the launch,
# the training steps it ran), and after a timeout (124, or 137 after the KILL) kills what still runs in
# the cluster and records status=timeout.
launch_begin() {
    launch_bytes=$(tx_bytes 1)
    launch_t0=$(date +%s.%N)
}
launch_end() {
    local prefix=$1 status=$2 steps_total=$3 st t1
    shift 3
    t1=$(date +%s.%N)
    st=$status
    if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
        st=timeout
        kill_in_cluster
    fi
    log "$prefix | launch status=$st seconds=$(elapsed "$launch_t0" "$t1")" \
        "tx1_bytes=$(diff_bytes "$launch_bytes" "$(tx_bytes 1)") steps_total=$steps_total"
    [ "$status" -eq 0 ] || log "$prefix | FAILED (status $st): $*"
}

# Runs bench_train_dist across the cluster: run_bench LABEL STEPS_TOTAL ARGS...; its lines go to RAW with
# the context prefix, then the launch line.
run_bench() {
    local label=$1 steps_total=$2 out status=0
    shift 2
    local prefix="round=$round rate=$rate link_gbit=$link_gbit launch=$label"
    out=$(mktemp)
    launch_begin
    timeout -k 10 "$TIMEOUT" "$cluster" run -- "$BIN" "$@" < /dev/null > "$out" 2>&1 9>&- &
    child=$!
    wait "$child" || status=$?
    child=""
    sed "s/^/$prefix | /" "$out" >> "$RAW"
    grep -E '^(result|budget) ' "$out" || true
    rm -f "$out"
    launch_end "$prefix" "$status" "$steps_total" bench_train_dist "$@"
}

# Runs ddp_train.py on both hosts, each under its own timeout: run_ddp LABEL MODEL COMPRESSION STEPS.
ddp_port=29500
run_ddp() {
    local label=$1 model=$2 comp=$3 steps=$4 status=0 s p h
    local prefix="round=$round rate=$rate link_gbit=$link_gbit launch=$label"
    local outs=("$(mktemp)" "$(mktemp)")
    ddp_port=$((ddp_port + 1))
    local args=(--world-size 2 --master-addr 198.18.0.1 --master-port "$ddp_port" --model "$model"
        --compression "$comp" --steps "$steps" --reps "$REPS" --batch "$BATCH")
    [ "$comp" != powersgd ] || args+=(--powersgd-rank "$POWERSGD_RANK" --powersgd-start "$POWERSGD_START")
    launch_begin
    ddp_pids=()
    for h in 1 2; do
        GLOO_SOCKET_IFNAME=eth0 timeout -k 10 "$TIMEOUT" "$cluster" exec "$h" -- \
            "$PYTHON" "$here/ddp_train.py" --rank $((h - 1)) "${args[@]}" < /dev/null > "${outs[h - 1]}" 2>&1 9>&- &
        ddp_pids+=($!)
    done
    for p in "${ddp_pids[@]}"; do
        s=0
        wait "$p" || s=$?
        [ "$status" != 0 ] || status=$s
    done
    ddp_pids=()
    for h in 0 1; do sed "s/^/$prefix rank=$h | /" "${outs[h]}" >> "$RAW"; done
    grep '^ddp ' "${outs[0]}" || true
    rm -f "${outs[@]}"
    launch_end "$prefix" "$status" $(($(max 5 $((steps / 5))) + steps * REPS)) ddp_train.py "${args[@]}"
}
max() { echo $(($1 > $2 ? $1 : $2)); }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

npol=$(echo "$POLICIES" | tr ',' '\n' | grep -c .)
nov=$(echo "$OVERLAP" | tr ',' '\n' | grep -c .)
log "start $(date -u +%FT%TZ) host=$(hostname) nproc=$(nproc) load=$(cut -d' ' -f1-3 /proc/loadavg)" \
    "bin=$BIN mpi=$DTRAIN_CLUSTER_MPI rates=\"$RATES\" rounds=$ROUNDS models=\"$MODELS\" policies=$POLICIES" \
    "overlap=$OVERLAP buckets=\"$BUCKETS\" compressions=\"$COMPRESSIONS\" topk_ratio=$TOPK_RATIO ddp=\"$DDP_COMPRESSIONS\"" \
    "budget_policies=$BUDGET_POLICIES batch=$BATCH steps_cnn=$STEPS_CNN steps_mlp=$STEPS_MLP reps=$REPS" \
    "timeout=$TIMEOUT git=$(git -C "$root" rev-parse --short HEAD 2> /dev/null || echo unknown)"
start=$(date +%s)
link_gbit=nan
for round in $(seq "$ROUNDS"); do
    rates=$RATES
    [ $((round % 2)) = 1 ] || rates=$(echo "$RATES" | tr ' ' '\n' | grep . | tac | xargs)
    for rate in $rates; do
        cluster_up "$rate" || continue
        # The launches of this run, one per line: kind model [compression [bucket bytes]].
        plan=$(for model in $MODELS; do
            [ -z "$BUDGET_POLICIES" ] || echo "budget $model"
            for c in $COMPRESSIONS; do for b in $BUCKETS; do echo "dtrain $model $c $b"; done; done
            for c in $DDP_COMPRESSIONS; do echo "ddp $model $c"; done
        done)
        pol=$POLICIES ov=$OVERLAP bpol=$BUDGET_POLICIES
        if [ $((round % 2)) = 0 ]; then
            plan=$(tac <<< "$plan")
            pol=$(reverse "$POLICIES") ov=$(reverse "$OVERLAP") bpol=$(reverse "$BUDGET_POLICIES")
        fi
        # The plan is read from descriptor 3 and every launch gets /dev/null as its input: mpiexec forwards
        # its standard input to rank 0 and would swallow the rest of the plan.
        while read -r kind model comp bucket <&3; do
            if [ "$model" = cnn ]; then steps=$STEPS_CNN bsteps=$BUDGET_STEPS_CNN; else steps=$STEPS_MLP bsteps=$BUDGET_STEPS_MLP; fi
            case "$kind" in
                budget)
                    run_bench "budget-$model" 0 --budget --model "$model" --policies "$bpol" --steps "$bsteps" \
                        --reps "$BUDGET_REPS" --batch "$BATCH"
                    ;;
                dtrain)
                    extra=()
                    [ "$comp" != topk ] || extra=(--topk-ratio "$TOPK_RATIO")
                    [ "$comp" != powersgd ] || extra=(--powersgd-rank "$POWERSGD_RANK" --powersgd-start "$POWERSGD_START")
                    run_bench "dtrain-$model-$comp-b$bucket" $((npol * nov * ($(max 5 $((steps / 5))) + steps * REPS))) \
                        --model "$model" --policies "$pol" --overlap "$ov" --steps "$steps" --reps "$REPS" \
                        --batch "$BATCH" --compression "$comp" --bucket-bytes "$bucket" ${extra[@]+"${extra[@]}"}
                    ;;
                ddp) run_ddp "ddp-$model-$comp" "$model" "$comp" "$steps" ;;
            esac
        done 3<<< "$plan"
        cluster_down
        log "round=$round rate=$rate | session done, $(($(date +%s) - start)) s since the start"
    done
done
log "end $(date -u +%FT%TZ) after $(($(date +%s) - start)) s"
png=()
[ "$PNG" != 1 ] || png=(--png "$OUT_DIR/multihost.png")
"$PYTHON" "$here/summarize.py" "$RAW" --csv "$CSV" ${png[@]+"${png[@]}"} | tee "$OUT_DIR/multihost_summary.txt"
