# What dtrain's tests need from the MPI that runs them, and dtrain_add_test.
#
# DTRAIN_MPI_VENDOR          MPICH, OpenMPI or unknown, from `${MPIEXEC_EXECUTABLE} --version`
# DTRAIN_MPIEXEC_PREFLAGS    MPIEXEC_PREFLAGS plus what the MPI needs to run any rank count on any machine:
#                            Open MPI refuses more ranks than cores unless given --oversubscribe (as
#                            KaMPIng's KaTestrophe adds MPIEXEC_OVERSUBSCRIBE_FLAG for Open MPI only);
#                            MPICH (Hydra) oversubscribes without a flag.
# DTRAIN_TEST_ENVIRONMENT    environment of every test of dtrain_add_test: one BLAS thread per rank; with
#                            Open MPI, permission to run as root (OMPI_ALLOW_RUN_AS_ROOT and its
#                            confirmation: Open MPI's mpiexec refuses root otherwise, and CI runs as root;
#                            no effect for other users) and oversubscription for the mpiexec that test
#                            scripts start themselves; with DTRAIN_SANITIZERS, ASAN_OPTIONS=detect_leaks=0
#                            (MPICH and UCX leak at exit on their own; see the README) and UBSan stack
#                            traces.
# scripts/test.sh exports the same variables for the tests that call mpiexec themselves.
function(_dtrain_detect_mpi_vendor var)
  execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err TIMEOUT 30)
  if("${out}${err}" MATCHES "Open MPI|OpenRTE")
    set(${var} OpenMPI PARENT_SCOPE)
  elseif("${out}${err}" MATCHES "HYDRA|MPICH")
    set(${var} MPICH PARENT_SCOPE)
  else()
    set(${var} unknown PARENT_SCOPE)
  endif()
endfunction()

_dtrain_detect_mpi_vendor(DTRAIN_MPI_VENDOR)
message(STATUS "dtrain tests run with ${DTRAIN_MPI_VENDOR} (${MPIEXEC_EXECUTABLE})")
set(DTRAIN_MPIEXEC_PREFLAGS ${MPIEXEC_PREFLAGS})
set(DTRAIN_TEST_ENVIRONMENT OPENBLAS_NUM_THREADS=1)
if(DTRAIN_MPI_VENDOR STREQUAL "OpenMPI")
  list(APPEND DTRAIN_MPIEXEC_PREFLAGS --oversubscribe)
  list(APPEND DTRAIN_TEST_ENVIRONMENT OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
       OMPI_MCA_rmaps_base_oversubscribe=1)
endif()
if(DTRAIN_SANITIZERS)
  list(APPEND DTRAIN_TEST_ENVIRONMENT ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1)
endif()

# dtrain_add_test(<name> SOURCES <files...> [PROGRAM <program>] [RANKS <n...>] [TIMEOUT <s>] [LABELS <l...>])
#
# Builds one test executable from SOURCES plus the shared MPI Catch2 main and registers it once per
# process count as <name>.np<n>, run through MPIEXEC_EXECUTABLE (mpiexec.mpich or mpiexec.openmpi) with
# DTRAIN_MPIEXEC_PREFLAGS and DTRAIN_TEST_ENVIRONMENT. RANKS defaults to 1. Each registration gets a
# TIMEOUT (default 120 s) so a hang fails instead of blocking CI.
#
# With PROGRAM, SOURCES join the executable <program> that the tests of a directory share instead (created
# by the first test that names it), compiled as a unity build (the sources #included into batches, so the
# headers are parsed once per batch instead of once per source), and <name> runs only its own sources' test
# cases: Catch2's --filenames-as-tags tags every case with [#<file name without extension>], and the test
# selects its files' tags, hidden cases ([.]) left out as in a run without a filter; it fails when no case
# matches (--warn NoTests). A test whose program needs something of its own (a replaced operator new, linker
# options, sources that must stay separate translation units, a program other tests launch whole) has no
# PROGRAM.
#
# Labels: np<n>, the LABELS given, and `quick` for the registrations with 1 or 2 ranks unless LABELS holds
# `slow`: the edit-test loop (scripts/test.sh --quick) runs `ctest -L quick` after building only the
# target dtrain_quick_tests, which depends on the executables of those registrations (the top-level
# CMakeLists.txt collects them from the global property DTRAIN_QUICK_TEST_TARGETS). Runs with 3 or more
# ranks are oversubscribed on 2 cores, where MPICH busy-polls; they run in the full suite only.
function(dtrain_add_test name)
  cmake_parse_arguments(T "" "TIMEOUT;PROGRAM" "SOURCES;RANKS;LABELS" ${ARGN})
  if(NOT T_RANKS)
    set(T_RANKS 1)
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  set(program ${name})
  set(filter)
  if(T_PROGRAM)
    set(program ${T_PROGRAM})
    if(NOT TARGET ${program})
      add_executable(${program})
      target_link_libraries(${program} PRIVATE dtrain_test_main dtrain::precompiled dtrain_warnings)
      set_target_properties(${program} PROPERTIES UNITY_BUILD ON)
    endif()
    target_sources(${program} PRIVATE ${T_SOURCES})
    set(tags)
    foreach(source IN LISTS T_SOURCES)
      get_filename_component(stem ${source} NAME_WE)
      list(APPEND tags "[#${stem}]~[.]")
    endforeach()
    list(JOIN tags "," tags)
    set(filter --filenames-as-tags --warn NoTests ${tags})
  else()
    add_executable(${name} ${T_SOURCES})
    target_link_libraries(${name} PRIVATE dtrain_test_main dtrain::precompiled dtrain_warnings)
  endif()
  set(quick_target FALSE)
  foreach(np IN LISTS T_RANKS)
    add_test(NAME ${name}.np${np}
             COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${DTRAIN_MPIEXEC_PREFLAGS}
                     $<TARGET_FILE:${program}> ${MPIEXEC_POSTFLAGS} ${filter})
    set(labels np${np} ${T_LABELS})
    if(np LESS_EQUAL 2 AND NOT "slow" IN_LIST T_LABELS)
      list(APPEND labels quick)
      set(quick_target TRUE)
    endif()
    set_tests_properties(${name}.np${np} PROPERTIES TIMEOUT ${T_TIMEOUT} PROCESSORS ${np}
                         LABELS "${labels}"
                         ENVIRONMENT "${DTRAIN_TEST_ENVIRONMENT};DTRAIN_TEST_NAME=${name}.np${np}")
  endforeach()
  if(quick_target)
    set_property(GLOBAL APPEND PROPERTY DTRAIN_QUICK_TEST_TARGETS ${program})
  endif()
endfunction()

# dtrain_test_tier(<label> [TESTS <tests...>] [TARGETS <targets...>])
#
# Puts tests into a tier that CI runs in a configuration of its own: the tests get the ctest label <label>
# and the build target dtrain_<label>_tests (top-level CMakeLists.txt) builds the programs they run. Without
# TESTS, every test registered so far in the calling directory joins, with every target that directory
# defined; TARGETS adds programs defined elsewhere that the tests run.
#
# Tier `mpi`: the tests whose outcome depends on the MPI library and its launcher (communication, start,
# stall and end of a job, multi-host and Slurm launches, resume at another rank count). The Open MPI
# configuration runs this tier; the computations of nn, optim, data and util do not change with the MPI
# and run in the MPICH configurations.
function(dtrain_test_tier label)
  cmake_parse_arguments(T "" "" "TESTS;TARGETS" ${ARGN})
  if(NOT T_TESTS)
    get_property(T_TESTS DIRECTORY PROPERTY TESTS)
    get_property(directory_targets DIRECTORY PROPERTY BUILDSYSTEM_TARGETS)
    foreach(t IN LISTS directory_targets)
      # Programs only, and not those left out of `all` (a program that must fail to compile is built by
      # its test itself).
      get_target_property(type ${t} TYPE)
      get_target_property(excluded ${t} EXCLUDE_FROM_ALL)
      if(type STREQUAL "EXECUTABLE" AND NOT excluded)
        list(APPEND T_TARGETS ${t})
      endif()
    endforeach()
  endif()
  if(T_TESTS)
    set_property(TEST ${T_TESTS} APPEND PROPERTY LABELS ${label})
  endif()
  set_property(GLOBAL APPEND PROPERTY DTRAIN_TIER_${label}_TARGETS ${T_TARGETS})
endfunction()
