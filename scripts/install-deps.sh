#!/usr/bin/env bash
# Installs exactly the Debian 12 packages dtrain needs to build, test and run its examples.
# Idempotent: when everything is present it only checks and returns (no apt-get update).
# Usage: scripts/install-deps.sh [--openmpi] [--slurm] [--docs] [--onnx] [--plot] [--torch] [--onednn]
#   --openmpi  also Open MPI 4.1 (openmpi-bin, libopenmpi-dev), dtrain's second supported MPI, for
#              scripts/test.sh's openmpi configuration. Debian then makes Open MPI the default mpiexec and
#              mpicxx (update-alternatives); dtrain's scripts name MPICH's explicitly, and
#              `update-alternatives --set mpirun /usr/bin/mpirun.mpich` (and `--set mpi /usr/bin/mpicc.mpich`)
#              makes MPICH the default again. Also iproute2 (ip, tc), for the multihost tests that this
#              configuration runs on simulated hosts (scripts/cluster.sh).
#   --slurm    also Slurm (slurmctld, slurmd, slurm-client), munge, libpmix-dev (which Slurm's PMIx plugin
#              loads for Open MPI's srun --mpi=pmix) and iproute2: the simulated Slurm cluster of
#              scripts/slurm-cluster.sh and the tests of ctest label slurm (which runs daemons of its own,
#              not the machine's Slurm and munge services).
#   --docs     also doxygen, for the API reference (scripts/api-docs.sh)
#   --onnx     also nodejs and npm, for the test interop.onnx_runtime, which installs onnxruntime-node with
#              npm into the build tree and runs exported models in it, and python3-onnx (onnx 1.12), for
#              interop.onnx_checker, which runs onnx.checker on them. NodeSource's nodejs package brings
#              its own npm and conflicts with Debian's, so npm is asked for only when no npm command is there.
#   --plot     also gnuplot and python3-matplotlib (scripts/plot, benchmark plot scripts)
#   --torch    also python3-torch (only for the PyTorch comparison benchmark)
#   --onednn   also libdnnl-dev, oneDNN 2.6: the oneDNN algorithms (CMake target dtrain::onednn, their tests)
#              and the oneDNN comparison benchmark (benchmarks/onednn); and ocl-icd-opencl-dev, which Debian's
#              oneDNN only recommends but whose CMake package requires (it was built with the OpenCL GPU
#              runtime: without OpenCL's headers and library, find_package(dnnl) stops the configuration)
set -euo pipefail
pkgs=(build-essential cmake ninja-build mpich libmpich-dev libxtensor-dev libxtensor-blas-dev xtl-dev libxsimd-dev
      libopenblas-dev zlib1g-dev catch2 libcli11-dev nlohmann-json3-dev clang-format dataset-fashion-mnist
      python3-sklearn libblas-dev)
# libblas-dev (Debian's reference BLAS) is for the tests only: the package test builds a consumer that
# chooses it (BLA_VENDOR Generic) instead of OpenBLAS.
for a in "$@"; do
  case "$a" in
    --openmpi) pkgs+=(openmpi-bin libopenmpi-dev iproute2) ;;
    --slurm) pkgs+=(slurmctld slurmd slurm-client munge libpmix-dev iproute2) ;;
    --docs) pkgs+=(doxygen) ;;
    --onnx) pkgs+=(nodejs python3-onnx); command -v npm >/dev/null || pkgs+=(npm) ;;
    --plot) pkgs+=(gnuplot-nox python3-matplotlib) ;;
    --torch) pkgs+=(python3-torch) ;;
    --onednn) pkgs+=(libdnnl-dev ocl-icd-opencl-dev) ;;
    *) echo "install-deps.sh: unknown option '$a' (known: --openmpi --slurm --docs --onnx --plot --torch --onednn)" >&2; exit 2 ;;
  esac
done
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps.sh: all ${#pkgs[@]} packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-deps.sh: installed ${missing[*]}"
