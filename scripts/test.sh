#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine and runs dtrain's whole test suite (the README's command 2).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release \
      -DMPI_CXX_COMPILER=/usr/bin/mpicxx.mpich -DMPIEXEC_EXECUTABLE=/usr/bin/mpiexec.mpich
cmake --build build -j"$(nproc)"
cd build
ctest --output-on-failure "$@"
