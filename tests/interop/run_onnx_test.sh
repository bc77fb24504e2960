#!/usr/bin/env bash
# The ONNX Runtime comparison (ctest interop.onnx_runtime): writes the models of onnx_models.hpp as ONNX
# files with dtrain's outputs next to them (onnx_cases), installs onnxruntime-node into NODE_DIR when it is
# not there yet (npm, about 290 MB from the npm registry, once per build tree), and runs run_onnx.js, which
# prints the largest difference per model and fails beyond its tolerance. Exit 77 (ctest: Skipped) with the
# reason printed when node or npm is missing (scripts/install-deps.sh installs them) or the install fails.
#
# Usage: run_onnx_test.sh CASES_PROGRAM WORK_DIR NODE_DIR SCRIPT_DIR
set -euo pipefail
[ $# -eq 4 ] || { echo "usage: run_onnx_test.sh CASES_PROGRAM WORK_DIR NODE_DIR SCRIPT_DIR" >&2; exit 2; }
cases=$1 work=$2 node_dir=$3 script_dir=$4
skip() { echo "SKIPPED: $*"; exit 77; }
command -v node >/dev/null || skip "node is not installed (scripts/install-deps.sh installs nodejs and npm)"
if [ ! -f "$node_dir/node_modules/onnxruntime-node/package.json" ]; then
  command -v npm >/dev/null || skip "npm is not installed (scripts/install-deps.sh installs nodejs and npm)"
  mkdir -p "$node_dir"
  echo "installing onnxruntime-node into $node_dir"
  if ! (cd "$node_dir" && npm install --ignore-scripts --no-audit --no-fund onnxruntime-node); then
    skip "npm install onnxruntime-node failed (no access to the npm registry?)"
  fi
fi
rm -rf "$work"
mkdir -p "$work"
"$cases" "$work"
names=()
for f in "$work"/*.onnx; do
  names+=("$(basename "$f" .onnx)")
done
NODE_PATH="$node_dir/node_modules" node "$script_dir/run_onnx.js" "$work" "${names[@]}"
