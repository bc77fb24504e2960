#!/usr/bin/env bash
# The ONNX checker test (ctest interop.onnx_checker): writes the models of onnx_models.hpp as ONNX files
# (onnx_cases, as run_onnx_test.sh does) and runs onnx.checker.check_model with full_check on each
# (check_onnx_files.py), which must find one file per NAME. The Python is the first of python3 on PATH
# and Debian's /usr/bin/python3 (where python3-onnx installs the module, also when another python3 comes
# first on PATH) that imports onnx. Exit 77 (ctest: Skipped) with the reason printed when there is no
# python3 or none has the onnx module (scripts/install-deps.sh --onnx installs python3-onnx).
#
# Usage: run_onnx_checker.sh CASES_PROGRAM WORK_DIR SCRIPT_DIR NAME...
set -euo pipefail
[ $# -ge 4 ] || { echo "usage: run_onnx_checker.sh CASES_PROGRAM WORK_DIR SCRIPT_DIR NAME..." >&2; exit 2; }
cases=$1 work=$2 script_dir=$3
shift 3
skip() { echo "SKIPPED: $*"; exit 77; }
python=""
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null && "$p" -c 'import onnx.checker' 2>/dev/null; then python=$p; break; fi
done
if [ -z "$python" ]; then
  command -v python3 >/dev/null || [ -x /usr/bin/python3 ] ||
    skip "python3 is not installed (scripts/install-deps.sh --onnx installs python3-onnx)"
  skip "the Python module onnx is not installed (scripts/install-deps.sh --onnx installs python3-onnx)"
fi
rm -rf "$work"
mkdir -p "$work"
"$cases" "$work"
"$python" "$script_dir/check_onnx_files.py" "$work" "$@"
