#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine and runs dtrain's flagship example (the README's command 1):
# the SINGA CNN on Fashion-MNIST, data-parallel on 2 ranks with the ring all-reduce.
# Extra arguments go to the example (e.g. --epochs 2, --comm collective); see its --help.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release \
      -DMPI_CXX_COMPILER=/usr/bin/mpicxx.mpich -DMPIEXEC_EXECUTABLE=/usr/bin/mpiexec.mpich
cmake --build build -j"$(nproc)" --target fashion_mnist_cnn
OPENBLAS_NUM_THREADS=1 mpiexec.mpich -n 2 build/examples/fashion_mnist_cnn/fashion_mnist_cnn --comm ring "$@"
