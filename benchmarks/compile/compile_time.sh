#!/usr/bin/env bash
# Compile time of one program, header-only against dtrain::precompiled (include/dtrain/core/precompiled.hpp):
# each round compiles each translation unit once both ways, the order reversed every other round, and prints
# the median wall and user seconds. The flags are CMake Release's for dtrain's programs (g++ -O3 -DNDEBUG,
# C++17, through mpicxx.mpich).
# Usage: benchmarks/compile/compile_time.sh [--rounds N] [--build DIR] [source.cpp ...]
#   --rounds N   rounds (default 5)
#   --build DIR  a configured build tree, for its generated <dtrain/config.hpp> (default build)
#   sources      default: examples/quickstart/main.cpp (the README's program) and
#                tests/nn/layers/conv2d_test.cpp (the slowest unit test to compile)
# Also prints the one-off cost: compiling src/precompiled.cpp itself.
set -euo pipefail
cd "$(dirname "$0")/../.."

rounds=5
build=build
sources=()
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    -h|--help) sed -n '2,11s/^# \{0,1\}//p' "$0"; exit 0 ;;
    -*) echo "compile_time.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) sources+=("$1"); shift ;;
  esac
done
[ ${#sources[@]} -gt 0 ] || sources=(examples/quickstart/main.cpp tests/nn/layers/conv2d_test.cpp)
[ -f "$build/include/dtrain/config.hpp" ] ||
  { echo "compile_time.sh: $build/include/dtrain/config.hpp is missing: configure $build first (README)" >&2; exit 2; }

cxx=(mpicxx.mpich -std=c++17 -O3 -DNDEBUG -Wall -Wextra -Itests -Iinclude -I"$build/include")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# Seconds (wall user) of one compile.
compile() {
  /usr/bin/time -f "%e %U" -o "$out/t" "${cxx[@]}" "$@" -c -o "$out/x.o" >/dev/null
  cat "$out/t"
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

echo "CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores; $(g++ --version | head -1)"
echo "date: $(date -u +%F), commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown), rounds: $rounds"
read -r wall user < <(compile src/precompiled.cpp -DDTRAIN_PRECOMPILED)
echo "src/precompiled.cpp (once per build tree): wall ${wall} s, user ${user} s"
for src in "${sources[@]}"; do
  : > "$out/header_only"; : > "$out/precompiled"
  for r in $(seq 1 "$rounds"); do
    if [ $((r % 2)) -eq 1 ]; then order=(header_only precompiled); else order=(precompiled header_only); fi
    for mode in "${order[@]}"; do
      flags=()
      [ "$mode" = precompiled ] && flags=(-DDTRAIN_PRECOMPILED)
      compile "$src" "${flags[@]}" >> "$out/$mode"
    done
  done
  ho_wall=$(cut -d' ' -f1 "$out/header_only" | median); ho_user=$(cut -d' ' -f2 "$out/header_only" | median)
  pc_wall=$(cut -d' ' -f1 "$out/precompiled" | median); pc_user=$(cut -d' ' -f2 "$out/precompiled" | median)
  echo "$src: header-only wall ${ho_wall} s (user ${ho_user}), precompiled wall ${pc_wall} s (user ${pc_user})," \
       "ratio $(awk -v a="$ho_wall" -v b="$pc_wall" 'BEGIN {printf "%.2f", a / b}')"
done
