#!/usr/bin/env bash
# Compile time of one program three ways: header-only, with dtrain::precompiled
# (include/dtrain/core/precompiled.hpp), and with dtrain::precompiled and a precompiled header of
# <dtrain/dtrain.hpp> (what target_precompile_headers gives a CMake target). Each round compiles each
# translation unit once each way, the order rotated every round, and prints the median wall and user
# seconds. The flags are CMake Release's for dtrain's programs (g++ -O3 -DNDEBUG, C++17, through
# mpicxx.mpich).
# Usage: benchmarks/compile/compile_time.sh [--rounds N] [--build DIR] [source.cpp ...]
#   --rounds N   rounds (default 5)
#   --build DIR  a configured build tree, for its generated <dtrain/config.hpp> (default build)
#   --before DIR a checkout of an earlier commit (git worktree add DIR <commit>): adds a fourth way, its
#                headers with dtrain::precompiled, in the same rounds
#   sources      default: examples/quickstart/main.cpp (the README's program) and
#                tests/nn/layers/conv2d_test.cpp (the slowest unit test to compile)
# Also prints the one-off costs: compiling src/precompiled.cpp and the precompiled header.
set -euo pipefail
cd "$(dirname "$0")/../.."

rounds=5
build=build
before=
sources=()
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --before) before=$2; shift 2 ;;
    -h|--help) sed -n '2,15s/^# \{0,1\}//p' "$0"; exit 0 ;;
    -*) echo "compile_time.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) sources+=("$1"); shift ;;
  esac
done
[ ${#sources[@]} -gt 0 ] || sources=(examples/quickstart/main.cpp tests/nn/layers/conv2d_test.cpp)
[ -f "$build/include/dtrain/config.hpp" ] ||
  { echo "compile_time.sh: $build/include/dtrain/config.hpp is missing: configure $build first (README)" >&2; exit 2; }

# The headers' directory comes with each way (-Iinclude, or the earlier checkout's).
cxx=(mpicxx.mpich -std=c++17 -O3 -DNDEBUG -Wall -Wextra -Itests -I"$build/include")
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
read -r wall user < <(compile src/precompiled.cpp -Iinclude -DDTRAIN_PRECOMPILED)
echo "src/precompiled.cpp (once per build tree): wall ${wall} s, user ${user} s"
mkdir -p "$out/pch"
echo '#include <dtrain/dtrain.hpp>' > "$out/pch/dtrain_pch.hpp"
/usr/bin/time -f "%e %U" -o "$out/t" "${cxx[@]}" -Iinclude -DDTRAIN_PRECOMPILED -x c++-header \
    -c "$out/pch/dtrain_pch.hpp" -o "$out/pch/dtrain_pch.hpp.gch"
read -r wall user < "$out/t"
echo "precompiled header of <dtrain/dtrain.hpp> (once per target, or shared): wall ${wall} s, user ${user} s," \
     "$(du -m "$out/pch/dtrain_pch.hpp.gch" | cut -f1) MB"
pch=(-DDTRAIN_PRECOMPILED -I"$out/pch" -include dtrain_pch.hpp -Werror=invalid-pch)
modes=(header_only precompiled precompiled_pch)
if [ -n "$before" ]; then
  [ -f "$before/include/dtrain/dtrain.hpp" ] ||
    { echo "compile_time.sh: $before has no include/dtrain/dtrain.hpp: give a checkout of dtrain" >&2; exit 2; }
  modes+=(before_precompiled)
  echo "before: $before at $(git -C "$before" rev-parse --short HEAD 2>/dev/null || echo unknown)"
fi
for src in "${sources[@]}"; do
  for m in "${modes[@]}"; do : > "$out/$m"; done
  for r in $(seq 1 "$rounds"); do
    for k in "${!modes[@]}"; do
      mode=${modes[$(((r + k) % ${#modes[@]}))]}
      flags=(-Iinclude)
      [ "$mode" = precompiled ] && flags+=(-DDTRAIN_PRECOMPILED)
      [ "$mode" = precompiled_pch ] && flags+=("${pch[@]}")
      [ "$mode" = before_precompiled ] && flags=(-I"$before/include" -DDTRAIN_PRECOMPILED)
      compile "$src" "${flags[@]}" >> "$out/$mode"
    done
  done
  line="$src:"
  for m in "${modes[@]}"; do
    line="$line $m wall $(cut -d' ' -f1 "$out/$m" | median) s (user $(cut -d' ' -f2 "$out/$m" | median)),"
  done
  echo "${line%,}"
done
