#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine and runs dtrain's whole test suite (the README's command 2) in every
# configuration CI checks, each in its own build directory (the CMake presets of CMakePresets.json):
#   release   MPICH 4.0, Release, then the quick tier again with DTRAIN_KERNELS=reference    build/
#   asan      MPICH 4.0, AddressSanitizer + UndefinedBehaviorSanitizer, -O0 -g1, the quick tier (the unit
#             tests at 1 and 2 ranks), building only their programs                  build-asan/
#   openmpi   Open MPI 4.1, Release, the tests labelled `mpi` (those whose outcome depends on the MPI
#             library: comm, core, distributed, multihost, Slurm, package and the examples that launch
#             across ranks; cmake/dtrainTesting.cmake), building only their programs  build-openmpi/
# Usage: scripts/test.sh [--quick] [--config NAME[,NAME...]]... [ctest arguments...]
#   --quick         the edit-test loop: the release configuration only, building only the test programs
#                   of the tests labelled `quick` (1 and 2 ranks, no examples, multihost or package
#                   tests; cmake/dtrainTesting.cmake) and running `ctest -L quick`
#   --config NAME   run only these configurations (repeatable; default: all three, in this order)
#   anything else   passed to every ctest run (e.g. -R distributed_sync, -L np2)
# A failing configuration does not stop the next; the exit status is 0 only when all passed. A summary
# with the time of each configuration ends the output.
set -euo pipefail
cd "$(dirname "$0")/.."

all_configs=(release asan openmpi)
configs=()
ctest_args=()
quick=0
while [ $# -gt 0 ]; do
  case "$1" in
    --config) [ $# -ge 2 ] || { echo "test.sh: --config needs a name (${all_configs[*]})" >&2; exit 2; }
              IFS=, read -ra names <<< "$2"; configs+=("${names[@]}"); shift 2 ;;
    --config=*) IFS=, read -ra names <<< "${1#--config=}"; configs+=("${names[@]}"); shift ;;
    --quick) quick=1; shift ;;
    -h|--help) sed -n '2,17s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) ctest_args+=("$1"); shift ;;
  esac
done
if [ $quick -eq 1 ]; then
  [ ${#configs[@]} -eq 0 ] || [ "${configs[*]}" = release ] ||
    { echo "test.sh: --quick runs the release configuration only, not '${configs[*]}'" >&2; exit 2; }
  configs=(release)
fi
[ ${#configs[@]} -gt 0 ] || configs=("${all_configs[@]}")
deps_args=()
for c in "${configs[@]}"; do
  case "$c" in
    release|asan) ;;
    openmpi) deps_args+=(--openmpi) ;;
    *) echo "test.sh: unknown configuration '$c' (known: ${all_configs[*]})" >&2; exit 2 ;;
  esac
done
# The API reference's check (docs.api_reference) needs doxygen, interop.onnx_runtime Node.js and npm,
# interop.onnx_checker Python's onnx, the oneDNN algorithms' tests libdnnl-dev; the slurm tests need Slurm, munge and network namespaces, so root
# (elsewhere they are reported Skipped with the reason).
[ $quick -eq 1 ] || deps_args+=(--docs --onnx --onednn)
[ $quick -eq 1 ] || [ "$(id -u)" -ne 0 ] || deps_args+=(--slurm)

# Every package first, so that each configuration runs on a machine with all of them (as in CI, where
# Open MPI is then installed next to MPICH and may be the update-alternatives default).
scripts/install-deps.sh "${deps_args[@]}"

# Runs one configuration: configure (preset), build, ctest. Returns non-zero on the first failing step.
run_config() {
  local name=$1 dir label_exclude=()
  local -a env=(OPENBLAS_NUM_THREADS=1)
  case "$name" in
    release) dir=build ;;
    asan)
      dir=build-asan
      # Leak checking off: MPICH and UCX leak at exit on their own, which is not dtrain's. Every other
      # ASan and UBSan finding fails the test (UBSan does not recover: -fno-sanitize-recover=undefined).
      env+=(ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1)
      # Tests that cannot run under ASan for a real reason carry the ctest label no_asan (with the reason
      # next to it in their CMakeLists.txt).
      # The quick tier: the unit tests reach every part of the library; the examples, the runs at 3 and 4
      # ranks and the launch tests run in the release configuration. -O0 -g1 halves the build of -O1 -g
      # and keeps file:line in the reports.
      label_exclude=(-LE no_asan)
      ;;
    openmpi)
      dir=build-openmpi
      # Open MPI's mpiexec refuses to run as root (CI does) without this confirmation, and refuses more ranks
      # than cores without oversubscription (-n 3 and -n 4 on a 2-core machine). dtrain_add_test passes
      # both itself; these reach the tests that start mpiexec from a script.
      env+=(OMPI_MCA_rmaps_base_oversubscribe=1)
      [ "$(id -u)" -ne 0 ] || env+=(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
      ;;
  esac
  local -a target=() label=()
  case "$name" in
    asan) target=(--target dtrain_quick_tests) label=(-L quick) ;;
    openmpi) target=(--target dtrain_mpi_tests) label=(-L mpi) ;;
  esac
  if [ $quick -eq 1 ]; then
    target=(--target dtrain_quick_tests)
    label=(-L quick)
  fi
  # The presets build with Ninja; CMake refuses to reconfigure a directory made by another generator.
  if [ -f "$dir/CMakeCache.txt" ] && ! grep -qx 'CMAKE_GENERATOR:INTERNAL=Ninja' "$dir/CMakeCache.txt"; then
    echo "test.sh: $dir was configured with another CMake generator than the presets' Ninja;" \
         "remove it (rm -rf $dir) and run again" >&2
    return 1
  fi
  cmake --preset "$name" || return 1
  cmake --build "$dir" -j"$(nproc)" "${target[@]}" || return 1
  (cd "$dir" && env "${env[@]}" ctest --output-on-failure "${parallel[@]}" "${label_exclude[@]}" "${label[@]}" \
    ${ctest_args[@]+"${ctest_args[@]}"}) || return 1
  # The unit tests once more on the kernels every CPU without AVX2 runs (ARM, older x86-64):
  # DTRAIN_KERNELS=reference, im2col + BLAS convolutions and BLAS products (the DTRAIN_KERNELS tests set
  # their own value and are left out).
  if [ "$name" = release ] && [ $quick -eq 0 ]; then
    echo "=== test.sh: the quick tier again with DTRAIN_KERNELS=reference"
    (cd "$dir" && env "${env[@]}" DTRAIN_KERNELS=reference ctest --output-on-failure "${parallel[@]}" -L quick \
      -E '^nn_kernel_set_test' ${ctest_args[@]+"${ctest_args[@]}"}) || return 1
  fi
}

# Tests run $(nproc) at a time unless the arguments say otherwise; each declares the cores it needs (PROCESSORS),
# so an oversubscribed -n 3 or -n 4 test runs alone.
parallel=(-j"$(nproc)")
for a in ${ctest_args[@]+"${ctest_args[@]}"}; do
  case "$a" in -j* | --parallel*) parallel=() ;; esac
done
summary=()
failed=0
start_all=$SECONDS
for c in "${configs[@]}"; do
  echo "=== test.sh: configuration $c"
  start=$SECONDS
  if run_config "$c"; then status=passed; else status=FAILED; failed=1; fi
  summary+=("$(printf '%-8s %-7s %4d min %02d s' "$c" "$status" $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60)))")
done
echo "=== test.sh: summary (configure + build + ctest per configuration)"
printf '  %s\n' "${summary[@]}"
printf '  total %d min %02d s\n' $(((SECONDS - start_all) / 60)) $(((SECONDS - start_all) % 60))
exit $failed
