#!/usr/bin/env bash
# Runs dtrain's and PyTorch's single-thread training and inference throughput side by side, interleaved
# ROUNDS times (dtrain, [dtrain before,] PyTorch in each round), and prints per model and mode the median
# samples/s of each, their ratio, dtrain's GFLOP/s and fraction of the machine's 1024^3 sgemm rate, the
# fraction a step made only of its GEMMs (at their measured rates) would reach, and the peak RSS of a
# process that runs only that model. The CPU model heads the table.
# Usage: benchmarks/train/compare.sh <bench_train_throughput> [ROUNDS=5] [STEPS=100] [<before binary>]
#   MODELS=cnn,mlp,resnet9 selects models. Needs python3-torch (scripts/install-deps.sh --torch).
#   ISA=avx2 runs every side as on a CPU without AVX-512: dtrain's AVX2 kernels (DTRAIN_KERNELS=avx2),
#   OpenBLAS's Haswell kernels (OPENBLAS_CORETYPE, also the sgemm rate it measures) and oneDNN's AVX2 code
#   (ONEDNN_MAX_CPU_ISA, PyTorch's convolutions). ISA=skylakex makes OpenBLAS (PyTorch's Linear and the
#   sgemm rate) run its AVX-512 SkylakeX kernels, as it does on Intel AVX-512 CPUs (on AMD's it may take its
#   AVX2 kernels). The CPU line says which.
set -euo pipefail
bin=${1:?usage: compare.sh <bench_train_throughput> [rounds] [steps] [before binary]}
rounds=${2:-5}
steps=${3:-100}
before=${4:-}
models=${MODELS:-cnn,mlp,resnet9}
here=$(dirname "$0")
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
isa_note=""
case "${ISA:-native}" in
  native) ;;
  avx2) export DTRAIN_KERNELS=avx2 OPENBLAS_CORETYPE=Haswell ONEDNN_MAX_CPU_ISA=AVX2
        isa_note="; restricted to AVX2: DTRAIN_KERNELS=avx2 OPENBLAS_CORETYPE=Haswell ONEDNN_MAX_CPU_ISA=AVX2" ;;
  skylakex) export OPENBLAS_CORETYPE=SkylakeX
            isa_note="; OpenBLAS on its AVX-512 kernels: OPENBLAS_CORETYPE=SkylakeX" ;;
  *) echo "compare.sh: ISA must be native, avx2 or skylakex, not '$ISA'" >&2; exit 2 ;;
esac
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# One GEMM-rate pass (it also prints the 1024^3 rate, FLOP counts and GEMM bounds), then the rounds.
"$bin" --models "$models" --steps 1 --reps 3 | grep -E '^(gemm|flop|gemm_bound) ' >> "$out"
for r in $(seq "$rounds"); do
  "$bin" --models "$models" --no-gemm --steps "$steps" --reps 3 | grep -E '^(sgemm|dtrain) ' >> "$out"
  if [ -n "$before" ]; then
    "$before" --models "$models" --no-gemm --steps "$steps" --reps 3 | grep -E '^dtrain ' | sed 's/^dtrain/before/' >> "$out"
  fi
  /usr/bin/python3 "$here/pytorch_train.py" --models "$models" --steps "$steps" --reps 3 | grep -v rss >> "$out"
done
for m in ${models//,/ }; do
  echo "rss dtrain $m $("$bin" --models "$m" --modes train --no-gemm --steps 20 --reps 1 | awk '/peak_rss/ {print $2}')" >> "$out"
  [ -z "$before" ] || echo "rss before $m $("$before" --models "$m" --modes train --no-gemm --steps 20 --reps 1 | awk '/peak_rss/ {print $2}')" >> "$out"
  echo "rss pytorch $m $(/usr/bin/python3 "$here/pytorch_train.py" --models "$m" --modes train --steps 20 --reps 1 | awk '/rss/ {print $2}')" >> "$out"
done
cpu="$(lscpu | sed -n 's/^Model name: *//p' | head -1) (family $(lscpu | sed -n 's/^CPU family: *//p' | head -1), model $(lscpu | sed -n 's/^Model: *//p' | head -1), $(grep -q avx512f /proc/cpuinfo && echo AVX-512 || echo no AVX-512)$isa_note)"
/usr/bin/python3 - "$out" "$cpu" "$rounds" "$steps" <<'PY'
import sys, statistics, collections
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
rate = collections.defaultdict(list)
flop, bound, rss, peaks = {}, {}, {}, []
for r in rows:
    if r[0] == "sgemm": peaks.append(float(r[2]))
    elif r[0] in ("dtrain", "before", "pytorch"): rate[(r[0], r[1], r[2])].append(float(r[3]))
    elif r[0] == "flop": flop[(r[1], r[2])] = float(r[3])
    elif r[0] == "gemm_bound": bound[(r[1], r[2])] = float(r[3])
    elif r[0] == "rss": rss[(r[1], r[2])] = r[3]
peak = statistics.median(peaks)
print(f"CPU: {sys.argv[2]}; one thread; {sys.argv[3]} interleaved rounds of 3 x {sys.argv[4]} steps, medians")
print(f"sgemm 1024^3: {peak:.1f} GFLOP/s (median of {len(peaks)} runs)")
has_before = any(k[0] == "before" for k in rate)
head = f"{'model':8} {'mode':5} {'MFLOP/smp':>9} {'dtrain/s':>9} {'pytorch/s':>9} {'ratio':>6} {'GFLOP/s':>7} {'of peak':>7} {'GEMM-only':>9}"
if has_before: head += f" {'before/s':>9} {'after/before':>12}"
print(head + f" {'RSS dtrain':>10} {'RSS torch':>9}" + (f" {'RSS before':>10}" if has_before else ""))
for (who, model, mode) in sorted(k for k in rate if k[0] == "dtrain"):
    d = statistics.median(rate[("dtrain", model, mode)])
    p = statistics.median(rate[("pytorch", model, mode)]) if ("pytorch", model, mode) in rate else float("nan")
    f = flop[(model, mode)]
    g = d * f / 1e9
    line = (f"{model:8} {mode:5} {f / 1e6:9.2f} {d:9.0f} {p:9.0f} {d / p:6.2f} {g:7.1f} {g / peak:7.3f}"
            f" {bound[(model, mode)] * f / 1e9 / peak:9.3f}")
    if has_before:
        b = statistics.median(rate[("before", model, mode)])
        line += f" {b:9.0f} {d / b:12.2f}"
    line += f" {rss.get(('dtrain', model), '-'):>10} {rss.get(('pytorch', model), '-'):>9}"
    if has_before: line += f" {rss.get(('before', model), '-'):>10}"
    print(line)
PY
