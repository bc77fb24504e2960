#!/bin/bash
# The rounds of kernel_sets.txt: 5 rounds, each pinned to core 0, of bench_kernel_sets under the native,
# onednn and reference kernel sets, the onednn set of the code before (103eb42), then oneDNN limited to
# AVX2 (DNNL_MAX_CPU_ISA=AVX2, as on a CPU without AVX-512), this code and the code before.
# Usage: kernel_sets.sh <build dir> <build dir of 103eb42>
set -euo pipefail
new=$1 old=$2
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 DTRAIN_THREADS=1
lscpu | grep "Model name"; grep -m1 "model\s*:" /proc/cpuinfo; grep -m1 "cpu family" /proc/cpuinfo
for r in 1 2 3 4 5; do
  for s in native onednn reference; do
    DTRAIN_KERNELS=$s taskset -c 0 "$new"/benchmarks/onednn/bench_kernel_sets $s
  done
  DTRAIN_KERNELS=onednn taskset -c 0 "$old"/benchmarks/onednn/bench_kernel_sets onednn_before
  DNNL_MAX_CPU_ISA=AVX2 DTRAIN_KERNELS=onednn taskset -c 0 "$new"/benchmarks/onednn/bench_kernel_sets onednn_avx2
  DNNL_MAX_CPU_ISA=AVX2 DTRAIN_KERNELS=onednn taskset -c 0 "$old"/benchmarks/onednn/bench_kernel_sets onednn_avx2_before
done
