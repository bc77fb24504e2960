#!/usr/bin/env bash
# Every way dtrain can compute one model's step, side by side on one thread at batch 64, interleaved ROUNDS
# times: dtrain's kernel sets (DTRAIN_KERNELS=native, onednn, reference) in bench_train_throughput,
# PyTorch (benchmarks/train/pytorch_train.py) and the step written directly on oneDNN's primitives
# (bench_onednn, which also runs dtrain's native kernels in the same process: the native / oneDNN ratio).
# Prints per model and mode the median samples/s of each and their fraction of the core's 512-bit FP32
# FMA peak (bench_fma_peak, measured before every round), with the CPU model; then per model and layer
# kind the forward and backward microseconds per step of each side (bench_layer_times --in-step,
# pytorch_layer_times.py and bench_onednn's per-layer times, after the rounds; LAYERS=0 leaves them out).
# dtrain's and oneDNN's layers are timed inside whole training steps; PyTorch's each on its own, repeated
# on fixed activations (warm caches: if anything, in PyTorch's favour).
# Usage: benchmarks/onednn/backends.sh <build dir> [ROUNDS=5] [STEPS=50]
#   MODELS=cnn,mlp,resnet9 selects models. Needs the targets bench_train_throughput, bench_layer_times,
#   bench_fma_peak and bench_onednn, dtrain::onednn (scripts/install-deps.sh --onednn) and python3-torch
#   (--torch).
set -euo pipefail
build=${1:?usage: backends.sh <build dir> [rounds] [steps]}
rounds=${2:-5}
steps=${3:-50}
models=${MODELS:-cnn,mlp,resnet9}
here=$(cd "$(dirname "$0")" && pwd)
tp=$build/benchmarks/train/bench_train_throughput
direct=$build/benchmarks/onednn/bench_onednn
fma=$build/benchmarks/train/bench_fma_peak
lt=$build/benchmarks/train/bench_layer_times
for b in "$tp" "$direct" "$fma" "$lt"; do
  [ -x "$b" ] || { echo "backends.sh: $b not built" >&2; exit 2; }
done
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 DTRAIN_THREADS=1
out=$(mktemp)
layers=$(mktemp -d)
trap 'rm -rf "$out" "$layers"' EXIT
"$tp" --models "$models" --batch 64 --steps 1 --reps 1 --no-gemm | grep '^flop ' >> "$out"
for r in $(seq "$rounds"); do
  echo "fma $("$fma" | awk '/^fma_peak /{print $2}')" >> "$out"
  for set in native onednn reference; do
    DTRAIN_KERNELS=$set "$tp" --models "$models" --batch 64 --no-gemm --steps "$steps" --reps 3 |
      awk -v s="$set" '/^dtrain / {print s, $2, $3, $4}' >> "$out"
  done
  /usr/bin/python3 "$here/../train/pytorch_train.py" --models "$models" --batch 64 --steps "$steps" --reps 3 |
    awk '/^pytorch / {print $1, $2, $3, $4}' >> "$out"
  "$direct" --models "$models" --rounds 1 --steps "$steps" --no-layers |
    awk '$2 == "train" || $2 == "infer" {print "direct_native", $1, $2, $3; print "direct_onednn", $1, $2, $4;
                                         print "direct_ratio", $1, $2, $5}' >> "$out"
done
if [ "${LAYERS:-1}" != 0 ]; then
  for m in ${models//,/ }; do
    for set in native onednn reference; do
      DTRAIN_KERNELS=$set "$lt" --model "$m" --batch 64 --steps 20 --reps 5 --in-step > "$layers/$set.$m"
    done
    /usr/bin/python3 "$here/../train/pytorch_layer_times.py" --model "$m" --batch 64 --steps 20 --reps 5 \
      > "$layers/pytorch.$m"
  done
  "$direct" --models "$models" --rounds 1 --steps 20 > "$layers/direct"
fi
cpu="$(lscpu | sed -n 's/^Model name: *//p' | head -1) (family $(lscpu | sed -n 's/^CPU family: *//p' | head -1), model $(lscpu | sed -n 's/^Model: *//p' | head -1))"
/usr/bin/python3 - "$out" "$cpu" "$rounds" "$steps" "$layers" "$models" <<'PY'
import collections, os, re, statistics, sys
rate, flop, peaks = collections.defaultdict(list), {}, []
for r in (l.split() for l in open(sys.argv[1]) if l.strip()):
    if r[0] == "fma": peaks.append(float(r[1]))
    elif r[0] == "flop": flop[(r[1], r[2])] = float(r[3])
    else: rate[(r[0], r[1], r[2])].append(float(r[3]))
peak = statistics.median(peaks)
print(f"CPU: {sys.argv[2]}; one thread, batch 64; {sys.argv[3]} interleaved rounds of {sys.argv[4]} steps, "
      f"medians; FP32 FMA peak {peak:.1f} GFLOP/s (range {min(peaks):.1f}-{max(peaks):.1f})")
sides = [("native", "dtrain native"), ("onednn", "dtrain onednn backend"), ("reference", "dtrain reference"),
         ("pytorch", "PyTorch"), ("direct_onednn", "oneDNN direct")]
print("| model | mode | " + " | ".join(n for _, n in sides) + " | native / oneDNN direct (same process) |")
print("|---|---|" + "---|" * (len(sides) + 1))
for (model, mode), f in flop.items():
    cells = []
    for key, _ in sides:
        v = rate.get((key, model, mode))
        if not v:
            cells.append("-")
            continue
        m = statistics.median(v)
        cells.append(f"{m:,.0f} ({m * f / 1e9 / peak:.2f})")
    ratio = rate.get(("direct_ratio", model, mode))
    rs = f"{statistics.median(ratio):.2f}x ({min(ratio):.2f}-{max(ratio):.2f})" if ratio else "-"
    print(f"| {model} | {mode} | " + " | ".join(cells) + f" | {rs} |")
print("cells: samples/s (fraction of the FMA peak, from the nominal Conv2d and Dense FLOP per sample)")

# Per layer kind: a ReLU counts with the layer before it (oneDNN runs it fused into that layer).
line = re.compile(r"^\s*(?:layer|onednn)\s+(?:\d+\s+)?(.*?)\s+fwd_us\s+([\d.]+)\s+bwd_us\s+([\d.]+)")
def kind(name):
    for prefix, k in (("Conv2d", "Conv2d"), ("Dense", "Dense"), ("Linear", "Dense"), ("BatchNorm", "BatchNorm2d"),
                      ("MaxPool", "MaxPool2d"), ("Residual", "Residual block"), ("Flatten", "Flatten"),
                      ("ReLU", "ReLU")):
        if name.startswith(prefix): return k
    return name
def kinds(lines):
    sums, last = collections.OrderedDict(), None
    for l in lines:
        m = line.match(l)
        if not m or m.group(1).startswith("block/") or m.group(1).startswith("total"): continue
        k = kind(m.group(1))
        if k == "ReLU" and last: k = last
        last = k
        f, b = sums.get(k, (0.0, 0.0))
        sums[k] = (f + float(m.group(2)), b + float(m.group(3)))
    return sums
def direct_section(model):
    text, keep = [], False
    for l in open(os.path.join(sys.argv[5], "direct")):
        if l.startswith("layers "): keep = l.split()[1:3] == [model, "onednn"]
        elif keep: text.append(l)
    return text
if os.path.exists(os.path.join(sys.argv[5], "direct")):
    cols = [("native", "dtrain native"), ("onednn", "dtrain onednn backend"), ("reference", "dtrain reference"),
            ("pytorch", "PyTorch"), ("direct", "oneDNN direct")]
    for model in sys.argv[6].split(","):
        per = {c: kinds(open(os.path.join(sys.argv[5], f"{c}.{model}")).readlines()) for c, _ in cols[:4]}
        per["direct"] = kinds(direct_section(model))
        print(f"\n{model}: microseconds per step, forward / backward, per layer kind (20 steps x 5, medians)")
        print("| layer kind | " + " | ".join(n for _, n in cols) + " |")
        print("|---|" + "---|" * len(cols))
        for k in per["native"]:
            cells = [f"{per[c][k][0]:.0f} / {per[c][k][1]:.0f}" if k in per[c] else "-" for c, _ in cols]
            print(f"| {k} | " + " | ".join(cells) + " |")
PY
