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
if ! grep -q '^epoch' "$tmp/batch.txt"; then
    echo "FAIL: the batch run's file has no epoch lines"
    status=1
fi
# The bar's rate is the job's (all ranks), as the epoch line's: in the terminal run, the bar's last rate of
# the last epoch within a factor 1.4 of that epoch's line (a rate of rank 0 alone would be half of it).
if ! python3 - "$tmp/terminal.txt" << 'PY'; then status=1; fi
import re, sys
text = open(sys.argv[1], errors="replace").read().replace("\x1b[K", "").replace("\r", "\n")
bars = re.findall(r"epoch (\d+)/\d+ \[.*?(\d+) samples/s ETA", text)
lines = re.findall(r"^epoch +(\d+)/\d+ .*?([\d.]+) samples/s$", text, re.M)
if not bars or not lines:
    sys.exit("FAIL: cannot find the bar's and the epoch line's rates")
epoch, line_rate = lines[-1][0], float(lines[-1][1])
bar_rate = [float(r) for e, r in bars if e == epoch][-1]
print(f"epoch {epoch}: bar {bar_rate:.0f} samples/s, epoch line {line_rate:.0f} samples/s")
if not (line_rate / 1.4 <= bar_rate <= line_rate * 1.4):
    sys.exit("FAIL: the bar's rate is not the job's")
PY
for f in terminal batch; do echo "--- $f run:"; tr '\r' '\n' < "$tmp/$f.txt" | tail -n 4; done
exit $status
