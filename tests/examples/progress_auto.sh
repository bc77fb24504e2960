#!/usr/bin/env bash
# --progress auto under mpiexec: a live bar when the job runs in a terminal (a pseudo-terminal from
# script(1), as an interactive shell gives), none when its output goes to a file (a batch log).
# Usage: progress_auto.sh <mpiexec> <program> [program arguments...]
set -euo pipefail
mpiexec=$1
shift
if ! command -v script > /dev/null; then
    echo "SKIP: script(1) (util-linux, Debian package bsdutils) is not installed"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmd="$(printf '%q ' "$mpiexec" -n 2 "$@" --progress auto)"
# Interactive: mpiexec's stdout is the terminal; the ranks' stdout is a pipe to it.
script -qec "$cmd" "$tmp/typescript" < /dev/null > "$tmp/terminal.txt"
# Batch inside the same terminal: mpiexec's stdout goes to a file.
script -qec "$cmd > $tmp/batch.txt" "$tmp/typescript2" < /dev/null > /dev/null
status=0
if ! grep -q $'\repoch 1/[0-9]* \\[' "$tmp/terminal.txt"; then
    echo "FAIL: no live bar in the terminal run"
    status=1
fi
if grep -q $'\r' "$tmp/batch.txt" || grep -q 'epoch 1/[0-9]* \[' "$tmp/batch.txt"; then
    echo "FAIL: the batch run's file holds the live bar"
    status=1
fi
if ! grep -q 'samples/s' "$tmp/batch.txt"; then
    echo "FAIL: the batch run's file has no epoch lines"
    status=1
fi
# The bar's rate is the job's (all ranks), as the epoch line's: in the terminal run, each epoch's last bar
# rate over that epoch's line is near 1 (a rate of rank 0 alone would be half, a double count twice).
# They time nearly the same span (the workers start each epoch together; the line's span adds the bar's
# last write), so the test needs epochs long against one terminal write: with Iris's half-millisecond
# epochs that write alone moved the pair 1.4 apart. The epoch lines are "epoch 3/10 ... N samples/s" or,
# in the SINGA examples' style, one "Elapsed Time = ...s (N samples/s)" per epoch.
if ! python3 - "$tmp/terminal.txt" << 'PY'; then status=1; fi
import re, statistics, sys
text = open(sys.argv[1], errors="replace").read().replace("\x1b[K", "").replace("\r", "\n")
bars = dict(re.findall(r"epoch (\d+)/\d+ \[.*?(\d+) samples/s ETA", text))  # the last bar of each epoch
lines = dict(re.findall(r"^epoch +(\d+)/\d+ .*?([\d.]+) samples/s$", text, re.M))
singa = re.findall(r"Elapsed Time = [\d.]+s \(([\d.]+) samples/s\)", text)
lines.update({str(i + 1): rate for i, rate in enumerate(singa)})
epochs = [e for e in lines if e in bars]
if not epochs:
    sys.exit("FAIL: cannot find the bar's and the epoch line's rates")
ratios = [float(bars[e]) / float(lines[e]) for e in epochs]
median = statistics.median(ratios)
print("bar / epoch line rate per epoch:", " ".join(f"{r:.2f}" for r in ratios), f"(median {median:.2f})")
if not (0.8 <= median <= 1.25):
    sys.exit("FAIL: the bar's rate is not the job's")
PY
for f in terminal batch; do echo "--- $f run:"; tr '\r' '\n' < "$tmp/$f.txt" | tail -n 4; done
exit $status
