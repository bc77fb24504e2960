#!/usr/bin/env bash
# Installs exactly the Debian 12 packages dtrain needs to build, test and run its examples.
# Idempotent: when everything is present it only checks and returns (no apt-get update).
# Usage: scripts/install-deps.sh [--openmpi] [--plot] [--torch]
#   --openmpi  also Open MPI 4.1 (openmpi-bin, libopenmpi-dev), dtrain's second supported MPI, for
#              scripts/test.sh's openmpi configuration. Debian then makes Open MPI the default mpiexec and
#              mpicxx (update-alternatives); dtrain's scripts name MPICH's explicitly, and
#              `update-alternatives --set mpirun /usr/bin/mpirun.mpich` (and `--set mpi /usr/bin/mpicc.mpich`)
#              makes MPICH the default again. Also iproute2 (ip, tc), for the multihost tests that this
#              configuration runs on simulated hosts (scripts/cluster.sh).
#   --plot     also gnuplot and python3-matplotlib (scripts/plot, benchmark plot scripts)
#   --torch    also python3-torch (only for the PyTorch comparison benchmark)
set -euo pipefail
pkgs=(build-essential cmake mpich libmpich-dev libxtensor-dev libxtensor-blas-dev xtl-dev libxsimd-dev
      libopenblas-dev zlib1g-dev catch2 libcli11-dev nlohmann-json3-dev clang-format dataset-fashion-mnist
      python3-sklearn)
for a in "$@"; do
  case "$a" in
    --openmpi) pkgs+=(openmpi-bin libopenmpi-dev iproute2) ;;
    --plot) pkgs+=(gnuplot-nox python3-matplotlib) ;;
    --torch) pkgs+=(python3-torch) ;;
    *) echo "install-deps.sh: unknown option '$a' (known: --openmpi --plot --torch)" >&2; exit 2 ;;
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
